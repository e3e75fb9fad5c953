"""The `status` summary: assembled purely from what the shell read."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from aios_ledger.core.tasks.transitions import TaskStatus

EXPIRING_WINDOW_SECONDS = 60


def status_report(
    counts: Sequence[Mapping[str, Any]],
    oldest_queued: Mapping[str, Any] | None,
    expiring: Sequence[Mapping[str, Any]],
    last_events: Sequence[Mapping[str, Any]],
    *,
    now: str,
) -> dict[str, Any]:
    """`expiring`: CLAIMED tasks whose leases end within the window, earliest first. A lease
    that has already passed is expired (the next claim takes the task over), not expiring."""
    by_status = {status.value: 0 for status in TaskStatus}
    for row in counts:
        by_status[str(row["status"])] = int(row["tasks"])
    return {
        "now": now,
        "tasks": by_status,
        "total": sum(by_status.values()),
        "oldest_queued": None if oldest_queued is None else dict(oldest_queued),
        "leases_expiring_within_seconds": EXPIRING_WINDOW_SECONDS,
        "leases_expired": [dict(row) for row in expiring if str(row["lease_expires_at"]) <= now],
        "leases_expiring": [dict(row) for row in expiring if str(row["lease_expires_at"]) > now],
        "last_events": [dict(row) for row in last_events],
    }
