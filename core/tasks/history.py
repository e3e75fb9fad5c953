"""A task's history as a person reads it: one line per sealed event, with who, which attempt,
and why (the reason, the decision, the state it led to).

Pure: built from the task's events in order. The attempt of an event that does not name one is
the attempt of the claim before it (0 before the first claim).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import TypedDict

from aios_ledger.core.tasks.answers import EventView
from aios_ledger.core.tasks.transitions import TaskStatus

# The state an event leaves its task in, when its payload does not say (`next_state`).
_STATE_AFTER: Mapping[str, TaskStatus] = {
    "TASK_CREATED": TaskStatus.QUEUED,
    "TASK_CLAIMED": TaskStatus.CLAIMED,
    "TASK_HEARTBEAT": TaskStatus.CLAIMED,
    "RESULT_SUBMITTED": TaskStatus.SUBMITTED,
    "TASK_CANCELLED": TaskStatus.CANCELLED,
    "TASK_REQUEUED": TaskStatus.QUEUED,
}


class HistoryEntry(TypedDict):
    event_id: int
    time: str
    event: str
    agent: str | None
    attempt: int
    decision: str | None
    reason: str | None
    next_state: str | None


def task_history(events: Iterable[EventView]) -> list[HistoryEntry]:
    entries: list[HistoryEntry] = []
    attempt = 0
    for event in events:
        payload = event["payload"] if isinstance(event["payload"], dict) else {}
        named = payload.get("attempt")
        if type(named) is int:
            attempt = named
        kind = event["event_type"]
        entries.append(
            {
                "event_id": event["event_id"],
                "time": event["created_at"],
                "event": kind,
                "agent": event["agent_id"],
                "attempt": attempt,
                "decision": _text(payload.get("decision")),
                "reason": _text(payload.get("reason")),
                "next_state": _text(payload.get("next_state")) or _STATE_AFTER.get(kind),
            }
        )
    return entries


def _text(value: object) -> str | None:
    return value if isinstance(value, str) else None
