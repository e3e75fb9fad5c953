"""Applying a decision's plan: the one write path every store shares."""

from __future__ import annotations

import apsw
from aios_ledger.core import LedgerError, Replay, WritePlan
from aios_ledger.shell.db.connection import execute
from aios_ledger.shell.log.append import append_event


def apply_decision(
    conn: apsw.Connection,
    decision: WritePlan | Replay,
    *,
    error: type[LedgerError] = LedgerError,
) -> dict[str, object]:
    """Apply a plan inside the caller's `BEGIN IMMEDIATE`; a replay writes nothing."""
    if isinstance(decision, Replay):
        return dict(decision.response)
    for write in decision.writes:
        changed = execute(conn, write.statement, write.params)
        if write.guarded and changed != 1:
            raise error(
                "REVISION_CONFLICT",
                f"{write.statement} changed {changed} rows: the row moved on since it was read",
            )
    for event in decision.events:
        append_event(conn, event)
    return dict(decision.response)
