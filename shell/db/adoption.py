"""Sealing, at adoption, the events the older runtime stored without seals."""

from __future__ import annotations

from aios_ledger.core import EventRow, chain_of
from aios_ledger.core.log import AdoptionSealRequest, AdoptionState, decide_adoption_seals
from aios_ledger.shell.clock import read_clock, system_clock
from aios_ledger.shell.db.apply import apply_decision
from aios_ledger.shell.db.run import Connection, stream_records
from aios_ledger.shell.db.tail import read_log_tail


def seal_unsealed_events(conn: Connection) -> int:
    unsealed = tuple(stream_records(conn, "unsealed_events", None, EventRow))
    tail = read_log_tail(conn, dict.fromkeys(chain_of(event.task_id) for event in unsealed))
    state = AdoptionState(unsealed=unsealed, tail=tail)
    now = read_clock(system_clock)
    apply_decision(conn, decide_adoption_seals(state, AdoptionSealRequest(), now=now))
    return len(unsealed)
