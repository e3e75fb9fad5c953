"""A task's console page reads only the events it shows: its window by a keyset read (and one
more, to know of an older window), the count and last id from the task's index, the governed
writes' events and the attempts' claims, submissions and verdicts by type; never the task's
every event. Counted in event rows the engine's
connection returns, on both engines: the same for a page however long the task has lived."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import apsw
import pytest
from aios_ledger.core.tasks.requests import PauseRequest, ResumeRequest
from aios_ledger.shell.api.backend import Stores
from aios_ledger.shell.clock import system_clock
from aios_ledger.shell.db.connection import Database
from aios_ledger.shell.db.engines.postgresql import PgConnection
from aios_ledger.shell.db.engines.sqlite import SqliteConnection
from aios_ledger.shell.db.statements import statements
from aios_ledger.shell.tasks.ledger import TaskLedger
from aios_ledger.shell.web.task_record import EVENTS_SHOWN, TaskRecord, read_task_record
from conftest import both_engines
from schema_support import schema_script

pytest_generate_tests = both_engines

TOKEN = "t" * 43
PAGE_READS = (
    "console_task_event_count",
    "console_task_events_before",
    "console_task_marks",
    "console_task_refusals",
)


@pytest.fixture
def event_rows_read(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[int]]:
    """How many `events` rows (a row with an event_type) each engine's reads return."""
    counted = [0]
    for connection in (SqliteConnection, PgConnection):
        original = connection.fetch_all

        def counting(self: Any, name: str, params: Any = None, *, _read: Any = original) -> Any:
            rows = _read(self, name, params)
            counted[0] += sum(1 for row in rows if "event_type" in row)
            return rows

        monkeypatch.setattr(connection, "fetch_all", counting)
    yield counted


def claimed_task(ledger: TaskLedger) -> str:
    task_id = str(
        ledger.create_task(
            {"goal": "g", "instructions": "i", "required_capabilities": ["python"]},
            idempotency_key="create-1",
        )["task_id"]
    )
    claim(ledger, task_id, TOKEN)
    return task_id


def claim(ledger: TaskLedger, task_id: str, token: str) -> None:
    ledger.claim(
        agent_id="agent-1",
        capabilities=["python"],
        lease_seconds=300,
        task_id=task_id,
        lease_token=token,
    )


def heartbeats(ledger: TaskLedger, task_id: str, count: int, token: str = TOKEN) -> None:
    for _ in range(count):
        ledger.heartbeat(task_id, lease_token=token, lease_seconds=300)


def read_counted(stores: Stores, task_id: str, before: int | None, counted: list[int]) -> Any:
    counted[0] = 0
    record = read_task_record(stores, task_id, before)
    return record, counted[0]


def the_history_shown(stores: Stores, record: TaskRecord, task_id: str) -> list[Any]:
    shown = {event["event_id"] for event in record.events}
    return [entry for entry in stores.tasks.history(task_id) if entry["event_id"] in shown]


def test_a_tasks_page_reads_the_same_rows_however_many_events_it_has(
    ledger_target: Path, event_rows_read: list[int]
) -> None:
    with Database(ledger_target) as db:
        ledger = TaskLedger(database=db)
        stores = Stores(db, system_clock)
        task_id = claimed_task(ledger)
        heartbeats(ledger, task_id, 3 * EVENTS_SHOWN)
        latest, read = read_counted(stores, task_id, None, event_rows_read)
        earlier_window = latest.earlier
        assert earlier_window is not None
        older, read_older = read_counted(stores, task_id, earlier_window, event_rows_read)
        heartbeats(ledger, task_id, 3 * EVENTS_SHOWN)
        longer, read_longer = read_counted(stores, task_id, None, event_rows_read)
        older_again, read_older_again = read_counted(
            stores, task_id, earlier_window, event_rows_read
        )
        # The window and one more below it, and the attempt's claim: not the task's 152
        # events, twice.
        assert read == read_longer == EVENTS_SHOWN + 1 + 1
        assert read_older == read_older_again == EVENTS_SHOWN + 1 + 1
        assert longer.event_count == 2 + 6 * EVENTS_SHOWN
        assert len(longer.events) == EVENTS_SHOWN and longer.latest
        assert older_again.events == older.events and not older_again.latest
        for record in (latest, older, longer, older_again):
            assert record.history == the_history_shown(stores, record, task_id)
            assert {entry["attempt"] for entry in record.history} == {1}
        ledger.close()


def test_each_window_shows_the_attempt_of_the_last_earlier_event_that_names_one(
    ledger_target: Path,
) -> None:
    """Paused and resumed between its attempts, the task's windows hold events that name no
    attempt (TASK_PAUSED, TASK_RESUMED): each window's history is the task's history of its
    events, the attempt read back across more than a window of them."""
    with Database(ledger_target) as db:
        ledger = TaskLedger(database=db)
        stores = Stores(db, system_clock)
        task_id = claimed_task(ledger)
        heartbeats(ledger, task_id, 3)
        ledger.release(task_id, lease_token=TOKEN, reason="back to the queue")
        for n in range(2 * EVENTS_SHOWN):
            move = {"task_id": task_id, "reason": "a freeze", "idempotency_key": f"pause-{n}"}
            ledger.apply(PauseRequest.from_mapping(move))
            ledger.apply(ResumeRequest.from_mapping({**move, "idempotency_key": f"resume-{n}"}))
        second = "u" * 43
        claim(ledger, task_id, second)
        heartbeats(ledger, task_id, 3, second)
        shown: list[Any] = []
        before: int | None = None
        while True:
            record = read_task_record(stores, task_id, before)
            assert record.history == the_history_shown(stores, record, task_id)
            shown = record.history + shown
            if record.earlier is None:
                break
            before = record.earlier
        assert shown == stores.tasks.history(task_id)
        assert [entry["attempt"] for entry in shown if entry["event"] == "TASK_PAUSED"] == [1] * (
            2 * EVENTS_SHOWN
        )
        ledger.close()


@pytest.mark.parametrize("name", PAGE_READS)
def test_each_read_of_the_page_searches_the_tasks_index(name: str) -> None:
    """SQLite's plan: down events_by_task (task_id, event_id), never a scan of the events."""
    conn = apsw.Connection(":memory:")
    conn.execute(schema_script())
    params = {"task_id": "t", "before": 10, "limit": EVENTS_SHOWN + 1}
    plan = [str(row[3]) for row in conn.execute(statements("sqlite")[name].sql, params, explain=2)]
    conn.close()
    assert "INDEX events_by_task" in plan[0], plan
    assert not any(step.startswith("SCAN") or "TEMP B-TREE" in step for step in plan), plan
