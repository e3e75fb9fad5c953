"""The worker and the reviewer on the command line, with the example programs as their agent
commands; a worker that is signalled or killed runs as a process of its own. A worker that
must not claim before a lease or a backoff has passed runs here, on a clock moved past it."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Mapping
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from aios_ledger.core import TaskView, Timestamp
from aios_ledger.shell.clock import Clock, system_clock
from aios_ledger.shell.tasks.ledger import TaskLedger
from aios_ledger.shell.work.worker import Worker, WorkerConfig
from cli_runner import CliResult, run_cli
from signal_support import interruptible

ROOT = Path(__file__).resolve().parents[1]
AGENT = f"{sys.executable} {ROOT / 'examples' / 'agent.py'}"
REVIEWER = f"{sys.executable} {ROOT / 'examples' / 'reviewer.py'}"


def cli(db: Path, *argv: str, env: Mapping[str, str] | None = None) -> CliResult:
    return run_cli("--db", db, *argv, env=env)


def spawn_worker(db: Path, *argv: str) -> subprocess.Popen[str]:
    """A running worker, for a test to signal (SIGINT included, as Ctrl-C would)."""
    return subprocess.Popen(
        interruptible(
            [sys.executable, "-m", "aios_ledger.shell.cli", "--db", str(db), "worker", *argv]
        ),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def create(db: Path, task_id: str, **fields: Any) -> None:
    ledger = TaskLedger(db)
    ledger.create_task(
        {
            "task_id": task_id,
            "goal": f"goal of {task_id}",
            "instructions": "do it",
            "success_criteria": [{"id": "done", "description": "it is done"}],
            "required_capabilities": [],
            "constraints": {},
            "metadata": {},
            "priority": 0,
            "max_attempts": 3,
            **fields,
        },
        idempotency_key=f"create-{task_id}",
    )
    ledger.close()


def task(db: Path, task_id: str) -> TaskView:
    ledger = TaskLedger(db)
    try:
        return ledger.get(task_id)
    finally:
        ledger.close()


def event_types(db: Path, task_id: str) -> list[str]:
    ledger = TaskLedger(db)
    try:
        return [event["event_type"] for event in ledger.events(task_id)]
    finally:
        ledger.close()


def wait_until_due(db: Path, task_id: str) -> None:
    """A reworked task comes back after its backoff: no claim takes it before `not_before`."""
    due = task(db, task_id)["not_before"]
    if due is not None:
        now = Timestamp.from_datetime(datetime.now(UTC)).epoch_ms
        time.sleep(max(0.0, (Timestamp.parse(due).epoch_ms - now) / 1000) + 0.05)


def after_backoff(db: Path, task_id: str) -> Clock:
    """A clock run on to the task's `not_before` (a reworked task comes back after its
    backoff, and no claim takes it before), so that the test does not wait the backoff out."""
    due = task(db, task_id)["not_before"]
    now = datetime.now(UTC)
    ahead = timedelta(0) if due is None else Timestamp.parse(due).to_datetime() - now
    return lambda: datetime.now(UTC) + max(ahead, timedelta(0))


def test_worker_and_reviewer_take_a_task_through_one_rework(tmp_path: Path) -> None:
    db = tmp_path / "ledger.db"
    create(db, "task-e2e", retry={"base_seconds": 1, "max_seconds": 1})
    clock: Clock = system_clock
    for attempt in (1, 2):
        config = WorkerConfig(agent_id="w1", capabilities=(), command=AGENT, until_empty=True)
        worker = Worker(db, config, clock=clock)
        try:
            worker.run()
        finally:
            worker.close()
        assert [(o.outcome, o.attempt) for o in worker.outcomes] == [("submitted", attempt)]
        reviewed = cli(db, "review", "--as", "r1", "--exec", REVIEWER)
        assert reviewed.returncode == 0, reviewed.stderr
        decision = json.loads(reviewed.stdout)["reviews"][0]["decision"]
        assert decision == ("NEEDS_REWORK" if attempt == 1 else "SUCCEEDED")
        clock = after_backoff(db, "task-e2e")
    final = task(db, "task-e2e")
    assert (final["status"], final["attempt"]) == ("SUCCEEDED", 2)
    assert event_types(db, "task-e2e") == [
        "TASK_CREATED",
        "TASK_CLAIMED",
        "RESULT_SUBMITTED",
        "TASK_VERIFIED",
        "TASK_CLAIMED",
        "RESULT_SUBMITTED",
        "TASK_VERIFIED",
    ]
    evidence = cli(db, "run", "evidence", "task:task-e2e", "task-e2e@1")
    assert evidence.returncode == 0, evidence.stderr
    lines = [e["payload"].get("line") for e in json.loads(evidence.stdout)["events"]]
    assert "done" in lines


def test_a_killed_worker_is_rescued_after_its_lease(tmp_path: Path) -> None:
    db = tmp_path / "ledger.db"
    create(db, "task-rescue")
    slow = f"EXAMPLE_AGENT_DELAY=60 {AGENT}"
    first = spawn_worker(
        db, "--agent-id", "doomed", "--exec", slow, "--lease-seconds", "2", "--once"
    )
    deadline = time.monotonic() + 30
    while task(db, "task-rescue")["status"] != "CLAIMED":
        assert time.monotonic() < deadline
        time.sleep(0.1)
    first.send_signal(signal.SIGKILL)
    first.wait(timeout=10)
    # The rescuer's clock runs 3 s ahead: past the dead worker's 2 s lease, without waiting it.
    config = WorkerConfig(agent_id="rescuer", capabilities=(), command=AGENT, until_empty=True)
    rescuer = Worker(db, config, clock=lambda: datetime.now(UTC) + timedelta(seconds=3))
    try:
        rescuer.run()
    finally:
        rescuer.close()
    assert [outcome.outcome for outcome in rescuer.outcomes] == ["submitted"]
    final = task(db, "task-rescue")
    assert (final["status"], final["attempt"], final["claimed_by"]) == ("SUBMITTED", 2, None)
    assert "TASK_LEASE_EXPIRED" in event_types(db, "task-rescue")


def test_a_command_that_hangs_past_the_timeout_submits_a_failure(tmp_path: Path) -> None:
    db = tmp_path / "ledger.db"
    create(db, "task-hang")
    worked = cli(db, "worker", "--agent-id", "w", "--exec", "sleep 60", "--timeout", "1", "--once")
    assert worked.returncode == 0, worked.stderr
    final = task(db, "task-hang")
    assert final["status"] == "SUBMITTED"
    # Stopped by the timeout: a command that ended by itself, printing nothing, would be
    # `invalid_output`.
    assert final["result"]["status"] == "FAILED" and final["result"]["failure"] == "timeout"


@pytest.mark.parametrize(
    ("command", "failure"),
    [
        ("echo this is not json", "invalid_output"),
        ("echo '[1, 2]'", "invalid_output"),
        ("printf '\\377\\376'", "invalid_output"),
        ("echo oops >&2; exit 3", "exit_status"),
        # A program named outright is checked at start-up (EXEC_NOT_FOUND); one the shell finds
        # missing only as it runs is a failure of the task.
        ("exec /nonexistent/program", "exit_status"),
    ],
)
def test_garbage_or_failure_is_submitted_as_a_failure(
    tmp_path: Path, command: str, failure: str
) -> None:
    db = tmp_path / "ledger.db"
    create(db, "task-garbage")
    worked = cli(db, "worker", "--agent-id", "w", "--exec", command, "--once")
    assert worked.returncode == 0, worked.stderr
    result = task(db, "task-garbage")["result"]
    assert (result["status"], result["failure"]) == ("FAILED", failure)


def test_sigterm_lets_the_running_command_finish_then_exits(tmp_path: Path) -> None:
    db = tmp_path / "ledger.db"
    create(db, "task-term")
    create(db, "task-after")
    # The command marks its start: a SIGTERM between the claim and the command's start releases
    # the task instead (nothing is running yet), so the signal waits for the mark.
    started = tmp_path / "started"
    slow = f"touch {started} && EXAMPLE_AGENT_DELAY=1.5 {AGENT}"
    worker = spawn_worker(db, "--agent-id", "w", "--exec", slow, "--grace", "30")
    deadline = time.monotonic() + 30
    while not started.exists():
        assert time.monotonic() < deadline
        time.sleep(0.05)
    worker.send_signal(signal.SIGTERM)
    out, err = worker.communicate(timeout=60)
    assert worker.returncode == 0, err
    assert "SIGTERM" in err
    statuses = sorted([task(db, "task-term")["status"], task(db, "task-after")["status"]])
    assert statuses == ["QUEUED", "SUBMITTED"]
    assert len(json.loads(out)["tasks"]) == 1


def test_a_task_without_envelope_takes_any_json_object(tmp_path: Path) -> None:
    db = tmp_path / "ledger.db"
    create(db, "task-plain")
    worked = cli(
        db, "worker", "--agent-id", "w", "--exec", 'echo \'{"status": "SUCCEEDED"}\'', "--once"
    )
    assert worked.returncode == 0, worked.stderr
    assert task(db, "task-plain")["result"] == {"status": "SUCCEEDED"}


def test_status_reports_counts(tmp_path: Path) -> None:
    db = tmp_path / "ledger.db"
    create(db, "task-a")
    answer = cli(db, "status", "--json")
    assert answer.returncode == 0, answer.stderr
    report = json.loads(answer.stdout)
    assert report["tasks"]["QUEUED"] == 1
    assert report["oldest_queued"]["task_id"] == "task-a"
    piped = cli(db, "status")  # not a terminal: JSON (the table is for terminals)
    assert json.loads(piped.stdout)["tasks"] == report["tasks"]


def test_environment_reaches_the_command(tmp_path: Path) -> None:
    db = tmp_path / "ledger.db"
    create(db, "task-env")
    script = (
        "import json, os, sys; claim = json.load(sys.stdin); "
        "json.dump({'task': os.environ['AIOS_TASK_ID'], 'attempt': os.environ['AIOS_ATTEMPT'], "
        "'token_hidden': 'lease_token' not in claim}, sys.stdout)"
    )
    worked = cli(
        db,
        "worker",
        "--agent-id",
        "w",
        "--exec",
        f'{sys.executable} -c "{script}"',
        "--once",
        env={**os.environ},
    )
    assert worked.returncode == 0, worked.stderr
    assert task(db, "task-env")["result"] == {
        "task": "task-env",
        "attempt": "1",
        "token_hidden": True,
    }


def governed_task(db: Path, task_id: str, monkeypatch: pytest.MonkeyPatch) -> None:
    from aios_ledger.shell.clock import AUTHORIZATION_ENV
    from aios_ledger.shell.db.connection import Database
    from aios_ledger.shell.projection.bindings import RegisteredBindingResolver, register_binding
    from aios_ledger.shell.projection.store import InitialExecutionProjectionStore

    from examples.demo import OWNER, binding_for, project

    monkeypatch.setenv(AUTHORIZATION_ENV, OWNER)
    create(db, task_id)
    with Database(db) as opened:
        register_binding(opened, binding_for(task_id).public())
    resolver = RegisteredBindingResolver(db)
    store = InitialExecutionProjectionStore(db, resolver)
    project(store, task_id)
    store.close()
    resolver.close()


def test_governed_task_gets_its_envelope_and_a_governance_breach_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    db = tmp_path / "ledger.db"
    governed_task(db, "task-governed", monkeypatch)
    breach = (
        f"{sys.executable} -c \"import json, sys; c = json.load(sys.stdin); e = c['envelope']; "
        "json.dump({'task_id': c['task_id'], 'job_id': e['job_id'], "
        "'execution_digest': e['execution_digest'], 'execution_mode': 'agent_runtime', "
        "'status': 'SUCCEEDED', 'summary': 'pushed to prod', 'changed_files': [], "
        "'direct_main_write': False, 'production_write': True, 'force_push': False, "
        "'protected_ref_bypass': False, 'secret_material_exposed': False}, sys.stdout)\""
    )
    worked = cli(
        db,
        "worker",
        "--agent-id",
        "w",
        "--capability",
        "agent.runtime.openclaw",
        "--exec",
        breach,
        "--once",
    )
    assert worked.returncode == 0, worked.stderr
    assert "RESULT_GOVERNANCE_VIOLATION" in worked.stderr
    result = task(db, "task-governed")["result"]
    assert result["status"] == "FAILED" and result["production_write"] is False
    assert result["summary"].startswith("result_refused: RESULT_GOVERNANCE_VIOLATION")
    # Why: the refusal and the refused output, in the run's evidence and in the result.
    evidence = cli(db, "run", "evidence", "task:task-governed", "task-governed@1")
    (failure,) = [e for e in json.loads(evidence.stdout)["events"] if e["kind"] == "failure"]
    assert failure["payload"]["failure"] == "result_refused"
    assert failure["payload"]["detail"].startswith("RESULT_GOVERNANCE_VIOLATION")
    assert '"production_write": true' in failure["payload"]["output_head"]
    assert '"production_write": true' in result["summary"]


def test_a_worker_without_the_capability_leaves_a_governed_task_alone(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    db = tmp_path / "ledger.db"
    governed_task(db, "task-capable", monkeypatch)
    worked = cli(db, "worker", "--agent-id", "w", "--exec", AGENT, "--once")
    assert worked.returncode == 0, worked.stderr
    assert json.loads(worked.stdout)["tasks"] == []
    assert task(db, "task-capable")["status"] == "QUEUED"
    worked = cli(
        db,
        "worker",
        "--agent-id",
        "w",
        "--capability",
        "agent.runtime.openclaw",
        "--exec",
        AGENT,
        "--once",
    )
    assert task(db, "task-capable")["status"] == "SUBMITTED"
    assert task(db, "task-capable")["result"]["execution_digest"].startswith("sha256:")


def test_a_lost_lease_stops_the_command_and_submits_nothing(tmp_path: Path) -> None:
    db = tmp_path / "ledger.db"
    create(db, "task-lost")
    marker = tmp_path / "finished"
    slow = f"sleep 20; touch {marker}"
    worker = spawn_worker(db, "--agent-id", "w", "--exec", slow, "--lease-seconds", "3", "--once")
    deadline = time.monotonic() + 30
    while task(db, "task-lost")["status"] != "CLAIMED":
        assert time.monotonic() < deadline
        time.sleep(0.05)
    ledger = TaskLedger(db)
    ledger.cancel("task-lost", reason="operator stopped it", idempotency_key="cancel-lost")
    ledger.close()
    out, err = worker.communicate(timeout=60)
    assert worker.returncode == 0, err
    outcome = json.loads(out)["tasks"][0]
    assert outcome["outcome"] == "lease-lost"
    final = task(db, "task-lost")
    assert final["status"] == "CANCELLED"
    assert final.get("result") is None and final.get("result_json") is None
    assert not marker.exists()
    assert event_types(db, "task-lost") == ["TASK_CREATED", "TASK_CLAIMED", "TASK_CANCELLED"]
