"""Appending events outside a decision, and sealing adopted ones: the log's tail read, the core
seals, the plan applied like any other."""

from __future__ import annotations

import apsw
from aios_ledger.core import (
    AdoptionSealRequest,
    AdoptionState,
    EventAppend,
    EventRecord,
    chain_of,
    decide_adoption_seals,
)
from aios_ledger.core.plan import sealed_plan
from aios_ledger.shell.clock import read_clock, system_clock
from aios_ledger.shell.db.apply import apply_decision
from aios_ledger.shell.db.run import stream_records
from aios_ledger.shell.log.tail import read_log_tail


def append_event(conn: apsw.Connection, event: EventAppend) -> int:
    """Append one sealed event inside the caller's write transaction (tools and tests that
    build a log through the ledger's own write path); its event id."""
    tail = read_log_tail(conn, [chain_of(event.task_id)])
    plan = sealed_plan((), (event,), None, tail=tail)
    apply_decision(conn, plan)
    return plan.events[0].event_id


def seal_unsealed_events(conn: apsw.Connection) -> int:
    """Seal, in event order, every event that has no seal yet (the older runtime's, at adoption)."""
    unsealed = tuple(stream_records(conn, "unsealed_events", None, EventRecord))
    tail = read_log_tail(conn, dict.fromkeys(chain_of(event.task_id) for event in unsealed))
    state = AdoptionState(unsealed=unsealed, tail=tail)
    now = read_clock(system_clock)
    apply_decision(conn, decide_adoption_seals(state, AdoptionSealRequest(), now=now))
    return len(unsealed)
