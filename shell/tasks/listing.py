"""The task list's one query (`core/tasks/listing.py`): `GET /v1/tasks` and the console's Tasks
page both read their page here, so that what a filter means is written once."""

from __future__ import annotations

from typing import TypedDict

from aios_ledger.core.tasks.answers import TaskView, task_view
from aios_ledger.core.tasks.listing import (
    SORTED_STATUS_BOUND,
    TaskPageRequest,
    next_page_cursor,
    page_after,
    reads_by_status,
)
from aios_ledger.core.tasks.records import TaskRow
from aios_ledger.shell.db.connection import Database, fetch_all
from aios_ledger.shell.db.run import Connection, Row, fetch_value


class TaskPage(TypedDict):
    """A page of tasks, newest first, and the cursor of the next page (None: the last page)."""

    tasks: list[TaskView]
    next_cursor: str | None


def read_task_page(db: Database, request: TaskPageRequest, key: bytes) -> TaskPage:
    """The page `request` asks for; its cursor checked against `key` (`CURSOR_INVALID`)."""
    params: dict[str, object] = {
        **request.filters.params(),
        "after_seq": page_after(key, request),
        "limit": request.limit + 1,
    }
    status = request.filters.status

    def read(conn: Connection) -> list[Row]:
        counted = (
            None
            if status is None
            else fetch_value(
                conn, "tasks_count_of_status", {"status": status, "bound": SORTED_STATUS_BOUND}
            )
        )
        name = "tasks_page_of_status" if reads_by_status(request, counted) else "tasks_page"
        return fetch_all(conn, name, params)

    rows = [TaskRow.from_row(row) for row in db.read(read)]
    return {
        "tasks": [task_view(row) for row in rows[: request.limit]],
        "next_cursor": next_page_cursor(key, request, [row.seq for row in rows]),
    }
