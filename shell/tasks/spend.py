"""What tasks spent, read for `status`, GET /v1/spend and /metrics, summed by task, agent,
repository and UTC day."""

from __future__ import annotations

from typing import Any

from aios_ledger.core.tasks.status import (
    METRIC_SPEND_GROUPS,
    SPEND_GROUPS,
    SPEND_ROWS,
    SpendGroups,
    spend_report,
)
from aios_ledger.shell.db.run import Connection, fetch_all

# How many rows of each table /metrics reads: every agent in every repository, in practice.
METRIC_SPEND_ROWS = 10_000


def read_spend(
    conn: Connection, *, limit: int = SPEND_ROWS, tables: SpendGroups = SPEND_GROUPS
) -> dict[str, Any]:
    params = {"limit": limit}
    read = {name: fetch_all(conn, statement, params) for name, statement, _ in tables}
    return spend_report(read, tables)


def read_metric_spend(conn: Connection) -> dict[str, Any]:
    return read_spend(conn, limit=METRIC_SPEND_ROWS, tables=METRIC_SPEND_GROUPS)
