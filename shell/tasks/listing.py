"""The task list's one query (`core/tasks/listing.py`): `GET /v1/tasks` and the console's Tasks
page both read their page here, so that what a filter means is written once."""

from __future__ import annotations

from typing import TypedDict

from aios_ledger.core.tasks.answers import TaskView
from aios_ledger.core.tasks.listing import (
    SCAN_BOUND,
    SORTED_FILTERS,
    TaskPageRequest,
    filter_bound,
    next_page_cursor,
    page_after,
    page_statement,
    scan_floor,
    sorted_filter_given,
)
from aios_ledger.core.tasks.records import TaskRow
from aios_ledger.shell.db.connection import Database, fetch_all
from aios_ledger.shell.db.run import Connection, fetch_one, fetch_value
from aios_ledger.shell.tasks.holders import task_views


class TaskPage(TypedDict):
    """A page of tasks, newest first, and the cursor of the next page (None: the last page)."""

    tasks: list[TaskView]
    next_cursor: str | None


def read_task_page(db: Database, request: TaskPageRequest, key: bytes) -> TaskPage:
    """The page `request` asks for; its cursor checked against `key` (`CURSOR_INVALID`)."""
    filters = request.filters
    after_seq = page_after(key, request)
    params: dict[str, object] = {
        **filters.params(),
        "after_seq": after_seq,
        "limit": request.limit + 1,
        "floor_seq": 0,
    }

    def read(conn: Connection) -> tuple[list[TaskView], list[int], int | None]:
        counted = {
            name: int(
                fetch_value(conn, f"tasks_count_of_{name}", {**params, "bound": filter_bound(name)})
            )
            for name in SORTED_FILTERS
            if sorted_filter_given(filters, name)
        }
        name = page_statement(request, counted)
        scanned_to: int | None = None
        if name == "tasks_page":
            window = fetch_one(conn, "tasks_scan_window", {"after_seq": after_seq})
            assert window is not None
            scanned_to = scan_floor(window["top_seq"], window["bottom_seq"], SCAN_BOUND)
            params["floor_seq"] = scanned_to or 0
        rows = [TaskRow.from_row(row) for row in fetch_all(conn, name, params)]
        # The page's last holders in the same read: as of the same snapshot as its rows.
        return task_views(conn, rows[: request.limit]), [row.seq for row in rows], scanned_to

    views, seqs, scanned_to = db.read(read)
    return {"tasks": views, "next_cursor": next_page_cursor(key, request, seqs, scanned_to)}
