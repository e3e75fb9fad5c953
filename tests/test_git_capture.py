"""Issue 19 item 2 end to end: a source capture of a governed binding, executed by the worker on a
real bare repository, and the recovery projection (`project_from_source_capture`) on that capture.

The seed's recovery projects the first runtime envelope onto a task whose first attempt was the
source capture of its binding: the task is unprojected (no envelope, no capability) while the
capture runs, and the capture's result echoes the source-capture envelope's digest. Here that
attempt is made by this project's own worker: the task is created, its binding registered (not
projected), a worker offering `git.read` claims it, snapshots the tree of `base_oid` itself,
heartbeats and submits; the owner verifies NEEDS_REWORK (the seed's reason), and the recovery
projection runs on the real capture."""

from __future__ import annotations

import hashlib
import json
import os
import sys
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from aios_ledger.core import GovernedExecutionBinding, TaskRow, sha256_hex
from aios_ledger.core.projection import SourceCaptureProjectionRecoveryRequest
from aios_ledger.core.projection.bindings import envelope_from_binding, source_capture_envelope
from aios_ledger.core.projection.decisions import runtime_input_of
from aios_ledger.shell.clock import AUTHORIZATION_ENV
from aios_ledger.shell.db.connection import Database, fetch_all, fetch_one
from aios_ledger.shell.git.runner import run_git
from aios_ledger.shell.git.workspace import GitWorkspaces
from aios_ledger.shell.log.verification import verify_log
from aios_ledger.shell.projection.bindings import RegisteredBindingResolver, register_binding
from aios_ledger.shell.projection.store import InitialExecutionProjectionStore
from aios_ledger.shell.tasks.ledger import TaskLedger
from aios_ledger.shell.work.worker import Worker, WorkerConfig
from git_support import (
    ADAPTER,
    AGENT,
    CAPABILITY,
    OWNER,
    binding,
    bound_task,
    events_of,
    make_repository,
    register,
)

ROOT = Path(__file__).resolve().parents[1]
REWORK = "SOURCE_CAPTURE_COMPLETE_RUNTIME_PROJECTION_REQUIRED"
# The command a capture never runs: it would fail the attempt if it did.
NEVER = f"{sys.executable} -c 'raise SystemExit(3)'"


class Captured:
    def __init__(self, root: Path) -> None:
        self.root = root
        self.db = root / "ledger.db"
        self.bare, self.base = make_repository(
            root, {"README.md": "widgets\n", "src/widget.py": "SIZE = 3\n"}
        )


@pytest.fixture
def captured(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Captured]:
    monkeypatch.setenv(AUTHORIZATION_ENV, OWNER)
    found = Captured(tmp_path)
    yield found
    with Database(found.db) as db:
        report = verify_log(db)
    assert report.intact, report.public()


def run_worker(
    db_path: Path, capabilities: tuple[str, ...], command: str = NEVER, *, later: bool = False
) -> Worker:
    """One claim by a local worker (`later`: a day on, past any retry backoff)."""
    worker = Worker(
        db_path,
        WorkerConfig(
            agent_id=AGENT, capabilities=capabilities, command=command, once=True, timeout=60
        ),
        clock=(lambda: datetime.now(UTC) + timedelta(days=1)) if later else None,
    )
    try:
        worker.run()
    finally:
        worker.close()
    return worker


def task_row(db_path: Path, task_id: str) -> TaskRow:
    with Database(db_path) as db:
        row = db.read(lambda conn: fetch_one(conn, "get_task", {"task_id": task_id}))
    assert row is not None
    return TaskRow.from_row(row)


def tree_digest(bare: Path, oid: str) -> str:
    listing = run_git(["--git-dir", str(bare), "ls-tree", "-r", "-z", "--full-tree", oid]).stdout
    return hashlib.sha256(listing).hexdigest()


def recovery_request(
    task: TaskRow, bound: GovernedExecutionBinding, envelope: dict[str, Any], key: str
) -> SourceCaptureProjectionRecoveryRequest:
    result = task.result()
    assert isinstance(result, dict)
    return SourceCaptureProjectionRecoveryRequest.from_mapping(
        {
            "expected_status": "QUEUED",
            "expected_revision": task.revision,
            "expected_attempt": task.attempt,
            "expected_metadata_sha256": sha256_hex(task.metadata()),
            "expected_required_capabilities_sha256": sha256_hex(task.required_capabilities()),
            "previous_verification_sha256": sha256_hex(task.verification()),
            "expected_source_capture_result_sha256": sha256_hex(result),
            "expected_source_capture_execution_digest": result["execution_digest"],
            "expected_job_id": bound.job_id,
            "expected_execution_digest": envelope["execution_digest"],
            "required_capability": CAPABILITY,
            "adapter": ADAPTER,
            "authorization_id": OWNER,
            "idempotency_key": key,
            "reason": "first durable runtime projection after governed source capture",
        }
    )


def test_the_recovery_projection_runs_on_the_workers_own_capture(captured: Captured) -> None:
    register(captured.db, captured.bare)
    bound = binding("task-c", captured.base)
    bound_task(captured.db, "task-c", bound)

    worker = run_worker(captured.db, ("git.read",))
    assert [(o.outcome, o.detail) for o in worker.outcomes] == [("submitted", "source captured")]
    submitted = task_row(captured.db, "task-c")
    result = submitted.result()
    assert isinstance(result, dict)
    # The capture is the worker's own: the tree of base_oid, under the binding's capture digest.
    assert result["source_snapshot"] == {
        "schema": "aios.git_tree_snapshot.v1",
        "payload_sha256": tree_digest(captured.bare, captured.base),
    }
    assert result["execution_digest"] == source_capture_envelope(bound)["execution_digest"]
    assert (result["task_id"], result["job_id"], result["base_oid"]) == (
        "task-c",
        bound.job_id,
        captured.base,
    )
    # The task stayed unprojected while it was captured.
    assert "execution" not in submitted.metadata()
    assert submitted.required_capabilities() == []

    ledger = TaskLedger(captured.db)
    try:
        verdict = ledger.verify(
            "task-c",
            decision="NEEDS_REWORK",
            reason=REWORK,
            idempotency_key="verify-capture-c",
            expected_result_digest=sha256_hex(result),
        )
    finally:
        ledger.close()
    assert (verdict["status"], verdict["attempt"]) == ("QUEUED", 1)

    task = task_row(captured.db, "task-c")
    runtime = envelope_from_binding(
        bound, capability=CAPABILITY, adapter=ADAPTER, runtime_input=runtime_input_of(task)
    )
    request = recovery_request(task, bound, runtime, "recovery-c")
    resolver = RegisteredBindingResolver(captured.db)
    store = InitialExecutionProjectionStore(captured.db, resolver)
    try:
        answer = store.project_from_source_capture("task-c", request)
        again = store.project_from_source_capture("task-c", request)
    finally:
        store.close()
        resolver.close()
    assert answer == {
        "task_id": "task-c",
        "job_id": bound.job_id,
        "status": "QUEUED",
        "revision": task.revision + 1,
        "attempt": 1,
        "execution_digest": runtime["execution_digest"],
        "action": "agent_runtime",
        "adapter": ADAPTER,
        "required_capabilities": [CAPABILITY],
        "recovery_from_source_capture": True,
        "idempotent": False,
    }
    assert again == {**answer, "idempotent": True}
    assert events_of(captured.db, "task-c") == [
        "TASK_CREATED",
        "TASK_CLAIMED",
        "TASK_HEARTBEAT",
        "RESULT_SUBMITTED",
        "TASK_VERIFIED",
        "TASK_INITIAL_EXECUTION_PROJECTION_AUTHORIZED",
    ]
    projected = task_row(captured.db, "task-c")
    assert projected.metadata()["execution"] == runtime
    assert projected.required_capabilities() == [CAPABILITY]
    with Database(captured.db) as db:
        rows = db.read(lambda conn: fetch_all(conn, "log_export_task", {"task_id": "task-c"}))
    payload = json.loads(str(rows[-1]["payload_json"]))
    assert payload["recovery_from_source_capture"] is True
    assert payload["source_capture_execution_digest"] == result["execution_digest"]
    assert payload["source_capture_result_sha256"] == sha256_hex(result)

    # The recovered task now runs as any projected one: the runtime worker gets its workspace.
    ran = run_worker(
        captured.db,
        (CAPABILITY,),
        f"{sys.executable} {ROOT / 'examples' / 'agent.py'}",
        later=True,
    )
    assert [o.outcome for o in ran.outcomes] == ["submitted"]
    assert "PROPOSAL_RECORDED" in events_of(captured.db, "task-c")


def test_a_capture_that_drifts_from_the_tree_is_refused_by_the_recovery(
    captured: Captured,
) -> None:
    """The recovery checks the real capture: the same base, another binding generation is not
    the capture of the binding it projects (`SOURCE_CAPTURE_RESULT_CONTRACT_INVALID`)."""
    from aios_ledger.core import InitialExecutionProjectionError

    register(captured.db, captured.bare)
    bound = binding("task-d", captured.base)
    bound_task(captured.db, "task-d", bound)
    run_worker(captured.db, ("git.read",))
    ledger = TaskLedger(captured.db)
    try:
        ledger.verify(
            "task-d", decision="NEEDS_REWORK", reason=REWORK, idempotency_key="verify-capture-d"
        )
    finally:
        ledger.close()
    task = task_row(captured.db, "task-d")
    other = GovernedExecutionBinding.from_mapping({**bound.public(), "generation": 2})
    runtime = envelope_from_binding(
        other, capability=CAPABILITY, adapter=ADAPTER, runtime_input=runtime_input_of(task)
    )
    store = InitialExecutionProjectionStore(captured.db, lambda *_: runtime)
    try:
        with pytest.raises(InitialExecutionProjectionError) as refused:
            store.project_from_source_capture(
                "task-d", recovery_request(task, bound, runtime, "recovery-d")
            )
    finally:
        store.close()
    assert refused.value.code == "SOURCE_CAPTURE_RESULT_CONTRACT_INVALID"
    assert "execution" not in task_row(captured.db, "task-d").metadata()


def test_only_an_unprojected_task_with_one_binding_is_captured(captured: Captured) -> None:
    """No binding, or two: the claim is not a capture (nothing says which to take); a worker
    without `git.read` never captures."""
    register(captured.db, captured.bare)
    bound = binding("task-e", captured.base)
    bound_task(captured.db, "task-e", bound)
    with Database(captured.db) as db:
        assert GitWorkspaces(captured.db, capture_unprojected=True).unprojected is not None
        register_binding(
            db,
            {**bound.public(), "job_id": "job-task-e-2", "idempotency_key": "binding-e-2"},
        )
    claimed = {"task_id": "task-e", "attempt": 1, "envelope": None, "lease_token": "t"}
    assert GitWorkspaces(captured.db, capture_unprojected=True).source_capture(claimed) is None
    missing = {**claimed, "task_id": "task-none"}
    assert GitWorkspaces(captured.db, capture_unprojected=True).source_capture(missing) is None

    bound_task(captured.db, "task-f", binding("task-f", captured.base))
    claimed_f = {**claimed, "task_id": "task-f"}
    assert GitWorkspaces(captured.db).source_capture(claimed_f) is None
    capture = GitWorkspaces(captured.db, capture_unprojected=True).source_capture(claimed_f)
    assert capture is not None
    assert capture["source_snapshot"]["payload_sha256"] == tree_digest(captured.bare, captured.base)
    # A worker without git.read runs its command on the unprojected task, as before.
    ran = run_worker(captured.db, ("agent.runtime.other",))
    assert [o.outcome for o in ran.outcomes] == ["failure-submitted"]
    assert os.environ[AUTHORIZATION_ENV] == OWNER
