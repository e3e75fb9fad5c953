"""Who held a task, read from its sealed claims by an index read each."""

from __future__ import annotations

import json
from collections.abc import Sequence

from aios_ledger.core.tasks.answers import HolderView, TaskView, task_view
from aios_ledger.core.tasks.holders import holders_of, last_holder
from aios_ledger.core.tasks.records import TaskRow
from aios_ledger.shell.db.connection import fetch_all
from aios_ledger.shell.db.run import Connection


def task_views(conn: Connection, tasks: Sequence[TaskRow]) -> list[TaskView]:
    """The tasks' views with their last holders: one read for those not claimed now (a
    claimed task's holder is its `claimed_by`), none when every one is."""
    unclaimed = [task.task_id for task in tasks if task.claimed_by is None]
    claimers: dict[str, str | None] = {}
    if unclaimed:
        rows = fetch_all(conn, "task_last_holders", {"task_ids_json": json.dumps(unclaimed)})
        claimers = {str(row["task_id"]): row["last_holder"] for row in rows}
    return [task_view(task, last_holder(task, claimers.get(task.task_id))) for task in tasks]


def task_holders(conn: Connection, task_id: str) -> list[HolderView]:
    """The holder of each of the task's attempts, in claim order."""
    return holders_of(fetch_all(conn, "task_holders", {"task_id": task_id}))
