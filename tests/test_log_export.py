"""Export as JSON lines and the offline check of an export, without the database."""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import pytest
from aios_ledger.core import LedgerError
from aios_ledger.core.log import EXPORT_SCHEMA
from aios_ledger.shell.db.connection import Database
from aios_ledger.shell.log.export import export_log, verify_export
from aios_ledger.shell.log.verification import ledger_head
from conftest import both_engines, is_postgres
from test_log_support import ROUND_ROBIN, build_log, codes_at, tamper

pytest_generate_tests = both_engines


@pytest.fixture
def log(ledger_target: Path) -> Path:
    path = ledger_target
    build_log(path, ROUND_ROBIN)
    return path


def export(path: Path, target: Path, task_id: str | None = None) -> dict[str, Any]:
    with Database(path) as db, open(target, "w", encoding="ascii") as out:
        return export_log(db, out, task_id=task_id)


def lines_of(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text("ascii").splitlines()]


def write_lines(path: Path, lines: list[dict[str, Any]]) -> None:
    path.write_text("".join(json.dumps(line) + "\n" for line in lines), "ascii")


def check(path: Path) -> dict[str, Any]:
    return verify_export(path).public()


def test_an_export_of_everything_verifies_and_carries_the_head(log: Path, tmp_path: Path) -> None:
    target = tmp_path / "all.jsonl"
    summary = export(log, target)
    with Database(log) as db:
        head = ledger_head(db).public()
    assert {key: summary[key] for key in head} == head
    lines = lines_of(target)
    # PostgreSQL's ids have gaps by design, and its export says so.
    sparse = {"dense_ids": False} if is_postgres(log) else {}
    assert lines[0] == {"schema": EXPORT_SCHEMA, "scope": "all", **sparse}
    assert lines[-1] == {"end": EXPORT_SCHEMA, **{k: v for k, v in head.items() if k != "schema"}}
    assert len(lines) == len(ROUND_ROBIN) + 2
    first = lines[1]
    assert set(first) >= {"event_id", "payload_json", "seal", "chain", "chain_seq", "prev_seal"}
    assert first["chain"] == "task:t-a"
    assert first["chain_seq"] == 1
    report = check(target)
    assert report["intact"] is True
    assert report["head"] == head


def test_an_export_of_one_task_verifies(log: Path, tmp_path: Path) -> None:
    target = tmp_path / "task.jsonl"
    export(log, target, "t-b")
    lines = lines_of(target)
    assert lines[0] == {"schema": EXPORT_SCHEMA, "scope": "task", "task_id": "t-b"}
    events = lines[1:-1]
    assert [line["chain_seq"] for line in events] == [1, 2, 3]
    assert {line["task_id"] for line in events} == {"t-b"}
    assert check(target)["intact"] is True


def test_exporting_an_unknown_task_is_refused(log: Path, tmp_path: Path) -> None:
    with pytest.raises(LedgerError, match="TASK_NOT_FOUND"):
        export(log, tmp_path / "x.jsonl", "nobody")


def test_a_tampered_export_line_is_found(log: Path, tmp_path: Path) -> None:
    target = tmp_path / "all.jsonl"
    export(log, target)
    lines = lines_of(target)
    lines[3]["payload_json"] = '{"n":999}'
    write_lines(target, lines)
    assert codes_at(check(target)) == {("CONTENT_CHANGED", 3)}


def test_a_line_removed_from_an_export_is_found(log: Path, tmp_path: Path) -> None:
    target = tmp_path / "all.jsonl"
    export(log, target)
    lines = lines_of(target)
    del lines[5]
    write_lines(target, lines)
    found = codes_at(check(target))
    # Line 5 is event 5, t-a's second: a gap in dense ids, and in t-a's chain either way.
    assert ("CHAIN_GAP", 7) in found
    assert is_postgres(log) or ("EVENT_REMOVED", 5) in found
    assert ("EXPORT_INVALID", None) in found  # the trailer disagrees


def test_a_cut_export_is_found(log: Path, tmp_path: Path) -> None:
    target = tmp_path / "all.jsonl"
    export(log, target)
    write_lines(target, lines_of(target)[:-3])
    report = check(target)
    assert codes_at(report) == {("EXPORT_INVALID", None)}
    assert "cut short" in report["findings"][0]["detail"]


def test_a_task_export_swap_of_lines_is_found(log: Path, tmp_path: Path) -> None:
    target = tmp_path / "task.jsonl"
    export(log, target, "t-a")
    lines = lines_of(target)
    lines[1], lines[2] = lines[2], lines[1]
    write_lines(target, lines)
    assert check(target)["intact"] is False


@pytest.mark.parametrize(
    "garbage",
    ["not json", "[1, 2]", '{"event_id": 3}', '{"end": "x"}', "\udcff"],
)
def test_garbage_lines_are_findings_not_crashes(log: Path, tmp_path: Path, garbage: str) -> None:
    target = tmp_path / "all.jsonl"
    export(log, target)
    text = target.read_text("ascii").splitlines()
    text.insert(4, garbage)
    target.write_bytes(("\n".join(text) + "\n").encode("utf-8", "surrogateescape"))
    report = check(target)
    assert report["intact"] is False
    assert any(
        f["code"] == "EXPORT_INVALID" and "line 5" in f["detail"] for f in report["findings"]
    )


def test_a_file_that_is_no_export_is_refused(tmp_path: Path) -> None:
    target = tmp_path / "x.jsonl"
    target.write_text('{"hello": 1}\n')
    with pytest.raises(LedgerError, match="EXPORT_INVALID"):
        verify_export(target)
    target.write_text("")
    with pytest.raises(LedgerError, match="EXPORT_INVALID"):
        verify_export(target)
    with pytest.raises(LedgerError, match="INPUT_UNREADABLE"):
        verify_export(tmp_path / "missing.jsonl")


def test_a_tampered_database_exports_and_fails_offline(log: Path, tmp_path: Path) -> None:
    if is_postgres(log):
        pytest.skip("a blob in a text column is SQLite's (PostgreSQL's text holds text only)")
    tamper(log, ("UPDATE events SET payload_json = ? WHERE event_id = 4", (b"\x00\xff",)))
    target = tmp_path / "all.jsonl"
    export(log, target)
    assert lines_of(target)[4]["payload_json"] == "blob:00ff"
    assert codes_at(check(target)) == {("CONTENT_CHANGED", 4)}


def test_export_streams_to_any_text_stream(log: Path) -> None:
    out = io.StringIO()
    with Database(log) as db:
        export_log(db, out, task_id="t-c")
    assert len(out.getvalue().splitlines()) == 2 + ROUND_ROBIN.count("t-c")
