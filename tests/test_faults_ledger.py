"""I/O faults under every ledger write: it completes, or refuses with a LedgerError, and the
database is intact and either exactly as before or has the operation fully applied.

Each operation is run once without faults on a copy of its starting database, which gives the
`applied` dump and the number of reads, writes and syncs it makes (open, operation, close); the
sweep then fails the Nth read, write or sync across that whole range, once or from then on, as an
I/O error or as a full disk. Clocks, ids and lease tokens are fixed, so that an applied
operation is byte-for-byte the reference one.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from datetime import timedelta
from functools import partial
from pathlib import Path
from typing import Any

import attrs
import pytest
from aios_ledger.core import LedgerError
from aios_ledger.shell import Database, RunStore, TaskLedger, register_binding
from engine_support import sqlite_database
from faults import OPERATIONS, FaultPlan, FaultVFS
from faults_support import (
    MODES,
    STORAGE_CODES,
    Tally,
    copy_database,
    faulted,
    integrity,
    log_intact,
    measured,
    positions,
    report,
)
from legacy_fixtures import binding, dump
from test_tasks_support import START, Clock

TOKEN = "fault-lease-token-0123456789"
LATER = START + timedelta(seconds=30)
PAST_LEASES = START + timedelta(seconds=600)

Prepare = Callable[[Path], None]
Operation = Callable[[Path, str | None], object]


@attrs.frozen
class Case:
    prepare: Prepare
    run: Operation


def _task(task_id: str, **fields: Any) -> dict[str, Any]:
    return {"task_id": task_id, "goal": "g", "instructions": "i", **fields}


def _with_ledger(
    path: Path, vfs: str | None, at: Any, work: Callable[[TaskLedger], object]
) -> None:
    with TaskLedger(path, clock=Clock(at), vfs=vfs, jitter=lambda: 0.0) as ledger:
        work(ledger)


def _prepared(*steps: Callable[[TaskLedger], object]) -> Prepare:
    def prepare(path: Path) -> None:
        with TaskLedger(path, clock=Clock(), jitter=lambda: 0.0) as ledger:
            for step in steps:
                step(ledger)

    return prepare


def _create(task_id: str) -> Callable[[TaskLedger], object]:
    return lambda ledger: ledger.create_task(_task(task_id), idempotency_key=f"create-{task_id}")


def _claim(task_id: str, token: str = TOKEN) -> Callable[[TaskLedger], object]:
    return lambda ledger: ledger.claim(
        agent_id="worker-1", capabilities=[], lease_seconds=60, task_id=task_id, lease_token=token
    )


def _submit(task_id: str) -> Callable[[TaskLedger], object]:
    return lambda ledger: ledger.submit_result(
        task_id, lease_token=TOKEN, result={"ok": True}, idempotency_key=f"submit-{task_id}"
    )


def _ledger_op(at: Any, work: Callable[[TaskLedger], object]) -> Operation:
    return lambda path, vfs: _with_ledger(path, vfs, at, work)


def _run_op(work: Callable[[RunStore], object]) -> Operation:
    def run(path: Path, vfs: str | None) -> None:
        with RunStore(path, clock=Clock(LATER), vfs=vfs) as runs:
            work(runs)

    return run


def _binding_put(path: Path, vfs: str | None) -> None:
    with Database(path, vfs=vfs) as db:
        register_binding(db, attrs.asdict(binding()), clock=Clock(LATER))


def _migrated(path: Path) -> None:
    Database(path).close()


def _with_run(path: Path) -> None:
    with RunStore(path, clock=Clock()) as runs:
        runs.create_run("session-1", "a prompt", run_id="run-1")


CASES: dict[str, Case] = {
    "task-create": Case(_migrated, _ledger_op(LATER, _create("t1"))),
    "task-create-bulk": Case(
        _prepared(_create("t0")),
        _ledger_op(
            LATER,
            lambda ledger: ledger.create_tasks(
                [(_task(f"t{i}"), f"create-t{i}") for i in range(4)]
            ),
        ),
    ),
    "task-claim": Case(
        _prepared(_create("t1"), _create("t2")),
        _ledger_op(
            LATER,
            lambda ledger: ledger.claim(
                agent_id="worker-1",
                capabilities=[],
                lease_seconds=60,
                idempotency_key="claim-1",
                lease_token=TOKEN,
            ),
        ),
    ),
    "task-heartbeat": Case(
        _prepared(_create("t1"), _claim("t1")),
        _ledger_op(
            LATER, lambda ledger: ledger.heartbeat("t1", lease_token=TOKEN, lease_seconds=90)
        ),
    ),
    "task-submit": Case(_prepared(_create("t1"), _claim("t1")), _ledger_op(LATER, _submit("t1"))),
    "task-verify": Case(
        _prepared(_create("t1"), _claim("t1"), _submit("t1")),
        _ledger_op(
            LATER,
            lambda ledger: ledger.verify(
                "t1", decision="SUCCEEDED", reason="looks right", idempotency_key="verify-t1"
            ),
        ),
    ),
    "task-submit-batch": Case(
        _prepared(_create("t1"), _create("t2"), _claim("t1"), _claim("t2", TOKEN + "-2")),
        _ledger_op(
            LATER,
            lambda ledger: ledger.submit_results(
                {
                    "task_id": task_id,
                    "lease_token": token,
                    "result": {"ok": True},
                    "idempotency_key": f"submit-{task_id}",
                }
                for task_id, token in (("t1", TOKEN), ("t2", TOKEN + "-2"))
            ),
        ),
    ),
    "task-verify-batch": Case(
        _prepared(
            _create("t1"), _create("t2"), _claim("t1"), _claim("t2"), _submit("t1"), _submit("t2")
        ),
        _ledger_op(
            LATER,
            lambda ledger: ledger.verify_results(
                {
                    "task_id": task_id,
                    "decision": decision,
                    "reason": "r",
                    "idempotency_key": task_id,
                }
                for task_id, decision in (("t1", "SUCCEEDED"), ("t2", "NEEDS_REWORK"))
            ),
        ),
    ),
    "task-cancel": Case(
        _prepared(_create("t1"), _claim("t1")),
        _ledger_op(
            LATER,
            lambda ledger: ledger.cancel("t1", reason="not needed", idempotency_key="cancel-t1"),
        ),
    ),
    "task-expire-leases": Case(
        _prepared(_create("t1"), _create("t2"), _claim("t1"), _claim("t2", TOKEN + "-2")),
        _ledger_op(PAST_LEASES, lambda ledger: ledger.expire_leases()),
    ),
    "run-create": Case(
        _migrated, _run_op(lambda runs: runs.create_run("session-1", "a prompt", run_id="run-1"))
    ),
    "run-append": Case(
        _with_run,
        _run_op(
            lambda runs: runs.append_event("run-1", "tool_call", {"name": "grep", "n": [1, 2]})
        ),
    ),
    "binding-put": Case(_migrated, _binding_put),
}


@attrs.frozen
class Reference:
    template: Path
    before: list[str]
    applied: list[str]
    counts: dict[str, int]


@pytest.fixture(scope="module")
def fault_vfs() -> Iterator[tuple[FaultVFS, FaultPlan]]:
    plan = FaultPlan()
    vfs = FaultVFS("aios-fault-ledger", plan)
    yield vfs, plan
    vfs.unregister()


@pytest.fixture(scope="module", autouse=True)
def _figures() -> Iterator[None]:
    Tally.reset()
    yield
    print("\n" + report("ledger fault sweep"))


@pytest.fixture(scope="module")
def references(
    tmp_path_factory: pytest.TempPathFactory, fault_vfs: tuple[FaultVFS, FaultPlan]
) -> dict[str, Reference]:
    vfs, plan = fault_vfs
    found = {}
    for name, case in CASES.items():
        folder = tmp_path_factory.mktemp(name)
        template = folder / "template.db"
        case.prepare(template)
        reference = copy_database(template, folder / "reference.db")
        counts = measured(plan, partial(case.run, reference, vfs.vfs_name))
        found[name] = Reference(template, dump(template), dump(reference), counts)
        print(f"\n{name}: {counts}")
        assert found[name].applied != found[name].before, f"{name} changed nothing"
    return found


@pytest.mark.parametrize("name", sorted(CASES))
@pytest.mark.parametrize("operation", OPERATIONS)
@pytest.mark.parametrize("mode", MODES, ids=[mode[0] for mode in MODES])
def test_ledger_writes_under_faults_are_all_or_nothing(
    tmp_path: Path,
    fault_vfs: tuple[FaultVFS, FaultPlan],
    references: dict[str, Reference],
    name: str,
    operation: str,
    mode: tuple[str, bool, bool],
) -> None:
    vfs, plan = fault_vfs
    _, persistent, full = mode
    case, reference = CASES[name], references[name]
    outcomes: dict[int, str] = {}
    for nth in positions(reference.counts.get(operation, 0)):
        path = copy_database(reference.template, tmp_path / f"{nth}.db")
        outcome = faulted(
            plan, operation, nth, persistent, full, partial(case.run, path, vfs.vfs_name)
        )
        outcomes[nth] = outcome
        assert integrity(path) == "ok", (nth, outcome)
        after = dump(path)
        if outcome == "completed":
            assert after == reference.applied, f"{name}: completed at #{nth} but not applied"
        else:
            assert outcome in STORAGE_CODES, (nth, outcome)
            assert after in (reference.before, reference.applied), f"#{nth}: half applied"
        assert log_intact(path), (nth, outcome)
        # A new process carries on: the ledger opens and the operation can be (re)done.
        if after == reference.before:
            case.run(path, None)
            assert dump(path) == reference.applied
    assert set(outcomes.values()) - {"completed"}, f"no fault ever hit: {outcomes}"
    last = max(outcomes)
    assert outcomes[last] == "completed" or reference.counts.get(operation, 0) == 0


@pytest.mark.parametrize("name", sorted(CASES))
def test_ledger_writes_on_a_full_database_are_all_or_nothing(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    references: dict[str, Reference],
    name: str,
) -> None:
    """A real SQLITE_FULL: `PRAGMA max_page_count` pins the database at its current size."""
    original = Database.__init__

    def pinned(self: Database, *args: Any, **kwargs: Any) -> None:
        original(self, *args, **kwargs)
        # Clamps to the current page count.
        sqlite_database(self).conn.execute("PRAGMA max_page_count = 1")

    case, reference = CASES[name], references[name]
    path = copy_database(reference.template, tmp_path / "full.db")
    monkeypatch.setattr(Database, "__init__", pinned)
    try:
        case.run(path, None)
        outcome = "completed"
    except LedgerError as refused:
        outcome = refused.code
    monkeypatch.undo()
    assert integrity(path) == "ok"
    assert log_intact(path)
    after = dump(path)
    if outcome == "completed":
        assert after == reference.applied
    else:
        assert outcome == "STORAGE_FULL"
        assert after == reference.before
        case.run(path, None)  # room again: the same operation goes through
        assert dump(path) == reference.applied
