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
    assert out.count("SUCCEEDED after 2 attempt(s)") == 3
    assert "intact=True" in out
    # Day two: a task that failed its only attempt, retried by an operator, then accepted.
    day_two = out.split("Part 3")[1].split("Timelines")[0]
    assert "the task is FAILED" in day_two and "The worker ran it again: SUCCEEDED" in day_two
    assert "TASK_REQUEUED" in day_two and "the plugin server is back" in day_two
    assert "Traceback" not in answer.stderr
    assert "{" not in out.split("Timelines")[1]  # a summary for people, not a JSON dump
