"""The `status` summary: assembled purely from what the shell read."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from aios_ledger.core.actors import actor_public
from aios_ledger.core.tasks.transitions import TaskStatus

EXPIRING_WINDOW_SECONDS = 60
# How many rows of each spend table a report holds (by task: the largest first).
SPEND_ROWS = 20
# The spend tables, by what they sum over: each statement's name and its key column.
SpendGroups = tuple[tuple[str, str, tuple[str, ...]], ...]
SPEND_GROUPS: SpendGroups = (
    ("by_task", "spend_by_task", ("task_id",)),
    ("by_agent", "spend_by_agent", ("agent_id",)),
    ("by_repository", "spend_by_repository", ("repository",)),
    ("by_day", "spend_by_day", ("day",)),
)
# What /metrics reads: the spend of each agent in each repository, and of the latest days.
METRIC_SPEND_GROUPS: SpendGroups = (
    ("by_agent_and_repository", "spend_by_agent_and_repository", ("agent_id", "repository")),
    ("by_day", "spend_by_day", ("day",)),
)
_SPEND_SUMS = ("reports", "input_tokens", "output_tokens", "cost_micros", "over_budget")


def status_report(
    counts: Sequence[Mapping[str, Any]],
    oldest_queued: Mapping[str, Any] | None,
    expiring: Sequence[Mapping[str, Any]],
    last_events: Sequence[Mapping[str, Any]],
    *,
    now: str,
    spend: Mapping[str, Any] | None = None,
    awaiting_projection: int = 0,
) -> dict[str, Any]:
    """`expiring`: leases ending within the window, earliest first; passed ones are expired."""
    by_status = {status.value: 0 for status in TaskStatus}
    for row in counts:
        by_status[str(row["status"])] = int(row["tasks"])
    return {
        "now": now,
        "tasks": by_status,
        "total": sum(by_status.values()),
        "oldest_queued": None if oldest_queued is None else dict(oldest_queued),
        "awaiting_projection": int(awaiting_projection),
        "leases_expiring_within_seconds": EXPIRING_WINDOW_SECONDS,
        "leases_expired": [dict(row) for row in expiring if str(row["lease_expires_at"]) <= now],
        "leases_expiring": [dict(row) for row in expiring if str(row["lease_expires_at"]) > now],
        # The actor as the API's events show it, not its stored JSON text.
        "last_events": [{**row, "actor": actor_public(row.get("actor"))} for row in last_events],
        **({} if spend is None else {"spend": dict(spend)}),
    }


def spend_report(
    groups: Mapping[str, Sequence[Mapping[str, Any]]], tables: SpendGroups = SPEND_GROUPS
) -> dict[str, Any]:
    """What tasks spent by each of `tables` (`SPEND_GROUPS`; /metrics: `METRIC_SPEND_GROUPS`),
    per currency, as currencies do not add."""
    return {
        name: [_spend_row(row, keys) for row in groups.get(name, ())] for name, _, keys in tables
    }


def _spend_row(row: Mapping[str, Any], keys: Sequence[str]) -> dict[str, Any]:
    return {
        **{key: row[key] for key in keys},
        "currency": row["cost_currency"],
        **{column: int(row[column] or 0) for column in _SPEND_SUMS},
    }
