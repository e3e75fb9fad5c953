"""`events --follow` and `task list --watch` as real processes: a line appears when another
process writes, Ctrl-C (SIGINT) ends them with exit 130 and no traceback; and the follow cursor
delivers every event once even when PostgreSQL makes a lower id visible after a higher one."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from aios_ledger.core import LedgerError
from aios_ledger.core.log.follow import FollowCursor
from cli_runner import CliResult, run_cli
from signal_support import interruptible

ROOT = Path(__file__).resolve().parents[1]


def _run(*argv: str, cwd: Path) -> CliResult:
    return run_cli(*argv, cwd=cwd, env=_env())


def _env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if not k.startswith("AIOS_LEDGER")}


def _start(*argv: str, cwd: Path) -> subprocess.Popen[str]:
    """The command line, running on until it is interrupted (see `_interrupt`)."""
    return subprocess.Popen(
        interruptible([sys.executable, "-m", "aios_ledger.shell.cli", *argv]),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=cwd,
        env=_env(),
    )


def _create(cwd: Path, task_id: str) -> None:
    document = {
        "idempotency_key": f"create-{task_id}",
        "task": {"task_id": task_id, "goal": "g", "instructions": "i"},
    }
    (cwd / f"{task_id}.json").write_text(json.dumps(document))
    done = _run("task", "create", "--json", f"{task_id}.json", cwd=cwd)
    assert done.returncode == 0, done.stderr


def _interrupt(process: subprocess.Popen[str]) -> tuple[int, str, str]:
    """Ctrl-C: the exit code, and what the process wrote after the lines already read."""
    process.send_signal(signal.SIGINT)
    out, err = process.communicate(timeout=60)
    return process.returncode, out, err


@pytest.fixture
def ledger(tmp_path: Path) -> Iterator[Path]:
    assert _run("init", cwd=tmp_path).returncode == 0
    yield tmp_path


def test_follow_prints_each_new_event_and_stops_cleanly_on_sigint(ledger: Path) -> None:
    _create(ledger, "before")
    after = json.loads(_run("head", cwd=ledger).stdout)["last_event_id"]
    follower = _start("events", "--follow", "--after", str(after), "--interval", "0.05", cwd=ledger)
    try:
        _create(ledger, "t1")
        assert follower.stdout is not None
        first = json.loads(follower.stdout.readline())
        assert (first["task_id"], first["event_type"]) == ("t1", "TASK_CREATED")
        assert first["event_id"] > after
        _create(ledger, "t2")
        second = json.loads(follower.stdout.readline())
        assert second["task_id"] == "t2" and second["event_id"] > first["event_id"]
    finally:
        code, out, err = _interrupt(follower)
    assert code == 130, err
    assert out == ""  # each event once: nothing was printed again
    assert "Traceback" not in err and err == "INTERRUPTED: stopped by the user\n"


def test_following_one_task_skips_the_others_and_can_start_at_its_first_event(
    ledger: Path,
) -> None:
    _create(ledger, "mine")
    follower = _start(
        "events", "mine", "--follow", "--after", "0", "--interval", "0.05", cwd=ledger
    )
    try:
        assert follower.stdout is not None
        assert json.loads(follower.stdout.readline())["task_id"] == "mine"
        _create(ledger, "other")
        cancel = {"task_id": "mine", "reason": "done", "idempotency_key": "c1"}
        (ledger / "cancel.json").write_text(json.dumps(cancel))
        assert _run("cancel", "--json", "cancel.json", cwd=ledger).returncode == 0
        line = json.loads(follower.stdout.readline())
        assert (line["task_id"], line["event_type"]) == ("mine", "TASK_CANCELLED")
    finally:
        code, out, err = _interrupt(follower)
    assert out == ""  # the other task's event never appears
    assert code == 130 and "Traceback" not in err, err


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["events"], "events needs a TASK_ID"),
        (["events", "t", "--after", "0"], "--after, --interval and --api go with --follow"),
        (["events", "--follow", "--interval", "0"], "--interval takes"),
        (["events", "--follow", "--after", "-1"], "--after >= 0"),
        (["task", "list", "--watch", "0"], "--watch takes"),
    ],
)
def test_bad_follow_and_watch_options_are_usage_mistakes(
    ledger: Path, argv: list[str], message: str
) -> None:
    done = _run(*argv, cwd=ledger)
    assert done.returncode == 2 and done.stderr.startswith("USAGE_INVALID: "), done.stderr
    assert message in done.stderr


def test_following_a_task_that_does_not_exist_is_refused(ledger: Path) -> None:
    done = _run("events", "nope", "--follow", cwd=ledger)
    assert done.returncode == 1 and done.stderr.startswith("TASK_NOT_FOUND: "), done.stderr


def test_watch_prints_the_list_again_only_when_it_changes(ledger: Path) -> None:
    _create(ledger, "t1")
    watcher = _start("task", "list", "--watch", "0.05", cwd=ledger)
    try:
        assert watcher.stdout is not None
        first = json.loads(watcher.stdout.readline())
        assert [task["task_id"] for task in first] == ["t1"]
        _create(ledger, "t2")
        second = json.loads(watcher.stdout.readline())
        assert [task["task_id"] for task in second] == ["t1", "t2"]
    finally:
        code, out, err = _interrupt(watcher)
    assert out == ""  # nothing changed after t2, so nothing more was printed
    assert code == 130 and "Traceback" not in err, err


# -- the cursor (pure) ------------------------------------------------------------------------


def test_in_commit_order_the_cursor_reads_on_from_the_highest_id() -> None:
    cursor = FollowCursor(after=3)
    fresh, cursor = cursor.advance([4, 5])
    assert fresh == (4, 5) and cursor.after == 5 and cursor.delivered == frozenset()
    fresh, cursor = cursor.advance([])
    assert fresh == () and cursor.after == 5


def test_a_lower_id_visible_late_is_delivered_once_within_the_settle_window() -> None:
    cursor = FollowCursor(after=0, settle_polls=3)
    fresh, cursor = cursor.advance([1, 3])  # 2 is drawn but not committed yet
    assert fresh == (1, 3) and cursor.after == 0
    fresh, cursor = cursor.advance([1, 2, 3])
    assert fresh == (2,)
    fresh, cursor = cursor.advance([1, 2, 3, 4])
    assert fresh == (4,) and cursor.after == 3 and cursor.delivered == frozenset({4})
    fresh, cursor = cursor.advance([4])
    assert fresh == () and cursor.after == 3
    fresh, cursor = cursor.advance([4])
    assert fresh == () and cursor.after == 4 and cursor.delivered == frozenset()


def test_a_cursor_refuses_a_negative_start() -> None:
    with pytest.raises(LedgerError, match="FIELDS_INVALID"):
        FollowCursor(after=-1)


def test_a_follower_whose_reader_went_away_ends_quietly(tmp_path: Path) -> None:
    """`events --follow | head -1`: once the reader is gone, the next event ends the follower
    with SIGPIPE's exit status and no traceback."""
    assert _run("init", cwd=tmp_path).returncode == 0
    _create(tmp_path, "t1")
    read, write = os.pipe()
    follower = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "aios_ledger.shell.cli",
            "events",
            "--follow",
            "--after",
            "0",
            "--interval",
            "0.1",
        ],
        stdout=write,
        stderr=subprocess.PIPE,
        text=True,
        cwd=tmp_path,
        env=_env(),
    )
    os.close(write)
    with os.fdopen(read) as reader:
        assert json.loads(reader.readline())["task_id"] == "t1"
    _create(tmp_path, "t2")
    _, err = follower.communicate(timeout=60)
    assert follower.returncode == 141, err
    assert "Traceback" not in err
