"""The Tasks page (`/tasks`): the task list through the API's own query, with its filters and
the counts by status; its script follows the event stream to keep them fresh."""

from __future__ import annotations

from typing import Any

from aios_ledger.core.tasks.listing import SCAN_BOUND, TaskFilters, TaskPageRequest
from aios_ledger.core.tasks.transitions import TaskStatus
from aios_ledger.shell.api.app import READERS
from aios_ledger.shell.api.stream import stream_start
from aios_ledger.shell.db.connection import fetch_all
from aios_ledger.shell.tasks.listing import read_task_page
from aios_ledger.shell.web.console import Page, Rendered, Visit

PAGE_SIZE = 50
FILTER_FIELDS = tuple(field.name for field in TaskFilters.__attrs_attrs__)


TIME_FIELDS = frozenset({"created_from", "created_to", "updated_from", "updated_to"})


def _as_utc(text: str) -> str:
    """A `datetime-local` field's value, which the form says is UTC, as an RFC 3339 time."""
    if len(text) == len("2026-01-01T00:00") and text[10:11] == "T":
        return f"{text}:00Z"
    if len(text) == len("2026-01-01T00:00:00") and text[10:11] == "T":
        return f"{text}Z"
    return text


def tasks_page(visit: Visit) -> Rendered:
    given = {name: visit.query(name) for name in FILTER_FIELDS}
    mapping: dict[str, object] = {
        name: _as_utc(value) if name in TIME_FIELDS else value
        for name, value in given.items()
        if value
    }
    cursor = visit.query("cursor")
    if cursor is not None:
        mapping["cursor"] = cursor
    request = TaskPageRequest.from_mapping({**mapping, "limit": PAGE_SIZE})
    key = visit.backend.cursor_key

    def read(stores: Any) -> tuple[Any, list[Any], int]:
        # Read first, so that an event sealed meanwhile is streamed again, never missed.
        _, after = stores.db.read(lambda conn: stream_start(conn, None))
        page = read_task_page(stores.db, request, key)
        counts = stores.db.read(lambda conn: fetch_all(conn, "status_counts"))
        return page, counts, after

    page, counts, after = visit.backend.read_now(read)
    by_status = {str(row["status"]): int(row["tasks"]) for row in counts}
    return Rendered(
        "tasks.html",
        {
            "tasks": page["tasks"],
            "next_cursor": page["next_cursor"],
            "filters": {name: value or "" for name, value in given.items()},
            "filtered": bool(mapping),
            "statuses": [status.value for status in TaskStatus],
            "counts": [(status.value, by_status.get(status.value, 0)) for status in TaskStatus],
            "total": sum(by_status.values()),
            "after": after,
            # A short page with a next one: its read stopped at the scan bound.
            "bounded": page["next_cursor"] is not None and len(page["tasks"]) < PAGE_SIZE,
            "scan_bound": SCAN_BOUND,
            "cursor": cursor,
        },
    )


PAGES = (Page("/tasks", "tasksPage", tasks_page, READERS, nav="Tasks"),)
