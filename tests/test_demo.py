"""`make demo` runs the main job end to end and tells it in a few readable lines."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_demo_runs_the_main_job_and_the_log_verifies(tmp_path: Path) -> None:
    answer = subprocess.run(
        [
            sys.executable,
            str(ROOT / "examples" / "demo.py"),
            "--dir",
            str(tmp_path / "demo"),
            "--examples",
            str(ROOT / "examples"),
        ],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert answer.returncode == 0, answer.stdout + answer.stderr
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
    assert "Traceback" not in answer.stderr
    assert "{" not in out.split("Timelines")[1]  # a summary for people, not a JSON dump
