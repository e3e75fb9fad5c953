"""Group commit (shell/db/group_commit.py): writes from many threads share commits, a refused
work inside a batch rolls back alone (its savepoint) and does not disturb its neighbours, a
failed COMMIT reaches every waiter, reads never see a batch before its commit, and a lease
renewal (a heartbeat) is committed ahead of the writes queued before it.

To put several works in one batch without depending on timing, a `Gate` work holds the writer
inside its transaction until the others are queued (`GroupCommit.queued()`)."""

from __future__ import annotations

import functools
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import apsw
import pytest
from aios_ledger.core import LedgerError, SqlWrite, Statement, WritePlan
from aios_ledger.shell import Database, TaskLedger, verify_log
from aios_ledger.shell.db import group_commit
from aios_ledger.shell.db.apply import apply_decision
from aios_ledger.shell.db.group_commit import GroupCommit
from aios_ledger.shell.db.run import Connection
from engine_support import sqlite_database
from faults import FaultPlan, FaultVFS

PATIENCE = 60.0  # seconds; a safety bound on waits, never an assertion about speed


def _task(task_id: str, goal: str = "g") -> dict[str, Any]:
    return {"task_id": task_id, "goal": goal, "instructions": "i"}


def _creating(ledger: TaskLedger, task_id: str) -> Callable[[], object]:
    return functools.partial(ledger.create_task, _task(task_id), idempotency_key=task_id)


class Gate:
    """A work that holds the writer (inside its BEGIN IMMEDIATE) until opened; `write_run`
    makes it insert a run first, so that an uncommitted write exists while it waits."""

    def __init__(self, db: Database, *, write_run: str | None = None) -> None:
        self.entered = threading.Event()
        self._open = threading.Event()
        self._run_id = write_run
        self._thread = threading.Thread(target=db.write, args=(self._work,))
        self._thread.start()
        assert self.entered.wait(PATIENCE)

    def _work(self, conn: Connection) -> None:
        if self._run_id is not None:
            apply_decision(conn, _insert_run(self._run_id))
        self.entered.set()
        assert self._open.wait(PATIENCE)

    def open(self) -> None:
        self._open.set()
        self._thread.join(PATIENCE)


def _insert_run(run_id: str) -> WritePlan[None]:
    params = {"run_id": run_id, "session_id": "s", "prompt": "p", "created_at": "2026-01-01"}
    write = SqlWrite(Statement.INSERT_RUN, params)
    return WritePlan(writes=(write,), events=(), response=None, tail=None)


def _wait_queued(group: GroupCommit, count: int) -> None:
    deadline = time.monotonic() + PATIENCE
    while group.queued() < count:
        assert time.monotonic() < deadline, f"{group.queued()} of {count} works queued"
        time.sleep(0.001)


class Caller:
    """A call on a thread of its own; its answer or its error once joined."""

    def __init__(self, call: Callable[[], object]) -> None:
        self.answer: object = None
        self.error: BaseException | None = None
        self._call = call
        self._thread = threading.Thread(target=self._run)
        self._thread.start()

    def _run(self) -> None:
        try:
            self.answer = self._call()
        except BaseException as exc:
            self.error = exc

    def join(self) -> Caller:
        self._thread.join(PATIENCE)
        assert not self._thread.is_alive()
        return self

    def code(self) -> str | None:
        return self.error.code if isinstance(self.error, LedgerError) else None


def _queue_in_order(group: GroupCommit, calls: list[Callable[[], object]]) -> list[Caller]:
    """Start each call once the one before it is queued, so the batch holds them in order."""
    callers = []
    for position, call in enumerate(calls, start=1):
        callers.append(Caller(call))
        _wait_queued(group, position)
    return callers


@pytest.fixture
def ledger(tmp_path: Path) -> Iterator[TaskLedger]:
    with TaskLedger(tmp_path / "ledger.db") as opened:
        yield opened


def test_many_threads_share_commits_and_every_write_is_committed(ledger: TaskLedger) -> None:
    sizes: list[int] = []
    group = ledger.database.start_group_commit(max_batch=64, on_batch=sizes.append)
    threads, lifecycles = 12, 4

    def agent(number: int) -> None:
        for serial in range(lifecycles):
            task_id = f"task-{number}-{serial}"
            ledger.create_task(_task(task_id), idempotency_key=f"create-{task_id}")
            claim = ledger.claim(
                agent_id=f"agent-{number}", capabilities=[], lease_seconds=60, task_id=task_id
            )
            assert claim is not None
            token = claim["lease_token"]
            ledger.heartbeat(task_id, lease_token=token, lease_seconds=60)
            ledger.submit_result(
                task_id, lease_token=token, result={"summary": "done"}, idempotency_key=task_id
            )

    gate = Gate(ledger.database)
    callers = [Caller(functools.partial(agent, number)) for number in range(threads)]
    _wait_queued(group, threads)
    gate.open()
    for caller in callers:
        assert caller.join().error is None

    stats = group.stats()
    assert stats["works"] == 1 + threads * lifecycles * 4 == sum(sizes)
    assert stats["batches"] == len(sizes) < stats["works"]
    assert stats["largest_batch"] == max(sizes) >= threads  # the queued first writes, together
    submitted = ledger.list_tasks("SUBMITTED", limit=1000)
    assert len(submitted) == threads * lifecycles
    for task in submitted:
        kinds = [event["event_type"] for event in ledger.events(task["task_id"])]
        assert kinds == ["TASK_CREATED", "TASK_CLAIMED", "TASK_HEARTBEAT", "RESULT_SUBMITTED"]
    ledger.database.stop_group_commit()
    assert verify_log(ledger.database).intact


def test_a_refused_work_rolls_back_alone_and_its_neighbours_commit(ledger: TaskLedger) -> None:
    ledger.create_task(_task("task-taken"), idempotency_key="key-taken")
    claim = ledger.claim(agent_id="a", capabilities=[], lease_seconds=60, task_id="task-taken")
    assert claim is not None
    before = ledger.events("task-taken")
    sizes: list[int] = []
    group = ledger.database.start_group_commit(on_batch=sizes.append)

    gate = Gate(ledger.database)
    first, refused, stale, last = _queue_in_order(
        group,
        [
            lambda: ledger.create_task(_task("task-a"), idempotency_key="key-a"),
            # Writes task-b (item 1), then item 2 reuses a key for another task and is refused:
            # without its savepoint, task-b would be committed with the neighbours, or the
            # rollback would take the neighbours with it.
            lambda: ledger.create_tasks(
                [(_task("task-b"), "key-b"), (_task("task-other", "other"), "key-taken")]
            ),
            # A stale holder's submit (not a heartbeat: a renewal commits in a batch of its own).
            lambda: ledger.submit_result(
                "task-taken", lease_token="x" * 32, result={"summary": "s"}, idempotency_key="s"
            ),
            lambda: ledger.create_task(_task("task-c"), idempotency_key="key-c"),
        ],
    )
    gate.open()
    for caller in (first, refused, stale, last):
        caller.join()

    assert sizes == [1, 4]  # the gate alone, then the four in one commit
    assert first.error is None and last.error is None
    assert refused.code() == "IDEMPOTENCY_CONFLICT"
    assert stale.code() is not None
    with pytest.raises(LedgerError) as missing:
        ledger.get("task-b")
    assert missing.value.code == "TASK_NOT_FOUND"
    assert ledger.get("task-a")["status"] == ledger.get("task-c")["status"] == "QUEUED"
    assert ledger.events("task-taken") == before
    assert [task["task_id"] for task in ledger.list_tasks()] == ["task-taken", "task-a", "task-c"]
    ledger.database.stop_group_commit()
    assert verify_log(ledger.database).intact


def _claimed(ledger: TaskLedger, task_id: str) -> str:
    ledger.create_task(_task(task_id), idempotency_key=f"create-{task_id}")
    claim = ledger.claim(agent_id="a", capabilities=[], lease_seconds=60, task_id=task_id)
    assert claim is not None
    return str(claim["lease_token"])


def test_a_heartbeat_commits_before_the_writes_queued_ahead_of_it(ledger: TaskLedger) -> None:
    token = _claimed(ledger, "task-held")
    sizes: list[int] = []
    group = ledger.database.start_group_commit(on_batch=sizes.append)
    gate = Gate(ledger.database)
    creates = _queue_in_order(group, [_creating(ledger, f"task-{n}") for n in range(3)])
    beat = Caller(lambda: ledger.heartbeat("task-held", lease_token=token, lease_seconds=90))
    _wait_queued(group, 4)
    gate.open()
    for caller in (*creates, beat):
        assert caller.join().error is None

    # The gate alone, the renewal alone (queued last, committed first), then the creates.
    assert sizes == [1, 1, 3]
    heartbeat_event = ledger.events("task-held")[-1]
    assert heartbeat_event["event_type"] == "TASK_HEARTBEAT"
    created = [ledger.events(f"task-{n}")[0]["event_id"] for n in range(3)]
    assert heartbeat_event["event_id"] < min(created)
    ledger.database.stop_group_commit()
    assert verify_log(ledger.database).intact


def test_a_running_batch_commits_early_for_a_waiting_heartbeat(
    ledger: TaskLedger, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The first work of a batch of three waits until a heartbeat is queued: the batch commits
    that work alone, the heartbeat commits next, the two works not started after it."""
    monkeypatch.setattr(group_commit, "URGENT_CUT_SECONDS", 0.0)
    token = _claimed(ledger, "task-held")
    sizes: list[int] = []
    group = ledger.database.start_group_commit(on_batch=sizes.append)
    beats: list[Caller] = []

    def first(conn: Connection) -> None:
        beats.append(
            Caller(lambda: ledger.heartbeat("task-held", lease_token=token, lease_seconds=90))
        )
        _wait_queued(group, 1)  # the batch's own works are taken: this is the heartbeat

    gate = Gate(ledger.database)
    callers = _queue_in_order(
        group,
        [
            functools.partial(ledger.database.write, first),
            _creating(ledger, "task-1"),
            _creating(ledger, "task-2"),
        ],
    )
    gate.open()
    for caller in callers:
        assert caller.join().error is None
    assert beats[0].join().error is None

    assert sizes == [1, 1, 1, 2]
    assert group.stats()["works"] == 5  # each work counted once, in the commit that held it
    ids = [ledger.events(name)[-1]["event_id"] for name in ("task-held", "task-1", "task-2")]
    assert ledger.events("task-held")[-1]["event_type"] == "TASK_HEARTBEAT"
    assert ids == sorted(ids)
    ledger.database.stop_group_commit()
    assert verify_log(ledger.database).intact


def test_a_failed_commit_reaches_every_waiter_and_writes_nothing(tmp_path: Path) -> None:
    plan = FaultPlan()
    vfs = FaultVFS("aios-fault-group-commit", plan)
    try:
        with TaskLedger(tmp_path / "ledger.db", vfs=vfs.vfs_name) as ledger:
            group = ledger.database.start_group_commit()
            gate = Gate(ledger.database)  # writes nothing: its COMMIT syncs nothing
            names = ["task-1", "task-2", "task-3"]
            callers = _queue_in_order(
                group,
                [_creating(ledger, name) for name in names],
            )
            plan.arm("sync", 1)  # the batch's COMMIT is the first sync
            gate.open()
            codes = [caller.join().code() for caller in callers]
            plan.disarm()
            assert plan.injected == 1
            assert codes == ["STORAGE_IO_ERROR"] * 3
            assert ledger.list_tasks() == []
            # The writer carries on after the failed batch.
            ledger.create_task(_task("task-4"), idempotency_key="task-4")
            assert [task["task_id"] for task in ledger.list_tasks()] == ["task-4"]
    finally:
        vfs.unregister()


def test_reads_use_their_own_connections_and_never_see_an_open_batch(tmp_path: Path) -> None:
    with Database(tmp_path / "ledger.db") as db:

        def runs(conn: Connection) -> list[str]:
            assert isinstance(conn, apsw.Connection)  # group commit is SQLite's
            return [row[0] for row in conn.execute("SELECT run_id FROM runs")]

        group = db.start_group_commit()
        gate = Gate(db, write_run="run-1")  # inserted, not committed yet
        assert db.read(runs) == []
        assert Caller(lambda: db.read(runs)).join().answer == []
        gate.open()
        assert db.read(runs) == ["run-1"]
        assert group.stats()["batches"] == 1


def test_stopping_drains_the_queue_and_refuses_later_writes(ledger: TaskLedger) -> None:
    group = ledger.database.start_group_commit()
    gate = Gate(ledger.database)
    callers = _queue_in_order(
        group,
        [_creating(ledger, name) for name in ("task-1", "task-2")],
    )
    stopper = threading.Thread(target=ledger.database.stop_group_commit)
    stopper.start()
    gate.open()
    stopper.join(PATIENCE)
    assert [caller.join().error for caller in callers] == [None, None]
    with pytest.raises(LedgerError) as refused:
        group.write(lambda conn: None)
    assert refused.value.code == "GROUP_COMMIT_STOPPED"
    # Without group commit the Database writes on the caller's thread again.
    ledger.create_task(_task("task-3"), idempotency_key="task-3")
    assert len(ledger.list_tasks()) == 3


def test_group_commit_refuses_an_in_memory_database_and_a_bad_batch_size(tmp_path: Path) -> None:
    with Database(None) as memory, pytest.raises(LedgerError) as refused:
        memory.start_group_commit()
    assert refused.value.code == "GROUP_COMMIT_UNAVAILABLE"
    with Database(tmp_path / "ledger.db") as db:
        for bad in (0, -1, True, 10**9):
            with pytest.raises(LedgerError) as invalid:
                db.start_group_commit(max_batch=bad)
            assert invalid.value.code == "MAX_BATCH_INVALID"
        assert sqlite_database(db).group_commit is None
