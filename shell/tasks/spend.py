"""What tasks spent, read for `status`, GET /v1/spend and /metrics, summed by task, agent,
repository and UTC day."""

from __future__ import annotations

from typing import Any

from aios_ledger.core.tasks.status import (
    METRIC_SPEND_GROUPS,
    SPEND_GROUPS,
    SPEND_ROWS,
    metric_spend_report,
    spend_report,
)
from aios_ledger.shell.db.run import Connection, fetch_all

# How many rows of each table /metrics reads: every agent in every repository, in practice.
METRIC_SPEND_ROWS = 10_000


def read_spend(conn: Connection, *, limit: int = SPEND_ROWS) -> dict[str, Any]:
    return spend_report(
        {name: fetch_all(conn, statement, {"limit": limit}) for name, statement, _ in SPEND_GROUPS}
    )


def read_metric_spend(conn: Connection) -> dict[str, Any]:
    limit = {"limit": METRIC_SPEND_ROWS}
    return metric_spend_report(
        {name: fetch_all(conn, statement, limit) for name, statement, _ in METRIC_SPEND_GROUPS}
    )
