"""A task's history as a person reads it: one line per sealed event, refused attempts included, with
who, which attempt and why."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import TypedDict

from aios_ledger.core.actors import actor_label_of
from aios_ledger.core.tasks.answers import EventView
from aios_ledger.core.tasks.refusals import REFUSAL_EVENTS
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
    actor: str
    attempt: int
    decision: str | None
    reason: str | None
    next_state: str | None


def task_history(events: Iterable[EventView], attempt: int = 0) -> list[HistoryEntry]:
    """The history of the events in order; `attempt`: the attempt in effect before the first."""
    entries: list[HistoryEntry] = []
    for event in events:
        named = named_attempt(event)
        if named is not None:
            attempt = named
        payload = event["payload"] if isinstance(event["payload"], dict) else {}
        kind = event["event_type"]
        entries.append(
            {
                "event_id": event["event_id"],
                "time": event["created_at"],
                "event": kind,
                "agent": event["agent_id"],
                "actor": actor_label_of(event["actor"]),
                "attempt": attempt,
                "decision": _text(payload.get("decision")),
                "reason": _refusal(payload)
                if kind in REFUSAL_EVENTS
                else _text(payload.get("reason")),
                "next_state": _text(payload.get("next_state")) or _STATE_AFTER.get(kind),
            }
        )
    return entries


def named_attempt(event: EventView) -> int | None:
    payload = event["payload"]
    named = payload.get("attempt") if isinstance(payload, dict) else None
    return named if type(named) is int else None


def _refusal(payload: Mapping[str, object]) -> str:
    return f"{payload.get('code')}: {payload.get('message')}"


def _text(value: object) -> str | None:
    return value if isinstance(value, str) else None
