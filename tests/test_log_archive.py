"""Archiving finished tasks (issue 17 item 6): their chains go to a file that verifies offline,
their rows leave the database in one transaction behind a sealed TASKS_ARCHIVED event, `verify`
stays intact, and neither a hand-made DELETE, a forged listing nor a changed or swapped archive
file passes."""

from __future__ import annotations

import json
import sqlite3
from datetime import timedelta
from pathlib import Path
from typing import Any

import psycopg
import pytest
from aios_ledger.core import LedgerError, LogTail, Statement, Timestamp
from aios_ledger.core.actors import Actor
from aios_ledger.core.log.archive import (
    ArchiveCandidate,
    ArchiveRequest,
    ArchiveState,
    decide_archive,
)
from aios_ledger.core.log.export import export_state_line
from aios_ledger.core.log.seals import LEDGER_CHAIN
from aios_ledger.core.log.state import held_row_problem, state_row_columns, stored_row_state
from aios_ledger.core.sealed_tables import SEALED_TABLES
from aios_ledger.shell.cli import main
from aios_ledger.shell.db.connection import Database
from aios_ledger.shell.log.archive import archive_tasks, show_archive, verify_archive
from aios_ledger.shell.log.cli import EXIT_NOT_INTACT
from aios_ledger.shell.log.export import export_log, verify_export
from aios_ledger.shell.log.verification import verify_log
from aios_ledger.shell.runs.store import RunStore
from aios_ledger.shell.tasks.ledger import TaskLedger
from conftest import both_engines, is_postgres
from legacy_fixtures import _postgres_reader
from legacy_fixtures import rows as engine_rows
from test_tasks_support import START, Clock, file_bytes

# Who the decisions here act as.
ACTOR = Actor("tester", "library")

CUTOFF = (START + timedelta(hours=1)).strftime("%Y-%m-%dT%H:%M:%SZ")
LATER = "2100-01-01T00:00:00Z"


def _create(ledger: TaskLedger, task_id: str) -> None:
    ledger.create_task(
        {"task_id": task_id, "goal": "g", "instructions": "i", "success_criteria": ["ok"]},
        idempotency_key=f"create-{task_id}",
    )


def create_release_notes(ledger: TaskLedger) -> None:
    """The task `done-1`, whose goal an archive must give back."""
    ledger.create_task(
        {
            "task_id": "done-1",
            "goal": "write the release notes",
            "instructions": "one page",
            "success_criteria": ["ok"],
        },
        idempotency_key="create-done-1",
    )


def accept_release_notes(ledger: TaskLedger) -> None:
    """`done-1` claimed, submitted and accepted, so that its row holds a result and a verdict
    (and its attempt run `done-1@1`, no events)."""
    claim = ledger.claim(agent_id="agent-a", capabilities=[], lease_seconds=60, task_id="done-1")
    assert claim is not None
    ledger.submit_result(
        "done-1",
        lease_token=claim["lease_token"],
        result={"summary": "notes written"},
        idempotency_key="submit-done-1",
    )
    ledger.verify(
        "done-1", decision="SUCCEEDED", reason="reads well", idempotency_key="verify-done-1"
    )


pytest_generate_tests = both_engines


@pytest.fixture
def ledger_path(ledger_target: Path) -> Path:
    """Two tasks cancelled at START, one left queued, one cancelled a day later."""
    path = ledger_target
    clock = Clock()
    with TaskLedger(path, clock=clock) as ledger:
        for task_id in ("old-1", "old-2", "open"):
            _create(ledger, task_id)
        for task_id in ("old-1", "old-2"):
            ledger.cancel(task_id, reason="done", idempotency_key=f"cancel-{task_id}")
        clock.advance(86400)
        _create(ledger, "new")
        ledger.cancel("new", reason="done", idempotency_key="cancel-new")
    return path


def verify(path: Path) -> dict[str, Any]:
    with Database(path) as db:
        return verify_log(db).public()


def archive(path: Path, output: Path, before: str = CUTOFF, **options: Any) -> dict[str, Any]:
    with Database(path) as db:
        return archive_tasks(db, finished_before=before, output=output, **options)


def check_archive(path: Path, file: Path) -> dict[str, Any]:
    with Database(path) as db:
        return verify_archive(db, file)


def rows(path: Path, query: str) -> list[tuple[Any, ...]]:
    return engine_rows(path, query)


def sqlite_shell(path: Path, *statements: str) -> None:
    """A DBA with the sqlite3 shell: statements committed together, foreign keys off (on
    PostgreSQL, psql as the tables' owner: triggers on, foreign keys checked at commit)."""
    if is_postgres(path):
        with _postgres_reader(str(path)) as pg, pg.transaction():
            pg.execute(b"SET CONSTRAINTS ALL DEFERRED")
            for statement in statements:
                pg.execute(statement.encode())
        return
    con = sqlite3.connect(path)
    try:
        for statement in statements:
            con.execute(statement)
        con.commit()
    finally:
        con.close()


def test_archive_exports_then_removes_finished_tasks_and_verify_stays_intact(
    ledger_path: Path, tmp_path: Path
) -> None:
    with Database(ledger_path) as db:
        head_before = verify_log(db).head
    output = tmp_path / "archive-1.jsonl"
    answer = archive(ledger_path, output)
    assert (answer["archived"], answer["task_ids"], answer["events"]) == (
        2,
        ["old-1", "old-2"],
        4,
    )
    assert answer["archive_sha256"].startswith("sha256:")
    assert output.exists() and not Path(f"{output}.partial").exists()

    tasks = {row[0] for row in rows(ledger_path, "SELECT task_id FROM tasks")}
    assert tasks == {"open", "new"}
    assert rows(ledger_path, "SELECT count(*) FROM events WHERE task_id LIKE 'old-%'") == [(0,)]
    assert rows(ledger_path, "SELECT count(*) FROM task_idempotency WHERE subject LIKE 'old-%'")
    assert rows(
        ledger_path, "SELECT count(*) FROM task_idempotency WHERE subject LIKE 'old-%'"
    ) == [(0,)]
    archived = rows(
        ledger_path, "SELECT event_type, payload_json FROM events WHERE task_id IS NULL"
    )
    assert [kind for kind, _ in archived] == ["TASKS_ARCHIVED"]
    payload = json.loads(archived[0][1])
    assert payload["archive_sha256"] == answer["archive_sha256"]
    assert [chain["task_id"] for chain in payload["chains"]] == ["old-1", "old-2"]

    found = verify(ledger_path)
    assert found["intact"] is True, found["findings"]
    assert found["archived"] == 4
    # The head keeps every archived event's id and seal: a head taken before still checks.
    with Database(ledger_path) as db:
        assert verify_log(db, head=head_before).intact is True
    exported = verify_export(output).public()
    assert exported["intact"] is True, exported["findings"]
    # Two task rows and their four recorded answers (each task's create and cancel), all sealed.
    assert exported["events"] == 4 and exported["rows_checked"] == 6
    checked = check_archive(ledger_path, output)
    assert checked["intact"] is True and checked["archive_event_id"] == answer["archive_event_id"]

    # A second archive later takes the rest, and both archives stay provable.
    with TaskLedger(ledger_path) as ledger:
        ledger.cancel("open", reason="done", idempotency_key="cancel-open")
    second = tmp_path / "archive-2.jsonl"
    assert archive(ledger_path, second, LATER)["task_ids"] == ["new", "open"]
    assert rows(ledger_path, "SELECT count(*) FROM tasks") == [(0,)]
    found = verify(ledger_path)
    assert found["intact"] is True, found["findings"]
    for file in (output, second):
        assert verify_export(file).intact is True
        assert check_archive(ledger_path, file)["intact"] is True


def test_an_export_of_everything_after_an_archive_verifies_offline(
    ledger_path: Path, tmp_path: Path
) -> None:
    archive(ledger_path, tmp_path / "archive.jsonl")
    everything = tmp_path / "everything.jsonl"
    with Database(ledger_path) as db, everything.open("w") as out:
        summary = export_log(db, out, task_id=None)
        head = verify_log(db).head
    assert summary["last_event_id"] == head.last_event_id and summary["digest"] == head.digest
    found = verify_export(everything).public()
    assert found["intact"] is True, found["findings"]
    assert (found["archived"], found["head"]) == (4, head.public())


def test_a_hand_made_delete_of_an_event_is_still_refused(ledger_path: Path, tmp_path: Path) -> None:
    archive(ledger_path, tmp_path / "archive.jsonl")
    for table in ("events", "event_seals", "event_seal_rows"):
        with pytest.raises((sqlite3.DatabaseError, psycopg.Error), match="EVENTS_APPEND_ONLY"):
            sqlite_shell(ledger_path, f"DELETE FROM {table} WHERE event_id = 3")
    with pytest.raises((sqlite3.DatabaseError, psycopg.Error), match="EVENTS_APPEND_ONLY"):
        sqlite_shell(ledger_path, "DELETE FROM archived_events")
    assert verify(ledger_path)["intact"] is True


def _forge_listing(path: Path, archive_event_id: int) -> None:
    """List the open task's events as archived (the triggers then let the DELETEs through) and
    delete its rows, without any sealed event that records it."""
    listed = "(SELECT event_id FROM events WHERE task_id = 'open')"
    sqlite_shell(
        path,
        "INSERT INTO archived_events(event_id, archive_event_id, chain, seal) "
        f"SELECT e.event_id, {archive_event_id}, s.chain, s.seal FROM events AS e "
        "JOIN event_seals AS s ON s.event_id = e.event_id WHERE e.task_id = 'open'",
        f"DELETE FROM event_seal_rows WHERE event_id IN {listed}",
        f"DELETE FROM event_seals WHERE event_id IN {listed}",
        "DELETE FROM events WHERE task_id = 'open'",
        "DELETE FROM tasks WHERE task_id = 'open'",
        # As an archive would: the task's recorded answers, sealed by its events, go with them.
        "DELETE FROM task_idempotency WHERE subject = 'open'",
    )


def test_a_forged_listing_without_its_sealed_event_is_reported(ledger_path: Path) -> None:
    _forge_listing(ledger_path, 10**6)
    found = verify(ledger_path)
    assert found["intact"] is False
    assert set(found["finding_counts"]) == {"ARCHIVE_MISMATCH"}


def test_a_listing_forged_under_a_real_archive_event_is_reported(
    ledger_path: Path, tmp_path: Path
) -> None:
    archive_event_id = archive(ledger_path, tmp_path / "archive.jsonl")["archive_event_id"]
    _forge_listing(ledger_path, archive_event_id)
    found = verify(ledger_path)
    assert set(found["finding_counts"]) == {"ARCHIVE_MISMATCH"}
    assert any("task:open" in finding["detail"] for finding in found["findings"])


def test_a_changed_or_swapped_archive_file_is_reported(ledger_path: Path, tmp_path: Path) -> None:
    output = tmp_path / "archive.jsonl"
    archive(ledger_path, output)
    original = output.read_bytes()

    output.write_bytes(original.replace(b"done", b"gone"))
    changed = check_archive(ledger_path, output)
    assert changed["intact"] is False and "ARCHIVE_MISMATCH" in changed["finding_counts"]

    # Another ledger's archive, intact on its own, is not this ledger's.
    other = tmp_path / "other.db"
    with TaskLedger(other, clock=Clock()) as ledger:
        _create(ledger, "old-1")
        ledger.cancel("old-1", reason="done", idempotency_key="cancel-old-1")
    swapped = tmp_path / "swapped.jsonl"
    archive(other, swapped)
    assert verify_export(swapped).intact is True
    found = check_archive(ledger_path, swapped)
    assert found["intact"] is False and found["archive_event_id"] is None

    output.write_bytes(original)
    assert check_archive(ledger_path, output)["intact"] is True


def test_a_dry_run_writes_nothing(ledger_path: Path, tmp_path: Path) -> None:
    before = file_bytes(ledger_path)
    output = tmp_path / "archive.jsonl"
    answer = archive(ledger_path, output, dry_run=True)
    assert (answer["dry_run"], answer["archived"], answer["task_ids"]) == (
        True,
        2,
        ["old-1", "old-2"],
    )
    assert not output.exists()
    assert file_bytes(ledger_path) == before


@pytest.mark.parametrize(
    ("before", "output", "code"),
    [
        ("yesterday", "archive.jsonl", "TIMESTAMP_INVALID"),
        (CUTOFF, "exists.jsonl", "OUTPUT_EXISTS"),
        (CUTOFF, ".", "OUTPUT_EXISTS"),
        (CUTOFF, "missing/archive.jsonl", "OUTPUT_UNWRITABLE"),
    ],
)
def test_refusals_change_nothing(
    ledger_path: Path, tmp_path: Path, before: str, output: str, code: str
) -> None:
    (tmp_path / "exists.jsonl").write_text("keep")
    snapshot = file_bytes(ledger_path)
    with pytest.raises(LedgerError) as refused:
        archive(ledger_path, tmp_path / output, before)
    assert refused.value.code == code
    assert file_bytes(ledger_path) == snapshot
    assert (tmp_path / "exists.jsonl").read_text() == "keep"
    assert not (tmp_path / "archive.jsonl").exists()


def test_nothing_to_archive_is_an_answer(ledger_path: Path, tmp_path: Path) -> None:
    snapshot = file_bytes(ledger_path)
    output = tmp_path / "archive.jsonl"
    answer = archive(ledger_path, output, "2000-01-01T00:00:00Z")
    assert (answer["archived"], answer["output"]) == (0, None)
    assert not output.exists()
    assert file_bytes(ledger_path) == snapshot


def test_the_command_line_archives_and_checks(
    ledger_path: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    output = tmp_path / "archive.jsonl"
    base = ["--db", str(ledger_path)]
    command = [*base, "archive", "--finished-before", CUTOFF, "--output", str(output)]
    assert main([*command, "--dry-run"]) == 0
    assert json.loads(capsys.readouterr().out)["dry_run"] is True
    assert main(command) == 0
    captured = capsys.readouterr()
    assert json.loads(captured.out)["archived"] == 2
    assert captured.err == ""  # no progress bar when stderr is not a terminal
    assert main([*base, "verify"]) == 0
    capsys.readouterr()
    assert main([*base, "verify-archive", str(output)]) == 0
    capsys.readouterr()
    output.write_bytes(output.read_bytes() + b"\n")
    assert main([*base, "verify-archive", str(output)]) == EXIT_NOT_INTACT
    assert "ARCHIVE_MISMATCH" in capsys.readouterr().err


def test_the_decision_lists_each_chain_before_deleting_it_and_seals_one_event() -> None:
    def candidate(task_id: str, status: str, updated_at: str) -> ArchiveCandidate:
        return ArchiveCandidate(task_id, status, 3, updated_at, 2, 7, "sha256:" + "1" * 64)

    candidates = (
        candidate("done", "SUCCEEDED", "2026-08-20T00:00:00.000Z"),
        candidate("running", "CLAIMED", "2026-08-20T00:00:00.000Z"),
        candidate("recent", "FAILED", "2026-08-21T00:00:00.000Z"),
    )
    state = ArchiveState(candidates, LogTail.read(40, [LEDGER_CHAIN], []))
    request = ArchiveRequest.parse(CUTOFF)
    now = Timestamp.parse("2026-09-01T00:00:00Z")
    plan = decide_archive(state, request, now=now, archive_digest="sha256:" + "2" * 64, actor=ACTOR)
    names = [write.statement for write in plan.statements()]
    assert names[0] is Statement.LIST_ARCHIVED_EVENTS
    assert names[-3:] == [
        Statement.DELETE_ARCHIVED_TASK,
        Statement.INSERT_EVENT,
        Statement.INSERT_SEAL,
    ]
    assert {write.params.get("task_id") for write in plan.writes} == {"done"}
    (event,) = plan.events
    assert (event.event.event_id, event.event.event_type) == (40, "TASKS_ARCHIVED")
    assert plan.response["task_ids"] == ["done"]
    with pytest.raises(LedgerError) as refused:
        decide_archive(
            ArchiveState(candidates[1:], state.tail),
            request,
            now=now,
            archive_digest="sha256:x",
            actor=ACTOR,
        )
    assert refused.value.code == "NOTHING_TO_ARCHIVE"


# Issue 28 part 7: the archive keeps the rows themselves, held against their seals.


@pytest.fixture
def succeeded_path(ledger_target: Path) -> Path:
    """One task claimed, submitted and accepted at START, so that its row holds a result and a
    verdict; one queued task stays."""
    clock = Clock()
    with TaskLedger(ledger_target, clock=clock) as ledger:
        create_release_notes(ledger)
        _create(ledger, "open")
        accept_release_notes(ledger)
    return ledger_target


def _lines(file: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in file.read_text().splitlines()]


def _write_lines(file: Path, lines: list[dict[str, Any]]) -> None:
    file.write_text("".join(json.dumps(line, sort_keys=True) + "\n" for line in lines))


def test_an_archive_holds_each_row_and_reads_it_back(succeeded_path: Path, tmp_path: Path) -> None:
    output = tmp_path / "archive.jsonl"
    assert archive(succeeded_path, output)["task_ids"] == ["done-1"]
    lines = _lines(output)
    assert lines[0]["format"] == 3
    state = [line for line in lines if "state" in line]
    assert {line["state"] for line in state} == {"tasks", "task_idempotency", "runs"}
    assert all(isinstance(line["row"], dict) for line in state)
    task_row = next(line["row"] for line in state if line["state"] == "tasks")
    assert task_row["goal"] == "write the release notes"
    assert verify_export(output).intact is True
    assert check_archive(succeeded_path, output)["intact"] is True
    assert verify(succeeded_path)["intact"] is True
    # Its attempt run went with it (its seal did): before, it stayed, and `verify` said so.
    assert rows(succeeded_path, "SELECT count(*) FROM runs") == [(0,)]
    everything = tmp_path / "everything.jsonl"
    with Database(succeeded_path) as db, everything.open("w") as out:
        export_log(db, out, task_id=None)
    assert verify_export(everything).intact is True

    shown = show_archive(output, "done-1")
    (task,) = shown["tasks"]
    assert (task["goal"], task["instructions"], task["status"]) == (
        "write the release notes",
        "one page",
        "SUCCEEDED",
    )
    assert task["result"] == {"summary": "notes written"}
    assert task["verification"]["decision"] == "SUCCEEDED"
    assert task["verification"]["reason"] == "reads well"
    assert task["events"][0]["event_type"] == "TASK_CREATED"
    assert task["events"][-1]["event_type"] == "TASK_VERIFIED"
    assert show_archive(output)["tasks"][0]["task_id"] == "done-1"


@pytest.mark.parametrize("column", ["goal", "result_json", "verification_json"])
def test_a_row_changed_in_the_file_fails_verify_archive_offline(
    succeeded_path: Path, tmp_path: Path, column: str
) -> None:
    output = tmp_path / "archive.jsonl"
    archive(succeeded_path, output)
    lines = _lines(output)
    for line in lines:
        if line.get("state") == "tasks":
            line["row"][column] = json.dumps({"forged": True})
    changed = tmp_path / "changed.jsonl"
    _write_lines(changed, lines)
    report = verify_export(changed).public()
    assert report["intact"] is False
    assert [
        (finding["code"], finding["table"], finding["key"])
        for finding in report["findings"]
        if finding["code"] == "STATE_MISMATCH"
    ] == [("STATE_MISMATCH", "tasks", "done-1")]
    assert check_archive(succeeded_path, changed)["intact"] is False


@pytest.mark.parametrize("row", [["a", "list"], "text", 7, None])
def test_a_row_that_is_no_object_is_a_finding_not_a_crash(
    succeeded_path: Path, tmp_path: Path, row: object
) -> None:
    output = tmp_path / "archive.jsonl"
    archive(succeeded_path, output)
    lines = _lines(output)
    for line in lines:
        if line.get("state") in {"tasks", "task_proposals"}:
            line["row"] = row
    changed = tmp_path / "changed.jsonl"
    _write_lines(changed, lines)
    report = verify_export(changed).public()
    assert report["intact"] is False
    assert ("STATE_MISMATCH", "tasks", "done-1") in [
        (finding["code"], finding.get("table"), finding.get("key"))
        for finding in report["findings"]
    ]


def test_a_row_removed_or_added_in_the_file_fails_verify_archive(
    succeeded_path: Path, tmp_path: Path
) -> None:
    output = tmp_path / "archive.jsonl"
    archive(succeeded_path, output)
    lines = _lines(output)
    removed = tmp_path / "removed.jsonl"
    _write_lines(removed, [line for line in lines if line.get("state") != "task_idempotency"])
    assert verify_export(removed).finding_counts.get("STATE_MISMATCH", 0) >= 1

    answer = next(line for line in lines if line.get("state") == "task_idempotency")
    extra = json.loads(json.dumps(answer))
    extra["key"] = extra["row"]["idempotency_key"] = "forged-key"
    added = tmp_path / "added.jsonl"
    _write_lines(added, [*lines[:-1], extra, lines[-1]])
    report = verify_export(added).public()
    assert report["intact"] is False
    assert any(finding.get("key") == "forged-key" for finding in report["findings"])


def test_an_archive_of_format_1_still_verifies_and_shows_its_events(
    succeeded_path: Path, tmp_path: Path
) -> None:
    output = tmp_path / "archive.jsonl"
    archive(succeeded_path, output)
    old = []
    for line in _lines(output):
        line.pop("format", None) if "schema" in line else line.pop("row", None)
        old.append(line)
    older = tmp_path / "format-1.jsonl"
    _write_lines(older, old)
    assert verify_export(older).intact is True
    shown = show_archive(older)
    assert (shown["format"], shown["rows_kept"]) == (1, False)
    assert shown["tasks"][0]["goal"] is None and shown["tasks"][0]["events"]


def test_show_refuses_a_file_that_is_not_an_archive(
    succeeded_path: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    output = tmp_path / "archive.jsonl"
    archive(succeeded_path, output)
    everything = tmp_path / "everything.jsonl"
    with Database(succeeded_path) as db, everything.open("w") as out:
        export_log(db, out, task_id=None)
    garbage = tmp_path / "garbage.txt"
    garbage.write_text("not json\n")
    for path in (everything, garbage, tmp_path / "missing.jsonl"):
        with pytest.raises(LedgerError) as refused:
            show_archive(path)
        assert refused.value.code in ("ARCHIVE_INVALID", "INPUT_UNREADABLE")
    with pytest.raises(LedgerError, match="ARCHIVE_TASK_NOT_FOUND"):
        show_archive(output, "open")

    assert main(["archive", "show", str(output)]) == 0
    text = capsys.readouterr().out
    assert "write the release notes" in text and "TASK_VERIFIED" in text
    assert main(["archive", "show", str(output), "done-1", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["tasks"][0]["task_id"] == "done-1"
    assert main(["archive", "show", str(garbage)]) != 0
    assert "ARCHIVE_INVALID" in capsys.readouterr().err


def test_the_archive_decision_and_a_held_row_line_are_golden(golden: Any) -> None:
    """The plan's writes for one task (its attempt runs' deletes included) and the state line
    of a task row as format 2 writes it, with what the offline check says of it changed."""
    candidate = ArchiveCandidate(
        "done", "SUCCEEDED", 3, "2026-08-20T00:00:00.000Z", 2, 7, "sha256:" + "1" * 64
    )
    state = ArchiveState((candidate,), LogTail.read(40, [LEDGER_CHAIN], []))
    plan = decide_archive(
        state,
        ArchiveRequest.parse(CUTOFF),
        now=Timestamp.parse("2026-09-01T00:00:00Z"),
        archive_digest="sha256:" + "2" * 64,
        actor=ACTOR,
    )
    writes = [[str(write.statement), write.params] for write in plan.writes]
    row = {
        "task_id": "done",
        "goal": "write the release notes",
        "instructions": "one page",
        "success_criteria_json": '["ok"]',
        "required_capabilities_json": "[]",
        "constraints_json": "{}",
        "metadata_json": "{}",
        "deadline": None,
        "priority": 0,
        "max_attempts": 3,
        "attempt": 1,
        "status": "SUCCEEDED",
        "claimed_by": None,
        "lease_token_hash": None,
        "lease_expires_at": None,
        "result_json": '{"summary":"notes written"}',
        "result_digest": None,
        "result_idempotency_key": "submit-done",
        "verification_json": '{"decision":"SUCCEEDED"}',
        "revision": 5,
        "created_at": "2026-08-20T00:00:00.000Z",
        "updated_at": "2026-08-20T00:00:00.000Z",
        "verification_mode": "reviewer",
        "retry_base_seconds": 30,
        "retry_max_seconds": 3600,
        "not_before": None,
        "seq": 1,
        "awaiting_projection": 0,
    }
    key, digest = stored_row_state(SEALED_TABLES["tasks"], row)
    line = export_state_line("tasks", key, digest, state_row_columns(SEALED_TABLES["tasks"], row))
    changed = {**row, "goal": "something else"}
    assert {
        "writes": writes,
        "state_line": line,
        "held": held_row_problem(SEALED_TABLES, "tasks", key, digest, line["row"]),
        "changed": held_row_problem(SEALED_TABLES, "tasks", key, digest, changed),
        "short": held_row_problem(SEALED_TABLES, "tasks", key, digest, {"task_id": "done"}),
    } == golden


def test_a_task_with_a_governed_write_keeps_its_chain_on_both_engines(
    ledger_path: Path, tmp_path: Path
) -> None:
    """Its governed writes (and the writer lease its events sealed) stay provable: the task is
    not archived. A proposal never written goes into the file (tests/test_log_archive_evidence)."""
    sqlite_shell(
        ledger_path,
        "INSERT INTO governed_repositories(name, path, protected_json, revision, created_at, "
        "updated_at) VALUES ('r', '/nowhere', '[]', 1, '2026-08-20T00:00:00.000Z', "
        "'2026-08-20T00:00:00.000Z')",
        "INSERT INTO task_proposals(proposal_id, task_id, attempt, repository, base_oid, "
        "head_oid, bundle_sha256, bundle_bytes, refs_json, changed_files_json, facts_json, "
        "created_at) VALUES ('p', 'old-1', 1, 'r', 'a', 'b', 'c', 1, '[]', '[]', '{}', "
        "'2026-08-20T00:00:00.000Z')",
        "INSERT INTO governed_writes(idempotency_key, task_id, proposal_id, repository, ref, "
        "old_oid, new_oid, generation, state, changed_files_json, revision, created_at, "
        "updated_at) VALUES ('w', 'old-1', 'p', 'r', 'refs/heads/x', 'a', 'b', 1, 'INTENDED', "
        "'[]', 1, '2026-08-20T00:00:00.000Z', '2026-08-20T00:00:00.000Z')",
    )
    answer = archive(ledger_path, tmp_path / "archive.jsonl", dry_run=True)
    assert answer["task_ids"] == ["old-2"]


def test_a_task_whose_attempt_holds_evidence_goes_with_its_runs(
    succeeded_path: Path, tmp_path: Path
) -> None:
    """Its run events are sealed on the ledger chain: the archive takes them along with the run
    (0.x migration 0023 lets them go once the chain is listed) and records each, and `verify`
    holds the rows gone against that record (before, such a task was kept back)."""
    with TaskLedger(succeeded_path, clock=Clock()) as ledger:
        _create(ledger, "worked")
        claim = ledger.claim(
            agent_id="agent-a", capabilities=[], lease_seconds=60, task_id="worked"
        )
        assert claim is not None
        runs = RunStore(succeeded_path, clock=Clock())
        try:
            runs.append_event("worked@1", "note", {"read": "x"}, lease_token=claim["lease_token"])
        finally:
            runs.close()
        ledger.cancel("worked", reason="done", idempotency_key="cancel-worked")
    answer = archive(succeeded_path, tmp_path / "archive.jsonl", LATER)
    assert answer["task_ids"] == ["done-1", "worked"]
    assert rows(succeeded_path, "SELECT count(*) FROM runs") == [(0,)]
    assert rows(succeeded_path, "SELECT count(*) FROM run_events") == [(0,)]
    assert verify(succeeded_path)["intact"] is True
