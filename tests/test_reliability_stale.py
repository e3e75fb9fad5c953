"""Stale holders: a real `aios-ledger worker` paused with SIGSTOP past its 2 s lease, while
another worker expires the lease, re-claims the task and submits; then SIGCONT. The stale
worker can change nothing: the call it makes on waking (a heartbeat while its command still
runs, or the submit of the result its command finished during the pause) is refused with
LEASE_INVALID, it reports `lease-lost`, and the task's row, events and idempotency rows are
exactly what they were before it woke, with the second worker's result.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import apsw
import pytest
from aios_ledger.core import LedgerError, TaskView
from aios_ledger.shell.runs.store import RunStore
from aios_ledger.shell.tasks.ledger import TaskLedger
from reliability_checks import ledger_anomalies, read_contents
from reliability_history import epoch

ROOT = Path(__file__).resolve().parents[1]
AGENT = f"{sys.executable} {ROOT / 'examples' / 'agent.py'}"
TASK = "task-stale-holder"


def worker(db: Path, agent_id: str, lease: int, delay: float) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [
            sys.executable,
            "-m",
            "aios_ledger.shell.cli",
            "--db",
            str(db),
            "worker",
            "--agent-id",
            agent_id,
            "--exec",
            AGENT,
            "--lease-seconds",
            str(lease),
            "--once",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "EXAMPLE_AGENT_DELAY": str(delay)},
    )


def pause_between_transactions(process: subprocess.Popen[str], db: Path) -> None:
    """SIGSTOP `process` at a moment it holds no write transaction.

    A process frozen inside a write transaction keeps SQLite's write lock: every other writer
    waits and, after its bounded retries, gives up with DATABASE_BUSY (nothing is changed; see
    RELIABILITY.md). That is not the case under test here, so stop it again until it is paused
    between transactions.
    """
    probe = apsw.Connection(str(db))
    probe.set_busy_timeout(0)
    try:
        for _ in range(200):
            process.send_signal(signal.SIGSTOP)
            try:
                probe.execute("BEGIN IMMEDIATE")
                probe.execute("ROLLBACK")
                return
            except apsw.BusyError:
                process.send_signal(signal.SIGCONT)
                time.sleep(0.01)
        raise AssertionError("the worker never paused outside a write transaction")
    finally:
        probe.close()


def agent_started(db: Path) -> bool:
    """Whether the first attempt's command has started (its first stderr line is evidence)."""
    with RunStore(db) as runs:
        try:
            return any(event.kind == "stderr" for event in runs.run_events(f"{TASK}@1"))
        except LedgerError:
            return False


def task_state(db: Path) -> TaskView:
    with TaskLedger(db) as ledger:
        return ledger.get(TASK)


def task_contents(db: Path) -> tuple[Any, ...]:
    contents = read_contents(db)
    return (
        contents.tasks[TASK],
        contents.events[TASK],
        sorted(
            (key, row["response_json"])
            for key, row in contents.keys.items()
            if row["subject"] == TASK
        ),
    )


@pytest.mark.slow
@pytest.mark.parametrize(
    ("refused_call", "agent_delay"),
    [("heartbeat", 60.0), ("submit", 1.0)],
)
def test_a_paused_worker_changes_nothing_after_another_took_over(
    tmp_path: Path, refused_call: str, agent_delay: float
) -> None:
    db = tmp_path / "stale.sqlite3"
    with TaskLedger(db) as ledger:
        ledger.create_task(
            {"task_id": TASK, "goal": "g", "instructions": "i", "max_attempts": 3},
            idempotency_key="create-stale",
        )
    stale = worker(db, "worker-stale", 2, agent_delay)
    try:
        deadline = time.monotonic() + 60
        while not agent_started(db):
            assert time.monotonic() < deadline, "the first worker never started its command"
            assert stale.poll() is None
            time.sleep(0.02)
        started = time.monotonic()
        pause_between_transactions(stale, db)
        # Past the lease it holds now (it may have heartbeated just before it stopped): a lease
        # is valid while the whole-second server time is before lease_expires_at.
        held = task_state(db)
        assert held["claimed_by"] == "worker-stale"
        assert held["lease_expires_at"] is not None
        time.sleep(max(0.0, epoch(held["lease_expires_at"]) - time.time()) + 0.3)

        fresh = worker(db, "worker-fresh", 30, 0.0)
        _, fresh_log = fresh.communicate(timeout=120)
        assert fresh.returncode == 0, fresh_log
        assert "attempt 2: submitted" in fresh_log, fresh_log
        before = task_contents(db)

        if refused_call == "submit":
            # Its command (not paused: it leads its own session) has surely finished by now.
            time.sleep(max(0.0, started + agent_delay + 1.0 - time.monotonic()))
        stale.send_signal(signal.SIGCONT)
        _, stale_log = stale.communicate(timeout=120)
    finally:
        if stale.poll() is None:
            stale.send_signal(signal.SIGCONT)
            stale.kill()
            stale.communicate()
    assert stale.returncode == 0, stale_log
    assert "attempt 1: lease-lost (LEASE_INVALID)" in stale_log, stale_log

    # Nothing about the task changed after the stale worker woke.
    assert task_contents(db) == before
    assert ledger_anomalies(db) == []
    task = task_state(db)
    assert task["status"] == "SUBMITTED"
    assert task["attempt"] == 2
    assert task["result"]["summary"] == "edited NOTES.md, CHANGELOG.md"  # attempt 2's work
    assert task["result_idempotency_key"] == f"submit:{TASK}:2"
    with TaskLedger(db) as ledger:
        events = ledger.events(TASK)
    kinds = [event["event_type"] for event in events]
    assert kinds.count("TASK_LEASE_EXPIRED") == 1
    assert kinds.count("RESULT_SUBMITTED") == 1
    takeover = kinds.index("TASK_LEASE_EXPIRED")
    assert all(event["agent_id"] != "worker-stale" for event in events[takeover + 1 :])

    # The stale attempt's evidence is fenced too: appending to its run takes that attempt's
    # current lease, so however its command ended, the woken worker recorded no exit there.
    with RunStore(db) as runs:
        exits = [event for event in runs.run_events(f"{TASK}@1") if event.kind == "exit"]
    assert exits == []
