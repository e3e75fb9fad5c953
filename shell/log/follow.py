"""`aios-ledger events --follow`: the log's new events as they are sealed, until Ctrl-C; the
cursor (`core/log/follow.py`) says where each poll reads from."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from typing import IO, Any

from aios_ledger.core.log.follow import FollowCursor
from aios_ledger.core.log.records import EventRow
from aios_ledger.core.tasks.answers import EventView, event_view
from aios_ledger.shell.db.connection import Database, fetch_all, fetch_value

PAGE = 1000
# Where ids are not in commit order, read back over this many polls.
POSTGRESQL_SETTLE_POLLS = 20


def log_end(db: Database) -> int:
    """The highest event id now: a follower started without `--after` prints what comes next."""
    return int(db.read(lambda conn: fetch_value(conn, "log_max_event_id")))


def follow_events(
    db: Database,
    out: IO[str],
    *,
    after: int,
    task_id: str | None,
    interval: float,
    line: Callable[[EventView], str],
    sleep: Callable[[float], None] = time.sleep,
) -> None:
    """Print each new event as `line` renders it, forever (a KeyboardInterrupt ends it)."""
    settle = 1 if db.dense_event_ids else POSTGRESQL_SETTLE_POLLS
    cursor = FollowCursor(after=after, settle_polls=settle)
    while True:
        rows = _page(db, cursor.after, task_id)
        fresh, cursor = cursor.advance([int(row["event_id"]) for row in rows])
        wanted = set(fresh)
        for row in rows:
            if row["event_id"] in wanted:
                out.write(line(event_view(EventRow.from_row(row))) + "\n")
        out.flush()
        if len(rows) < PAGE:
            sleep(interval)


def _page(db: Database, after: int, task_id: str | None) -> list[dict[str, Any]]:
    if task_id is None:
        params: dict[str, Any] = {"after": after, "limit": PAGE}
        return db.read(lambda conn: fetch_all(conn, "events_after", params))
    params = {"after": after, "limit": PAGE, "task_id": task_id}
    return db.read(lambda conn: fetch_all(conn, "events_after_for_task", params))


def json_line(event: EventView) -> str:
    return json.dumps(event, sort_keys=True, ensure_ascii=True)
