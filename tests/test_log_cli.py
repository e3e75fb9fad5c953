"""The command line of the tamper-evident log: output and exit codes."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from aios_ledger.shell.cli import main
from aios_ledger.shell.log.cli import EXIT_NOT_INTACT
from test_log_support import ROUND_ROBIN, build_log, tamper


@pytest.fixture
def log(tmp_path: Path) -> Path:
    path = tmp_path / "ledger.db"
    build_log(path, ROUND_ROBIN)
    return path


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, Any, str]:
    code = main(list(argv))
    captured = capsys.readouterr()
    out = captured.out
    try:
        value = json.loads(out) if out.strip() else None
    except json.JSONDecodeError:
        value = out
    return code, value, captured.err


def test_verify_exits_zero_only_when_intact(log: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, report, err = run(capsys, "--db", str(log), "verify")
    assert (code, report["intact"], err) == (0, True, "")
    tamper(log, ("UPDATE events SET event_type = 'X' WHERE event_id = 2", ()))
    code, report, err = run(capsys, "--db", str(log), "verify")
    assert code == EXIT_NOT_INTACT
    assert report["findings"][0]["code"] == "CONTENT_CHANGED"
    assert report["findings"][0]["event_id"] == 2
    assert err.startswith("LOG_NOT_INTACT: CONTENT_CHANGED 1")


def test_head_then_verify_with_head(
    log: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, head, _ = run(capsys, "--db", str(log), "head")
    assert code == 0
    assert head["events"] == head["last_event_id"] == len(ROUND_ROBIN)
    head_file = tmp_path / "head.json"
    head_file.write_text(json.dumps(head))
    assert run(capsys, "--db", str(log), "verify", "--head", str(head_file))[0] == 0
    assert run(capsys, "--db", str(log), "verify", "--head", json.dumps(head))[0] == 0
    last = len(ROUND_ROBIN)
    tamper(
        log,
        ("DELETE FROM events WHERE event_id = ?", (last,)),
        ("DELETE FROM event_seals WHERE event_id = ?", (last,)),
        ("UPDATE sqlite_sequence SET seq = ? WHERE name = 'events'", (last - 1,)),
    )
    # The chains alone cannot tell; the Merkle log keeps the removed event's leaf.
    code, alone, _ = run(capsys, "--db", str(log), "verify")
    assert code == EXIT_NOT_INTACT
    assert {f["code"] for f in alone["findings"]} == {"MERKLE_MISMATCH"}
    code, report, _ = run(capsys, "--db", str(log), "verify", "--head", str(head_file))
    assert code == EXIT_NOT_INTACT
    chains = [(f["code"], f["event_id"]) for f in report["findings"]]
    assert [found for found in chains if found[0] != "MERKLE_MISMATCH"] == [("EVENT_REMOVED", last)]


@pytest.mark.parametrize(
    "head",
    ['{"events": 1}', '{"events": -1, "last_event_id": 0, "digest": "x"}', "[]"],
)
def test_a_bad_head_is_refused(log: Path, capsys: pytest.CaptureFixture[str], head: str) -> None:
    code, _, err = run(capsys, "--db", str(log), "verify", "--head", head)
    assert code == 1
    assert err.startswith(("HEAD_INVALID", "INPUT_UNREADABLE", "JSON_INVALID"))


def test_export_and_verify_export(
    log: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    target = tmp_path / "all.jsonl"
    code, summary, _ = run(capsys, "--db", str(log), "export", "--all", "--output", str(target))
    assert code == 0
    assert summary["events"] == len(ROUND_ROBIN)
    assert summary["output"] == str(target)
    assert not (tmp_path / "all.jsonl.partial").exists()
    code, report, _ = run(capsys, "verify-export", str(target))
    assert (code, report["intact"]) == (0, True)
    text = target.read_text().replace('\\"n\\":3', '\\"n\\":4', 1)
    target.write_text(text)
    code, report, err = run(capsys, "verify-export", str(target))
    assert code == EXIT_NOT_INTACT
    assert err.startswith("LOG_NOT_INTACT")


def test_export_of_a_task_to_stdout(log: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["--db", str(log), "export", "--task", "t-c"])
    lines = capsys.readouterr().out.splitlines()
    assert code == 0
    assert len(lines) == ROUND_ROBIN.count("t-c") + 2


def test_export_needs_a_scope(log: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert run(capsys, "--db", str(log), "export")[0] == 2
    assert run(capsys, "--db", str(log), "export", "--all", "--task", "t-a")[0] == 2


def test_a_missing_database_is_not_created(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    missing = tmp_path / "missing.db"
    for argv in (["verify"], ["head"], ["export", "--all"]):
        code, _, err = run(capsys, "--db", str(missing), *argv)
        assert (code, err.split(":")[0]) == (1, "DATABASE_NOT_FOUND")
    assert not missing.exists()


def test_an_unwritable_output_is_refused(log: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run(
        capsys, "--db", str(log), "export", "--all", "--output", str(log.parent / "no" / "x")
    )
    assert (code, err.split(":")[0]) == (1, "OUTPUT_UNWRITABLE")
