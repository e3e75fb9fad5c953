"""Who held a task, from its sealed TASK_CLAIMED events, since `tasks.claimed_by` names only the
current holder."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from aios_ledger.core.errors import LedgerError
from aios_ledger.core.jsonvalue import loads_document
from aios_ledger.core.tasks.answers import HolderView
from aios_ledger.core.tasks.records import TaskRow


def holders_of(claims: Sequence[Mapping[str, Any]]) -> list[HolderView]:
    return [
        {
            "attempt": _attempt(claim["payload_json"], place),
            "agent_id": claim["agent_id"],
            "claimed_at": claim["created_at"],
        }
        for place, claim in enumerate(claims, start=1)
    ]


def _attempt(payload_json: object, place: int) -> int:
    try:
        payload = (
            loads_document(payload_json, what="payload_json")
            if isinstance(payload_json, str)
            else None
        )
    except LedgerError:
        return place
    attempt = payload.get("attempt") if isinstance(payload, dict) else None
    if isinstance(attempt, int) and not isinstance(attempt, bool) and attempt >= 1:
        return attempt
    return place


def last_holder(task: TaskRow, last_claimer: str | None) -> str | None:
    return task.claimed_by if task.claimed_by is not None else last_claimer
