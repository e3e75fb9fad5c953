"""Tables on a terminal, JSON elsewhere; progress bars only on a terminal; --version, defaults in
every --help, and exit 2 for every usage mistake."""

from __future__ import annotations

import argparse
import json
import os
from pathlib import Path

import pytest
from aios_ledger.shell import TaskLedger
from aios_ledger.shell.cli import build_parser, main
from aios_ledger.shell.console import (
    aux_runs_view,
    events_view,
    render,
    status_view,
    task_view,
    tasks_view,
)
from cli_runner import run_cli

TASK = {
    "task_id": "t1",
    "goal": "Fix the flaky upload test",
    "instructions": "i",
    "status": "QUEUED",
    "priority": 5,
    "attempt": 1,
    "max_attempts": 3,
    "claimed_by": None,
    "updated_at": "2030-01-02T03:04:05Z",
    "metadata": {"scope": {"project": "p"}},
}
EVENT = {
    "event_id": 7,
    "task_id": "t1",
    "agent_id": "agent-7",
    "event_type": "TASK_CLAIMED",
    "payload": {"lease_seconds": 60},
    "created_at": "2030-01-02T03:04:05Z",
}
AUX = {
    "id": "aux-1",
    "state": "FAILED",
    "kind": "review",
    "mode": "tool_free",
    "target": {"session_id": "task:t1", "run_id": "t1@1"},
    "updated_at_ms": 1_900_000_000_000,
    "error_code": "TIMEOUT",
}
STATUS = {
    "now": "2030-01-02T03:04:05Z",
    "tasks": {
        "QUEUED": 2,
        "CLAIMED": 1,
        "SUBMITTED": 0,
        "SUCCEEDED": 4,
        "FAILED": 0,
        "CANCELLED": 0,
    },
    "total": 7,
    "oldest_queued": {"task_id": "t1", "priority": 0, "created_at": "2030-01-01T00:00:00Z"},
    "leases_expired": [
        {"task_id": "t3", "claimed_by": "agent-9", "lease_expires_at": "2030-01-02T03:00:00Z"}
    ],
    "leases_expiring_within_seconds": 60,
    "leases_expiring": [
        {"task_id": "t2", "claimed_by": "agent-7", "lease_expires_at": "2030-01-02T03:05:00Z"}
    ],
    "last_events": [EVENT],
}


def test_tables_render_without_a_terminal() -> None:
    listing = render(tasks_view([TASK]), width=120)
    assert "Fix the flaky upload test" in listing and "1/3" in listing and "1 task(s)" in listing
    shown = render(task_view(TASK), width=100)
    assert "task t1" in shown and '{"scope": {"project": "p"}}' in shown
    events = render(events_view([EVENT]), width=120)
    assert "TASK_CLAIMED" in events and "agent-7" in events and '{"lease_seconds": 60}' in events
    runs = render(aux_runs_view([AUX]), width=120)
    assert "FAILED TIMEOUT" in runs and "task:t1 / t1@1" in runs and "2030-03-17T17:46:40" in runs
    status = render(status_view(STATUS), width=120)
    for expected in (
        "QUEUED",
        "oldest queued: t1 since",
        "leases expired",
        "agent-9",
        "leases expiring within 60s",
        "agent-7",
    ):
        assert expected in status
    assert "\x1b[" not in listing + shown + events + runs + status  # no colour codes


def test_a_narrow_table_folds_instead_of_losing_text() -> None:
    narrow = render(task_view({**TASK, "goal": "word " * 30}), width=40)
    assert max(len(line) for line in narrow.splitlines()) <= 40
    assert narrow.count("word") == 30


def _terminal_run(argv: list[str], cwd: Path) -> tuple[int, str]:
    """The command line with stdout and stderr on a terminal 120 columns wide; what it drew
    there."""
    env = {**os.environ, "COLUMNS": "120", "TERM": "xterm"}
    done = run_cli(*argv, cwd=cwd, env=env, terminal=True)
    return done.returncode, done.stdout + done.stderr


@pytest.fixture
def ledger(tmp_path: Path) -> Path:
    path = tmp_path / "ledger.db"
    with TaskLedger(path) as tasks:
        tasks.create_task({"task_id": "t1", "goal": "g", "instructions": "i"}, idempotency_key="k")
    return path


@pytest.mark.parametrize(
    "command",
    [["task", "list"], ["task", "show", "t1"], ["events", "t1"], ["aux", "list"], ["status"]],
    ids=" ".join,
)
def test_a_terminal_gets_a_table_and_a_pipe_gets_json(
    ledger: Path, tmp_path: Path, command: list[str]
) -> None:
    code, drawn = _terminal_run(["--db", str(ledger), *command], tmp_path)
    assert code == 0, drawn
    # A box, or for one record (`task show`) its `field: value` lines; not JSON.
    assert any(corner in drawn for corner in "┏┃━") or "task_id:" in drawn, drawn
    assert not drawn.lstrip().startswith(("{", "[")), drawn
    code, drawn = _terminal_run(["--db", str(ledger), *command, "--json"], tmp_path)
    assert code == 0 and json.loads(drawn) is not None
    piped = run_cli("--db", ledger, *command, cwd=tmp_path)
    assert piped.returncode == 0 and json.loads(piped.stdout) is not None


def test_progress_bars_only_on_a_terminal(ledger: Path, tmp_path: Path) -> None:
    code, drawn = _terminal_run(["--db", str(ledger), "verify"], tmp_path)
    assert code == 0 and "verify" in drawn and "1/1" in drawn and "events" in drawn, drawn
    code, drawn = _terminal_run(
        ["--db", str(ledger), "export", "--all", "--output", str(tmp_path / "out.jsonl")], tmp_path
    )
    assert code == 0 and "export" in drawn and "1/1" in drawn, drawn
    piped = run_cli("--db", ledger, "verify", cwd=tmp_path)
    assert (piped.returncode, piped.stderr) == (0, "")
    assert json.loads(piped.stdout)["intact"] is True


def test_version(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        main(["--version"])
    assert exited.value.code == 0
    assert capsys.readouterr().out.startswith("aios-ledger 0.")


def _parsers(parser: argparse.ArgumentParser) -> list[tuple[str, argparse.ArgumentParser]]:
    found = [(parser.prog, parser)]
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for child in action.choices.values():
                found += _parsers(child)
    return found


def test_every_help_shows_every_default() -> None:
    for prog, parser in _parsers(build_parser()):
        helped = parser.format_help()
        for action in parser._actions:
            default = action.default
            if not action.option_strings or default in (None, False, [], argparse.SUPPRESS):
                continue
            assert action.help, (prog, action.option_strings)
            assert f"(default: {default})" in " ".join(helped.split()), (prog, action.dest)


def _leaves() -> list[str]:
    return [prog for prog, parser in _parsers(build_parser()) if not parser._subparsers]


@pytest.mark.parametrize("prog", _leaves())
def test_usage_mistakes_exit_2(prog: str, capsys: pytest.CaptureFixture[str]) -> None:
    argv = prog.split()[1:]
    assert main([*argv, "--no-such-option"]) == 2
    assert capsys.readouterr().err.startswith("USAGE_INVALID: ")
    parser = dict(_parsers(build_parser()))[prog]
    typed = [a for a in parser._actions if a.type in (int, float) and a.option_strings]
    for action in typed:
        assert main([*argv, action.option_strings[0], "not-a-number"]) == 2, action.dest
        assert capsys.readouterr().err.startswith("USAGE_INVALID: ")
    required = [a for a in parser._actions if a.required or not a.option_strings]
    if any(a.nargs is None for a in required if a.dest != "help"):
        assert main(argv) == 2, prog
        assert capsys.readouterr().err.startswith("USAGE_INVALID: ")
