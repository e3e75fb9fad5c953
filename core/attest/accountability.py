"""Who did what to one task, read from its sealed events, never from a column a later write could
have cleared (a task's `claimed_by` is cleared at submit)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, TypedDict

from aios_ledger.core.actors import actor_label_of
from aios_ledger.core.git.decisions import OUTCOME_EVENTS
from aios_ledger.core.projection.decisions import PROJECTION_EVENT
from aios_ledger.core.tasks.answers import EventView
from aios_ledger.core.tasks.refusals import REFUSAL_EVENTS

_WRITE_OUTCOMES = {event: state for state, event in OUTCOME_EVENTS.items()}


class Accountability(TypedDict):
    """One task's record as a person asks it, each actor as a person reads it."""

    task_id: str
    created_by: str | None
    projected_by: str | None
    held_by: list[str]
    verified_by: list[str]
    written: list[str]
    refused: list[str]


def _payload(event: EventView) -> Mapping[str, Any]:
    payload = event["payload"]
    return payload if isinstance(payload, Mapping) else {}


def who_did_what(task_id: str, events: Iterable[EventView]) -> Accountability:
    record: Accountability = {
        "task_id": task_id,
        "created_by": None,
        "projected_by": None,
        "held_by": [],
        "verified_by": [],
        "written": [],
        "refused": [],
    }
    for event in events:
        kind = event["event_type"]
        by = actor_label_of(event["actor"])
        payload = _payload(event)
        if kind == "TASK_CREATED":
            record["created_by"] = by
        elif kind == PROJECTION_EVENT:
            record["projected_by"] = by
        elif kind == "TASK_CLAIMED":
            record["held_by"].append(f"attempt {payload.get('attempt', '?')}: {event['agent_id']}")
        elif kind == "TASK_VERIFIED":
            # The ledger's own verdict is made in its submitter's write, which its actor names.
            judge = f"the ledger (automatic, in {by}'s submit)" if payload.get("automatic") else by
            record["verified_by"].append(f"{payload.get('decision')} by {judge}")
        elif kind in _WRITE_OUTCOMES:
            ref = payload.get("ref") or payload.get("branch") or "?"
            record["written"].append(f"{_WRITE_OUTCOMES[kind]} {ref} (asked by {by})")
        elif kind in REFUSAL_EVENTS:
            record["refused"].append(f"{payload.get('code')} (tried by {by})")
    return record
