"""The `status` summary: assembled purely from what the shell read, rendered as a table."""

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
    by_status = {status.value: 0 for status in TaskStatus}
    for row in counts:
        by_status[str(row["status"])] = int(row["tasks"])
    return {
        "now": now,
        "tasks": by_status,
        "total": sum(by_status.values()),
        "oldest_queued": None if oldest_queued is None else dict(oldest_queued),
        "leases_expiring_within_seconds": EXPIRING_WINDOW_SECONDS,
        "leases_expiring": [dict(row) for row in expiring],
        "last_events": [dict(row) for row in last_events],
    }


def render_status(report: Mapping[str, Any]) -> str:
    lines = [f"aios-ledger status at {report['now']}", ""]
    lines.append("  ".join(f"{status} {count}" for status, count in report["tasks"].items()))
    oldest = report["oldest_queued"]
    lines.append(
        "oldest queued: "
        + ("none" if oldest is None else f"{oldest['task_id']} since {oldest['created_at']}")
    )
    expiring = report["leases_expiring"]
    window = report["leases_expiring_within_seconds"]
    lines.append(f"leases expiring within {window}s: {len(expiring)}")
    lines += [
        f"  {row['task_id']}  held by {row['claimed_by']}  until {row['lease_expires_at']}"
        for row in expiring
    ]
    lines += ["", "last events:"]
    lines += [
        f"  #{row['event_id']:<6} {row['created_at']}  {row['event_type']:<44} "
        f"{row['task_id'] or '-'}"
        for row in report["last_events"]
    ]
    return "\n".join(lines) + "\n"
