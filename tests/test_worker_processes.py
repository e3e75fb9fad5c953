"""The worker's processes, for real: a SIGKILLed worker leaves no agent behind."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from test_worker_e2e import cli, create, spawn_worker, task

GONE_WITHIN = 1.0


def wait_for(condition: Callable[[], bool], *, within: float = 30.0) -> None:
    deadline = time.monotonic() + within
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
        worker.wait(timeout=10)
        killed_at = time.monotonic()
        while any(running(pid) for pid in pids):
            assert time.monotonic() - killed_at < GONE_WITHIN, [p for p in pids if running(p)]
            time.sleep(0.01)
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
    wait_for(lambda: not running(leftovers[0]), within=GONE_WITHIN)
    assert task(db, "task-background")["status"] == "SUBMITTED"


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
