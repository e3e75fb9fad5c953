"""The worker's processes, for real: a SIGKILLed worker leaves no agent behind, a stopped one
releases its tasks, a failure carries its evidence, and `--concurrency` runs agents at once."""

from __future__ import annotations

import json
import os
import shlex
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest
from aios_ledger.core.work import MAX_OUTPUT_EVIDENCE, STDERR_TAIL_LINES
from aios_ledger.shell import TaskLedger
from aios_ledger.shell.work.worker import Worker, WorkerConfig
from test_worker_e2e import cli, create, event_types, spawn_worker, task

# Seconds a test waits for something to happen before it fails instead of hanging: a bound on
# a wait, never on how long the thing took. The programs these tests expect to be ended run for
# far longer (`sleep 300`), so that one found gone within it was ended, not finished.
PATIENCE = 60.0


def wait_for(condition: Callable[[], bool]) -> None:
    deadline = time.monotonic() + PATIENCE
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.05)


def running(pid: int) -> bool:
    """Whether `pid` is a live process: a zombie has ended, it only waits for its reaper (the
    container's init may take its time)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except (FileNotFoundError, ProcessLookupError):
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


@pytest.fixture
def leftovers() -> Iterator[list[int]]:
    """Pids a test started indirectly; whatever still runs at the end is killed."""
    pids: list[int] = []
    yield pids
    for pid in pids:
        if running(pid):
            os.kill(pid, signal.SIGKILL)


def run_evidence(db: Path, task_id: str, attempt: int = 1) -> list[dict[str, Any]]:
    answer = cli(db, "run", "evidence", f"task:{task_id}", f"{task_id}@{attempt}")
    assert answer.returncode == 0, answer.stderr
    events: list[dict[str, Any]] = json.loads(answer.stdout)["events"]
    return events


def test_a_sigkilled_worker_takes_its_agent_and_the_agents_children_along(
    tmp_path: Path, leftovers: list[int]
) -> None:
    db = tmp_path / "ledger.db"
    create(db, "task-orphan")
    agent_pid, child_pid = tmp_path / "agent.pid", tmp_path / "child.pid"
    # The agent starts a child of its own, then waits; neither ever ends by itself.
    agent = f"sleep 300 & echo $! > {child_pid}; echo $$ > {agent_pid}; wait"
    worker = spawn_worker(db, "--agent-id", "doomed", "--exec", agent, "--once")
    try:
        wait_for(lambda: agent_pid.exists() and child_pid.exists())
        wait_for(lambda: bool(agent_pid.read_text().strip() and child_pid.read_text().strip()))
        pids = [int(agent_pid.read_text()), int(child_pid.read_text())]
        leftovers.extend(pids)
        assert all(running(pid) for pid in pids)
        worker.send_signal(signal.SIGKILL)
        worker.wait(timeout=PATIENCE)
        # Both would sleep on for minutes: gone, they were ended with the worker.
        wait_for(lambda: not any(running(pid) for pid in pids))
    finally:
        worker.kill()
        worker.communicate()
    # Nobody released the task: its lease runs out as for any dead worker.
    assert task(db, "task-orphan")["status"] == "CLAIMED"


def test_what_a_command_leaves_running_ends_with_it(tmp_path: Path, leftovers: list[int]) -> None:
    db = tmp_path / "ledger.db"
    create(db, "task-background")
    child_pid = tmp_path / "child.pid"
    agent = f"sleep 300 & echo $! > {child_pid}; echo '{{}}'"
    worked = cli(db, "worker", "--agent-id", "w", "--exec", agent, "--once")
    assert worked.returncode == 0, worked.stderr
    leftovers.append(int(child_pid.read_text()))
    wait_for(lambda: not running(leftovers[0]))  # it would sleep on for minutes
    assert task(db, "task-background")["status"] == "SUBMITTED"


@pytest.mark.parametrize("concurrency", [1, 2])
def test_a_stopped_worker_releases_its_tasks_after_the_grace_period(
    tmp_path: Path, leftovers: list[int], concurrency: int
) -> None:
    db = tmp_path / "ledger.db"
    task_ids = [f"task-stop-{n}" for n in range(concurrency)]
    for task_id in task_ids:
        create(db, task_id)
    pids = tmp_path / "pids"
    pids.mkdir()
    agent = f'echo $$ > {pids}/"$AIOS_TASK_ID"; exec sleep 300'
    worker = spawn_worker(
        db,
        "--agent-id",
        "w",
        "--exec",
        agent,
        "--grace",
        "0.5",
        "--concurrency",
        str(concurrency),
        "--lease-seconds",
        "60",
    )
    try:
        wait_for(lambda: len([p for p in pids.iterdir() if p.read_text().strip()]) == concurrency)
        leftovers.extend(int(p.read_text()) for p in pids.iterdir())
        worker.send_signal(signal.SIGTERM)
        # The agents would sleep for minutes: the worker ends within the wait only by killing
        # them after the grace period (its log line below says so).
        out, err = worker.communicate(timeout=PATIENCE)
    finally:
        worker.kill()
    assert worker.returncode == 0, err
    assert not any(running(pid) for pid in leftovers)
    outcomes = json.loads(out)["tasks"]
    assert sorted(o["task_id"] for o in outcomes) == task_ids
    assert {o["outcome"] for o in outcomes} == {"released"}
    for task_id in task_ids:
        final = task(db, task_id)
        assert (final["status"], final["attempt"], final["claimed_by"]) == ("QUEUED", 1, None)
        assert final["lease_expires_at"] is None and final["lease_token_hash"] is None
        assert event_types(db, task_id) == ["TASK_CREATED", "TASK_CLAIMED", "TASK_RELEASED"]
        with TaskLedger(db) as ledger:
            released = ledger.events(task_id)[-1]
        assert released["agent_id"] == "w"
        assert released["payload"]["attempt"] == 1
        assert "0.5s grace period" in released["payload"]["reason"]
        kinds = [event["kind"] for event in run_evidence(db, task_id)]
        assert kinds[-1] == "released"


def test_a_command_that_finishes_within_the_grace_period_is_submitted(tmp_path: Path) -> None:
    db = tmp_path / "ledger.db"
    create(db, "task-grace")
    started = tmp_path / "started"
    agent = f'touch {started}; sleep 1; echo \'{{"status": "SUCCEEDED"}}\''
    worker = spawn_worker(db, "--agent-id", "w", "--exec", agent, "--grace", "30")
    wait_for(started.exists)
    worker.send_signal(signal.SIGTERM)
    out, err = worker.communicate(timeout=60)
    assert worker.returncode == 0, err
    assert task(db, "task-grace")["status"] == "SUBMITTED"
    assert [o["outcome"] for o in json.loads(out)["tasks"]] == ["submitted"]


# ---------------------------------------------------------------------------------------------
# why did it fail?


def stderr_lines(count: int) -> str:
    return f'for i in $(seq 1 {count}); do echo "complaint $i" >&2; done'


FAILURES: dict[str, tuple[str, list[str], dict[str, Any]]] = {
    "exit_status": (
        f"echo partial answer; {stderr_lines(30)}; exit 3",
        [],
        {"exit_status": 3, "output_head": "partial answer\n", "output_truncated": False},
    ),
    "timeout": (
        f"echo started; {stderr_lines(2)}; exec sleep 60",
        ["--timeout", "1"],
        {"exit_status": -signal.SIGTERM, "output_head": "started\n", "output_truncated": False},
    ),
    "invalid_output": (
        f"{stderr_lines(1)}; head -c 10000 /dev/zero | tr '\\0' x",
        [],
        {"exit_status": 0, "output_head": "x" * MAX_OUTPUT_EVIDENCE, "output_truncated": True},
    ),
    "result_refused": (
        f'{stderr_lines(1)}; echo \'{{"status": "SUCCEEDED", "force_push": true}}\'',
        [],
        {
            "exit_status": 0,
            "output_head": '{"status": "SUCCEEDED", "force_push": true}\n',
            "output_truncated": False,
        },
    ),
}
TAILS = {"exit_status": 30, "timeout": 2, "invalid_output": 1, "result_refused": 1}


@pytest.mark.parametrize("kind", sorted(FAILURES))
def test_a_failure_carries_its_evidence(tmp_path: Path, kind: str) -> None:
    db = tmp_path / "ledger.db"
    create(db, "task-why")
    command, options, expected = FAILURES[kind]
    worked = cli(db, "worker", "--agent-id", "w", "--exec", command, "--once", *options)
    assert worked.returncode == 0, worked.stderr
    written = TAILS[kind]
    tail = [f"complaint {n}" for n in range(1, written + 1)][-STDERR_TAIL_LINES:]
    result = task(db, "task-why")["result"]
    assert (result["status"], result["failure"]) == ("FAILED", kind)
    assert result["evidence"] == {**expected, "stderr_tail": tail}
    (failure,) = [e for e in run_evidence(db, "task-why") if e["kind"] == "failure"]
    assert failure["payload"] == {
        **expected,
        "stderr_tail": tail,
        "failure": kind,
        "detail": failure["payload"]["detail"],
    }
    if kind == "result_refused":
        assert failure["payload"]["detail"].startswith("RESULT_GOVERNANCE_VIOLATION")


# ---------------------------------------------------------------------------------------------
# --concurrency


# An agent that ends only once the agents it waits for have started: with "all", every task
# named; with "next", the task named after its own (the last one waits for the one before it to
# end instead, so that it too ends beside its neighbour). Before it ends it notes which agents
# were running (each marks itself running from its start to just before its end). Events, not
# clocks: how fast the worker starts its agents changes nothing in what they note.
PEER_AGENT = """\
import os, sys, time
from pathlib import Path

room, mode, order = Path(sys.argv[1]), sys.argv[2], sys.argv[3:]
task = os.environ["AIOS_TASK_ID"]
(room / "running" / task).touch()
(room / "started" / task).touch()
at = order.index(task)
if mode == "all":
    awaited = [room / "started" / peer for peer in order]
elif at + 1 < len(order):
    awaited = [room / "started" / order[at + 1]]
else:
    awaited = [room / "seen" / order[at - 1]]
deadline = time.monotonic() + 60  # a bound on the wait, for a worker that never starts them
while not all(path.exists() for path in awaited):
    if time.monotonic() > deadline:
        sys.exit(f"{task}: waited in vain for {[str(path) for path in awaited]}")
    time.sleep(0.02)
(room / "seen" / task).write_text(" ".join(sorted(os.listdir(room / "running"))))
(room / "running" / task).unlink()
print("{}")
"""


def peer_agent(room: Path, mode: str, tasks: list[str]) -> str:
    """The command of an agent in `room` (see PEER_AGENT)."""
    for folder in ("running", "started", "seen"):
        (room / folder).mkdir(parents=True)
    script = room / "peer_agent.py"
    script.write_text(PEER_AGENT)
    return shlex.join([sys.executable, str(script), str(room), mode, *tasks])


def seen_running(room: Path) -> dict[str, list[str]]:
    """For each agent that ended after its peers started, the agents running as it ended."""
    return {path.name: path.read_text().split() for path in (room / "seen").iterdir()}


def test_concurrency_runs_agents_at_once(tmp_path: Path) -> None:
    db = tmp_path / "ledger.db"
    tasks = [f"task-wide-{n}" for n in range(4)]
    for task_id in tasks:
        create(db, task_id)
    agent = peer_agent(tmp_path / "room", "all", tasks)
    worked = cli(
        db, "worker", "--agent-id", "w", "--exec", agent, "--concurrency", "4", "--until-empty"
    )
    assert worked.returncode == 0, worked.stderr
    # Every agent waited for all four to start before it ended: all four ran at once.
    assert sorted(seen_running(tmp_path / "room")) == tasks, worked.stderr
    with TaskLedger(db) as ledger:
        assert {task["status"] for task in ledger.list_tasks()} == {"SUBMITTED"}


def test_concurrency_bounds_the_agents_at_once(tmp_path: Path) -> None:
    db = tmp_path / "ledger.db"
    tasks = [f"task-narrow-{n}" for n in range(5)]
    for task_id in tasks:
        create(db, task_id)
    agent = peer_agent(tmp_path / "room", "next", tasks)
    (tmp_path / "aios-ledger.toml").write_text(
        f'[worker]\nagent_id = "w"\nexec = {json.dumps(agent)}\nconcurrency = 2\n'
    )
    worked = cli(db, "--config", str(tmp_path / "aios-ledger.toml"), "worker", "--until-empty")
    assert worked.returncode == 0, worked.stderr
    seen = seen_running(tmp_path / "room")
    assert sorted(seen) == tasks, worked.stderr
    # Claimed in creation order, each agent but the last ended once the next had started,
    # beside it and no third: two at once, never more.
    assert [seen[task_id] for task_id in tasks[:-1]] == [tasks[n : n + 2] for n in range(4)]
    assert len(seen[tasks[-1]]) <= 2


def test_max_tasks_counts_every_slot(tmp_path: Path) -> None:
    db = tmp_path / "ledger.db"
    for n in range(5):
        create(db, f"task-counted-{n}")
    worked = cli(
        db,
        "worker",
        "--agent-id",
        "w",
        "--exec",
        "echo '{}'",
        "--concurrency",
        "4",
        "--max-tasks",
        "3",
        "--until-empty",
    )
    assert worked.returncode == 0, worked.stderr
    assert len(json.loads(worked.stdout)["tasks"]) == 3
    with TaskLedger(db) as ledger:
        statuses = sorted(task["status"] for task in ledger.list_tasks())
    assert statuses == ["QUEUED", "QUEUED", "SUBMITTED", "SUBMITTED", "SUBMITTED"]
    once = cli(
        db, "worker", "--agent-id", "w", "--exec", "echo '{}'", "--concurrency", "4", "--once"
    )
    assert len(json.loads(once.stdout)["tasks"]) == 1


def test_the_guard_reports_how_the_command_ended(tmp_path: Path) -> None:
    from aios_ledger.shell.work.guard import guarded

    def ended(command: str) -> int:
        argv = guarded(["/bin/sh", "-c", command], parent=os.getpid())
        return subprocess.run(argv, timeout=30, check=False, start_new_session=True).returncode

    assert ended("exit 0") == 0
    assert ended("exit 7") == 7
    assert ended("kill -TERM $$") == -signal.SIGTERM
    assert ended("kill -KILL $$") == -signal.SIGKILL
    missing = subprocess.run(
        guarded(["/nonexistent/program"], parent=os.getpid()),
        capture_output=True,
        check=False,
        start_new_session=True,
    )
    assert missing.returncode == 127 and b"cannot start" in missing.stderr


def test_a_crashed_execution_stops_the_others_and_is_raised(tmp_path: Path) -> None:
    db = tmp_path / "ledger.db"
    create(db, "task-crash", priority=1)
    create(db, "task-bystander")
    # Only the bystander's command runs (the other execution fails before its command starts),
    # and it marks its start.
    started = tmp_path / "bystander-started"
    config = WorkerConfig(
        agent_id="w",
        capabilities=(),
        command=f"touch {started}; exec sleep 300",
        grace=0.2,
        concurrency=2,
    )
    worker = Worker(db, config)
    source_capture = worker.workspaces.source_capture

    def flaky(claim: Mapping[str, Any]) -> Any:
        if claim["task_id"] == "task-crash":
            wait_for(started.exists)  # the bystander's command is running
            raise RuntimeError("the disk caught fire")
        return source_capture(claim)

    worker.workspaces.source_capture = flaky  # type: ignore[method-assign]
    try:
        with pytest.raises(RuntimeError, match="caught fire"):
            worker.run()
    finally:
        worker.close()
    assert [(o.task_id, o.outcome) for o in worker.outcomes] == [("task-bystander", "released")]
    assert task(db, "task-bystander")["status"] == "QUEUED"
