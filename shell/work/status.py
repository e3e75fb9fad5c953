"""The status report `aios-ledger status` and `GET /v1/status` both answer."""

from __future__ import annotations

from typing import Any

from aios_ledger.core.tasks.status import EXPIRING_WINDOW_SECONDS, status_report
from aios_ledger.core.timestamps import Timestamp
from aios_ledger.shell.db.connection import fetch_all, fetch_one, fetch_value
from aios_ledger.shell.tasks.spend import read_spend

# How many leases about to expire, and how many last events, the report lists.
STATUS_ROWS = 10


def read_status(conn: Any, now: Timestamp) -> dict[str, Any]:
    until = now.plus_seconds(EXPIRING_WINDOW_SECONDS).text
    # Soonest first: the leases ending within the window are the first of the held ones.
    held = fetch_all(conn, "console_tasks_held", {"limit": STATUS_ROWS})
    expiring = [
        {name: row[name] for name in ("task_id", "claimed_by", "lease_expires_at")}
        for row in held
        if row["lease_expires_at"] is not None and str(row["lease_expires_at"]) <= until
    ]
    return status_report(
        fetch_all(conn, "status_counts"),
        fetch_one(conn, "status_oldest_queued"),
        expiring,
        fetch_all(conn, "status_last_events", {"limit": STATUS_ROWS}),
        now=now.text,
        spend=read_spend(conn),
        awaiting_projection=fetch_value(conn, "status_awaiting_projection"),
    )
