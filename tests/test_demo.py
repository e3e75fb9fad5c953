"""`make demo` runs the main job end to end and tells it in a few readable lines."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

from aios_ledger.shell import TaskLedger
from legacy_fixtures import rows

ROOT = Path(__file__).resolve().parents[1]
EARLIER_TASK = {"task_id": "task-from-an-earlier-run", "goal": "g", "instructions": "i"}


def demo(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """`python examples/demo.py` as `make demo` runs it: a relative script path, from `cwd`."""
    return subprocess.run(
        [sys.executable, "examples/demo.py", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=300,
    )


def test_demo_runs_the_main_job_and_the_log_verifies(tmp_path: Path) -> None:
    # A copy of examples/ in a folder of its own: every default (`demo-ledger/` beside where the
    # demo starts, the example agent and reviewer) resolves there, as in a fresh clone.
    shutil.copytree(ROOT / "examples", tmp_path / "examples")
    # What an earlier `make demo` left (its ledger, with a task of its own, and more files):
    # this run replaces the folder, and adds nothing to it.
    earlier = tmp_path / "demo-ledger"
    earlier.mkdir()
    with TaskLedger(earlier / "aios-ledger.db") as ledger:
        ledger.create_task(EARLIER_TASK, idempotency_key="earlier-run")
    (earlier / "workspaces").mkdir()
    answer = demo(tmp_path)
    assert answer.returncode == 0, answer.stdout + answer.stderr
    assert not (earlier / "workspaces").exists()
    tasks = rows(earlier / "aios-ledger.db", "SELECT task_id FROM tasks")
    assert tasks and ("task-from-an-earlier-run",) not in tasks
    out = answer.stdout

    assert "EXECUTION_DIGEST_DRIFT" in out
    assert "idempotent=True" in out
    assert out.count("NEEDS_REWORK -> QUEUED") == 3
    # Parts 1-2's three tasks, and part 4's four governed-write tasks.
    assert out.count("SUCCEEDED after 2 attempt(s)") == 3 + 4
    assert "intact=True" in out
    # Day two: a task that failed its only attempt, retried by an operator, then accepted.
    day_two = out.split("Part 3")[1].split("Timelines")[0]
    assert "the task is FAILED" in day_two and "The worker ran it again: SUCCEEDED" in day_two
    assert "TASK_REQUEUED" in day_two and "the plugin server is back" in day_two
    # Governed writes: one lands on its bound branch; a stale expected tip, a protected branch
    # and a rewritten history are refused; the timelines show each step.
    writes = out.split("Part 4")[1].split("Timelines")[0]
    assert "task-gadget-docs: APPLIED refs/heads/agent/gadgets" in writes
    assert "task-gadget-stale: refused BRANCH_MOVED" in writes
    assert "task-gadget-release: refused PROTECTED_REF" in writes
    assert "task-gadget-rewrite: refused NOT_A_DESCENDANT" in writes
    timelines = out.split("Timelines")[1]
    for event in ("PROPOSAL_RECORDED", "GOVERNED_WRITE_INTENDED", "GOVERNED_WRITE_APPLIED"):
        assert event in timelines
    assert "GOVERNED_WRITE_MOVED_BY_OTHER" in timelines
    assert "COMMIT_ATTESTED" in timelines
    # The landed commit is attested, checked in the demo, and the command that checks it from
    # the repository with the public key is printed last: run as printed, it exits 0.
    assert "attested: SLSA provenance + review summary" in writes
    assert "git http-backend at http://127.0.0.1:" in writes
    assert "from the server's repository alone, with the public key: intact, review PASSED" in (
        writes
    )
    [command] = [line.split()[1:] for line in out.splitlines() if "verify-attestation" in line]
    assert command[0] == "verify-attestation"
    checked = subprocess.run(
        [sys.executable, "-m", "aios_ledger.shell.cli", *command],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert checked.returncode == 0, checked.stderr
    assert '"intact": true' in checked.stdout
    assert "Traceback" not in answer.stderr
    assert "{" not in out.split("Timelines")[1]  # a summary for people, not a JSON dump
    # Who did what, read back from the sealed events: each task's creator, holders, reviewer
    # and writer, and the refused writes with who tried them.
    record = out.split("Who did what")[1].split("Tasks:")[0]
    owner = "demo-owner (library, unauthenticated)"
    docs = record.split("task-gadget-docs")[1].split("task-gadget-stale")[0]
    assert f"created by    {owner}" in docs and f"projected by  {owner}" in docs
    assert "held by       attempt 1: demo-worker; attempt 2: demo-worker" in docs
    assert "SUCCEEDED by demo-reviewer (library, unauthenticated)" in docs
    assert f"written       APPLIED refs/heads/agent/gadgets (asked by {owner})" in docs
    assert f"refused       PROTECTED_REF (tried by {owner})" in record
    assert f"refused       NOT_A_DESCENDANT (tried by {owner})" in record
    assert "SUCCEEDED by the ledger (automatic, in demo-worker" in record
    assert "created by    unknown" in record  # the older runtime's task named nobody


def test_a_demo_dir_that_holds_other_files_is_refused_and_left_alone(tmp_path: Path) -> None:
    shutil.copytree(ROOT / "examples", tmp_path / "examples")
    precious = tmp_path / "work" / "notes.txt"
    precious.parent.mkdir()
    precious.write_text("not the demo's\n")
    answer = demo(tmp_path, "--dir", "work")
    assert answer.returncode == 1
    assert answer.stderr.startswith("DEMO_DIR_NOT_EMPTY: ")
    assert "pass --dir a new folder" in answer.stderr
    assert precious.read_text() == "not the demo's\n"
    assert sorted(path.name for path in precious.parent.iterdir()) == ["notes.txt"]
