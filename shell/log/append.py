"""Appending events and sealing them, inside the caller's write transaction."""

from __future__ import annotations

from typing import Any

import apsw
from aios_ledger.core import (
    GENESIS_SEAL,
    ChainTip,
    EventAppend,
    SealedEvent,
    chain_of,
    seal_to_store,
)
from aios_ledger.shell.db.run import execute, fetch_all, fetch_record, fetch_value


def append_event(conn: apsw.Connection, event: EventAppend) -> int:
    payload_json = event.payload_json()
    event_id = int(
        fetch_value(
            conn,
            "insert_event",
            {
                "task_id": event.task_id,
                "agent_id": event.agent_id,
                "event_type": event.event_type,
                "payload_json": payload_json,
                "created_at": event.created_at,
            },
        )
    )
    _seal(
        conn,
        event_id,
        event.task_id,
        event.agent_id,
        event.event_type,
        payload_json,
        event.created_at,
        adoption=False,
    )
    return event_id


def seal_unsealed_events(conn: apsw.Connection) -> int:
    """Seal, in event order, every event that has no seal yet (the older runtime's, at adoption)."""
    rows = fetch_all(conn, "unsealed_events")
    for row in rows:
        _seal(
            conn,
            row["event_id"],
            row["task_id"],
            row["agent_id"],
            row["event_type"],
            row["payload_json"],
            row["created_at"],
            adoption=True,
        )
    return len(rows)


def _seal(
    conn: apsw.Connection,
    event_id: int,
    task_id: Any,
    agent_id: Any,
    event_type: Any,
    payload_json: Any,
    created_at: Any,
    *,
    adoption: bool,
) -> None:
    chain = chain_of(task_id)
    tip = fetch_record(conn, "chain_tip", {"chain": chain}, ChainTip)
    chain_seq = 1 if tip is None else int(tip.chain_seq) + 1
    prev_seal = GENESIS_SEAL if tip is None else str(tip.seal)
    sealed = SealedEvent(
        event_id=event_id,
        task_id=task_id,
        agent_id=agent_id,
        event_type=event_type,
        payload_json=payload_json,
        created_at=created_at,
        chain_seq=chain_seq,
        prev_seal=prev_seal,
    )
    execute(
        conn,
        "insert_seal",
        {
            "event_id": event_id,
            "chain": chain,
            "chain_seq": chain_seq,
            "prev_seal": prev_seal,
            "seal": seal_to_store(sealed),
            "sealed_at_adoption": int(adoption),
        },
    )
