"""Who held a task: the agent of each attempt's claim, from the task's sealed TASK_CLAIMED
events (`tasks.claimed_by` names only the holder of a claimed task: a submit, a release, an
expired lease and a rework clear it, as the older runtime's contract has it).

The shell reads the claims (`task_holders`, `task_last_holders`, through the index
`events_claims_by_task`); these functions say what they mean."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from aios_ledger.core.errors import LedgerError
from aios_ledger.core.jsonvalue import loads_document
from aios_ledger.core.tasks.answers import HolderView
from aios_ledger.core.tasks.records import TaskRow


def holders_of(claims: Sequence[Mapping[str, Any]]) -> list[HolderView]:
    """A task's holders, one per claim in claim order (rows of `agent_id`, `payload_json`,
    `created_at`). The attempt is the one the claim's payload names; a claim the older runtime
    recorded without one (its payload `{}`) counts by its place among the task's claims, as
    every claim takes the next attempt."""
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
    """Who holds the task now while it is claimed (`claimed_by`), else the agent of its last
    claim (`last_claimer`; None for a task never claimed)."""
    return task.claimed_by if task.claimed_by is not None else last_claimer
