"""PostgreSQL's writers of different tasks run side by side (issue 20): a task's transitions
hold its row lock and the ledger lock shared, the claim skips what another claimer has locked,
and every other write still waits for all of them. Each test holds a transaction open on a raw
connection (or inside the ledger, through its clock) and shows what runs past it and what waits.
"""

from __future__ import annotations

import concurrent.futures
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from typing import Any

import psycopg
import pytest
from aios_ledger.core import LedgerError
from aios_ledger.core.log.seals import LEDGER_CHAIN
from aios_ledger.shell import TaskLedger, ledger_head, verify_log
from aios_ledger.shell.api.tokens import issue_token
from aios_ledger.shell.db.apply import PlanExecutor
from aios_ledger.shell.db.engines.postgresql import PostgresTarget
from aios_ledger.shell.db.run import Connection
from conftest import postgres_url

# A bound on waiting for a write that is not blocked on a lock (it finishes in milliseconds,
# but a loaded machine may take its time): a write that is blocked never finishes within it
# (its lock is held until the wait is over), so a pass never hangs and a failure fails.
SETTLE = 60.0
# How long a write that must wait is watched to still be waiting.
WAITING = 0.5
WRITE_LOCK = "SELECT pg_advisory_xact_lock{mode}(hashtext('aios_ledger write ' || %s))"


@pytest.fixture
def pg(postgres_database: str | None) -> str:
    return postgres_url(postgres_database)


@pytest.fixture
def ledger(pg: str) -> Iterator[TaskLedger]:
    with TaskLedger(pg) as opened:
        yield opened


@pytest.fixture
def other(pg: str) -> Iterator[psycopg.Connection[Any]]:
    """A raw connection to the ledger's schema, for a transaction the test holds open."""
    target = PostgresTarget.parse(pg)
    with psycopg.connect(target.conninfo, **target.connect_options()) as conn:
        yield conn


def search_path(conn: psycopg.Connection[Any]) -> str:
    return str(conn.execute("SELECT current_setting('search_path')").fetchone()[0])  # type: ignore[index]


def hold_write_lock(conn: psycopg.Connection[Any], *, shared: bool) -> None:
    """What a writer in flight holds: the ledger lock, shared (a task's transition) or not."""
    path = search_path(conn)
    conn.execute(WRITE_LOCK.format(mode="_shared" if shared else ""), (path,))


@contextmanager
def writer_in_flight(
    conn: psycopg.Connection[Any], *, shared: bool, task_id: str | None = None
) -> Iterator[None]:
    """A transaction held open on `conn` as a writer in flight holds it: the ledger lock
    (shared: a task's transition) and, given `task_id`, that task's row."""
    with conn.transaction():
        hold_write_lock(conn, shared=shared)
        if task_id is not None:
            conn.execute("SELECT 1 FROM tasks WHERE task_id = %s FOR UPDATE", (task_id,))
        yield


def queued(ledger: TaskLedger, count: int, capability: str = "cap.x") -> list[str]:
    return [
        ledger.create_task(
            {"goal": f"g{n}", "instructions": "i", "required_capabilities": [capability]},
            idempotency_key=f"create-{capability}-{n}",
        )["task_id"]
        for n in range(count)
    ]


def claim(ledger: TaskLedger, agent: str = "agent-1") -> dict[str, Any] | None:
    answer = ledger.claim(agent_id=agent, capabilities=["cap.x"], lease_seconds=60)
    return None if answer is None else dict(answer)


def test_a_transition_runs_beside_another_tasks_transition_in_flight(
    ledger: TaskLedger, other: psycopg.Connection[Any]
) -> None:
    first, second = queued(ledger, 2)
    held = claim(ledger)
    mine = claim(ledger, "agent-2")
    assert held is not None and mine is not None
    assert {held["task_id"], mine["task_id"]} == {first, second}
    # The pool outlives the held transaction: a write that waits (a failure) ends with it.
    # A heartbeat of the first task in flight: the ledger lock shared, its row locked.
    in_flight = writer_in_flight(other, shared=True, task_id=held["task_id"])
    with concurrent.futures.ThreadPoolExecutor(1) as pool, in_flight:
        beat = pool.submit(
            ledger.heartbeat, mine["task_id"], lease_token=mine["lease_token"], lease_seconds=60
        )
        # The exclusive lock of old would have waited for the transaction above.
        assert beat.result(timeout=SETTLE)["task_id"] == mine["task_id"]
    assert verify_log(ledger.database).intact


def test_the_same_tasks_writers_take_turns_and_the_second_reads_what_the_first_wrote(
    pg: str,
) -> None:
    """Two heartbeats of one task: the second waits on the row lock, then reads the row the
    first committed (READ COMMITTED re-reads a locked row), so it is no REVISION_CONFLICT and
    their events follow each other on the task's chain."""
    inside = threading.Event()
    go_on = threading.Event()

    def clock() -> datetime:
        # A transition reads the clock after it has locked its task's row.
        if threading.current_thread().name == "held" and not go_on.is_set():
            inside.set()
            assert go_on.wait(SETTLE)
        return datetime.now(UTC)

    with TaskLedger(pg, clock=clock) as ledger:
        (task,) = queued(ledger, 1)
        claimed = claim(ledger)
        assert claimed is not None
        token = claimed["lease_token"]

        def beat() -> dict[str, Any]:
            return dict(ledger.heartbeat(task, lease_token=token, lease_seconds=60))

        first = threading.Thread(target=beat, name="held")
        first.start()
        assert inside.wait(SETTLE)
        with concurrent.futures.ThreadPoolExecutor(1) as pool:
            second = pool.submit(beat)
            with pytest.raises(concurrent.futures.TimeoutError):
                second.result(timeout=WAITING)
            go_on.set()
            first.join(SETTLE)
            assert second.result(timeout=SETTLE)["revision"] == claimed["revision"] + 2
        kinds = [event["event_type"] for event in ledger.events(task)]
        assert kinds[-2:] == ["TASK_HEARTBEAT", "TASK_HEARTBEAT"]
        assert verify_log(ledger.database).intact


def test_a_claim_skips_the_task_another_claimer_has_locked(
    ledger: TaskLedger, other: psycopg.Connection[Any]
) -> None:
    first, second = queued(ledger, 2)
    in_flight = writer_in_flight(other, shared=True, task_id=first)
    with concurrent.futures.ThreadPoolExecutor(1) as pool, in_flight:
        taken = pool.submit(claim, ledger).result(timeout=SETTLE)
    # Not the first in claim order (locked), not nothing, and no wait.
    assert taken is not None and taken["task_id"] == second
    again = claim(ledger)
    assert again is not None and again["task_id"] == first


def test_concurrent_claims_lock_only_what_they_take(pg: str) -> None:
    """Ten claimers at once over ten tasks: each gets one, none is answered "nothing", even
    though every claim locks its task until it commits."""
    with TaskLedger(pg) as ledger:
        tasks = set(queued(ledger, 10))
    ledgers = [TaskLedger(pg) for _ in range(10)]
    try:
        with concurrent.futures.ThreadPoolExecutor(10) as pool:
            answers = list(
                pool.map(lambda n: claim(ledgers[n], f"agent-{n}"), range(10), timeout=SETTLE)
            )
        assert all(answer is not None for answer in answers)
        assert {answer["task_id"] for answer in answers if answer is not None} == tasks
        assert verify_log(ledgers[0].database).intact
    finally:
        for opened in ledgers:
            opened.close()


def test_a_claim_passes_over_tasks_whose_capabilities_it_lacks_in_sql(ledger: TaskLedger) -> None:
    """The SKIP LOCKED batch holds only tasks this claimer may take: tasks it cannot take that
    come first in claim order are neither locked nor read by the core."""
    queued(ledger, 3, capability="cap.other")
    (mine,) = queued(ledger, 1)
    taken = claim(ledger)
    assert taken is not None and taken["task_id"] == mine
    assert claim(ledger) is None


def test_an_exclusive_write_waits_for_the_transitions_in_flight(
    ledger: TaskLedger, other: psycopg.Connection[Any], pg: str
) -> None:
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        with writer_in_flight(other, shared=True):
            issued = pool.submit(issue_token, ledger.database, "auditor-1", ["auditor"])
            with pytest.raises(concurrent.futures.TimeoutError):
                issued.result(timeout=WAITING)
        assert issued.result(timeout=SETTLE)["name"] == "auditor-1"


def test_a_transition_waits_for_an_exclusive_write_in_flight(
    ledger: TaskLedger, other: psycopg.Connection[Any]
) -> None:
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        with writer_in_flight(other, shared=False):
            created = pool.submit(queued, ledger, 1)
            with pytest.raises(concurrent.futures.TimeoutError):
                created.result(timeout=WAITING)
        assert len(created.result(timeout=SETTLE)) == 1


def test_a_head_waits_for_the_writers_in_flight(
    ledger: TaskLedger, other: psycopg.Connection[Any]
) -> None:
    """A writer in flight may hold an id below the newest committed one; a head read now
    would be passed by its commit. The head waits for it instead (and writers that arrive
    meanwhile queue behind the head, as PostgreSQL queues a shared lock behind a waiting
    exclusive one)."""
    queued(ledger, 1)
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        with writer_in_flight(other, shared=True):
            head = pool.submit(ledger_head, ledger.database)
            with pytest.raises(concurrent.futures.TimeoutError):
                head.result(timeout=WAITING)
        assert head.result(timeout=SETTLE).events == 1


def test_events_are_sealed_v5_and_numbered_by_the_sequence(
    ledger: TaskLedger, other: psycopg.Connection[Any]
) -> None:
    """Ids rise along each chain and may have gaps (a rolled-back writer's): verify reads no
    gap as a removed event here, and the seals do not cover the ids."""
    (task,) = queued(ledger, 1)
    other.execute("SELECT nextval('event_ids') FROM generate_series(1, 5)")  # drawn, unused
    claimed = claim(ledger)
    assert claimed is not None
    rows = other.execute(
        "SELECT event_id, chain_seq, seal_version FROM event_seals WHERE chain = %s"
        " ORDER BY chain_seq",
        (f"task:{task}",),
    ).fetchall()
    assert [row[2] for row in rows] == [5, 5]
    ids = [row[0] for row in rows]
    assert ids[1] - ids[0] > 1  # the gap
    report = verify_log(ledger.database)
    assert report.intact
    assert report.events == 2


def test_a_row_locked_write_refuses_to_extend_the_ledger_chain(pg: str) -> None:
    def extend(conn: Connection) -> object:
        return PlanExecutor(conn).tail(LEDGER_CHAIN)

    with TaskLedger(pg) as ledger, pytest.raises(LedgerError) as refused:
        ledger.database.write(extend, row_locked=True)
    assert refused.value.code == "STORAGE_ERROR"


def test_a_claim_is_timed_after_the_writes_of_its_task_it_waited_for(pg: str) -> None:
    """A claim reads the clock as it begins; beside other writers its task may be created,
    claimed and released after that. Its event is timed once the task is locked, so time never
    goes back along the task's events (with the time of its start, it would)."""
    began = datetime.now(UTC)
    reading = threading.Event()
    released = threading.Event()
    first = [True]

    def clock() -> datetime:
        if threading.current_thread().name.startswith("late-claimer") and first[0]:
            first[0] = False
            reading.set()
            assert released.wait(SETTLE)
            return began  # what it read as it began, before everything below
        return datetime.now(UTC)

    with TaskLedger(pg, clock=clock) as ledger:
        with concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="late-claimer") as pool:
            late = pool.submit(claim, ledger, "agent-late")
            assert reading.wait(SETTLE)
            (task,) = queued(ledger, 1)
            held = claim(ledger)
            assert held is not None and held["task_id"] == task
            ledger.release(task, lease_token=held["lease_token"], reason="handing over")
            released.set()
            taken = late.result(timeout=SETTLE)
        assert taken is not None and taken["task_id"] == task
        events = ledger.events(task)
        assert [event["event_type"] for event in events] == [
            "TASK_CREATED",
            "TASK_CLAIMED",
            "TASK_RELEASED",
            "TASK_CLAIMED",
        ]
        moments = [event["created_at"] for event in events]
        assert moments == sorted(moments)
