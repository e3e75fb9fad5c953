"""Restoring an archive (issue 28 part 7): `archive restore FILE` puts the archived tasks back,
rows and events with their ids and seals, behind one sealed TASKS_RESTORED event; `verify` is
intact after it on both engines and still finds a restored row changed by hand; a doctored
file, a second restore and a task id taken since are refused and change nothing."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import attrs
import pytest
from aios_ledger.core import LedgerError, LogTail, Timestamp, WritePlan
from aios_ledger.core.actors import Actor
from aios_ledger.core.log.archive_file import read_archive
from aios_ledger.core.log.archived import ArchiveAccount, ArchivedChainEnd
from aios_ledger.core.log.records import EventRow
from aios_ledger.core.log.restore import RestoreRequest, RestoreState, decide_restore
from aios_ledger.core.log.seals import LEDGER_CHAIN
from aios_ledger.core.sealed_tables import SEALED_TABLES
from aios_ledger.shell.cli import main
from aios_ledger.shell.db.connection import Database
from aios_ledger.shell.log.archive import (
    archive_tasks,
    file_digest,
    restore_archive,
    verify_archive,
)
from aios_ledger.shell.log.export import export_log, verify_export
from aios_ledger.shell.log.verification import verify_log
from aios_ledger.shell.tasks.ledger import TaskLedger
from conftest import both_engines, is_postgres
from legacy_fixtures import rows
from test_log_archive import (
    LATER,
    _create,
    accept_release_notes,
    create_release_notes,
    sqlite_shell,
)
from test_tasks_support import Clock

pytest_generate_tests = both_engines

# Every table a restore writes, or that an archive left alone, read whole: "changes nothing"
# means these read the same before and after.
_TABLES = (
    "tasks",
    "events",
    "event_seals",
    "event_seal_rows",
    "archived_events",
    "task_idempotency",
    "runs",
    "merkle_leaves",
)

# Who the decisions here act as.
ACTOR = Actor("tester", "library")


def _snapshot(path: Path) -> dict[str, list[str]]:
    return {table: sorted(map(repr, rows(path, f"SELECT * FROM {table}"))) for table in _TABLES}


@pytest.fixture
def archived(ledger_target: Path, tmp_path: Path) -> tuple[Path, Path]:
    """Two tasks: `done-1` claimed, submitted and accepted (its attempt run without events),
    `gone-1` cancelled; both archived to a file, one task left queued."""
    clock = Clock()
    with TaskLedger(ledger_target, clock=clock) as ledger:
        create_release_notes(ledger)
        _create(ledger, "gone-1")
        ledger.cancel("gone-1", reason="not needed", idempotency_key="cancel-gone-1")
        accept_release_notes(ledger)
        _create(ledger, "open")
    output = tmp_path / "archive.jsonl"
    with Database(ledger_target) as db:
        answer = archive_tasks(db, finished_before=LATER, output=output)
    assert answer["task_ids"] == ["done-1", "gone-1"]
    return ledger_target, output


def _restore(path: Path, file: Path, key: str | None = None) -> dict[str, Any]:
    with Database(path) as db:
        return restore_archive(db, file, idempotency_key=key, clock=Clock())


def _verify(path: Path) -> dict[str, Any]:
    with Database(path) as db:
        return verify_log(db).public()


def test_archive_then_restore_gives_back_the_tasks_and_verify_stays_intact(
    archived: tuple[Path, Path],
) -> None:
    path, file = archived
    assert rows(path, "SELECT count(*) FROM tasks") == [(1,)]
    with Database(path) as db:
        head_archived = verify_log(db).head
    answer = _restore(path, file)
    assert (answer["restored"], answer["task_ids"]) == (2, ["done-1", "gone-1"])
    assert answer["archive_sha256"] == file_digest(file)
    report = _verify(path)
    assert report["intact"] is True, report["findings"]
    assert (report["archived"], report["rows_unprovable"]) == (0, 0)
    assert rows(path, "SELECT count(*) FROM archived_events") == [(0,)]
    # The events came back under their ids and seals: the head rolls over the same pairs, and
    # the TASKS_RESTORED event after them; no Merkle leaf was appended for them.
    assert report["head"]["events"] == head_archived.events + 1
    (leaves,) = rows(path, "SELECT count(*) FROM merkle_leaves")
    assert leaves == (report["head"]["events"],)
    with TaskLedger(path) as ledger:
        task = ledger.get("done-1")
        assert task["status"] == "SUCCEEDED"
        assert task["goal"] == "write the release notes"
        assert task["result"] == {"summary": "notes written"}
        kinds = [event["event_type"] for event in ledger.events("done-1")]
        assert kinds[0] == "TASK_CREATED" and kinds[-1] == "TASK_VERIFIED"
        assert ledger.get("gone-1")["status"] == "CANCELLED"
        # A retried create of a restored task replays its recorded answer: the key came back.
        again = ledger.create_task(
            {"task_id": "gone-1", "goal": "g", "instructions": "i", "success_criteria": ["ok"]},
            idempotency_key="create-gone-1",
        )
        assert again["idempotent"] is True
    (restored,) = rows(path, "SELECT payload_json FROM events WHERE event_type = 'TASKS_RESTORED'")
    payload = json.loads(restored[0])
    assert payload["archive_event_id"] == answer["archive_event_id"]
    assert [chain["task_id"] for chain in payload["chains"]] == ["done-1", "gone-1"]
    # An export of everything checks out offline too: the same accounting, without a database.
    everything = file.with_name("everything.jsonl")
    with Database(path) as db, everything.open("w") as out:
        export_log(db, out, task_id=None)
    assert verify_export(everything).intact is True


def test_a_restored_task_can_be_archived_and_restored_again(
    archived: tuple[Path, Path], tmp_path: Path
) -> None:
    path, file = archived
    _restore(path, file)
    second = tmp_path / "second.jsonl"
    with Database(path) as db:
        assert archive_tasks(db, finished_before=LATER, output=second)["archived"] == 2
    assert _verify(path)["intact"] is True
    _restore(path, second)
    report = _verify(path)
    assert report["intact"] is True, report["findings"]


def test_verify_still_finds_a_restored_row_changed_by_hand(archived: tuple[Path, Path]) -> None:
    path, file = archived
    _restore(path, file)
    sqlite_shell(path, "UPDATE tasks SET goal = 'something else' WHERE task_id = 'done-1'")
    report = _verify(path)
    assert report["intact"] is False
    assert report["finding_counts"] == {"STATE_MISMATCH": 1}


def test_a_doctored_file_is_refused_and_changes_nothing(
    archived: tuple[Path, Path], tmp_path: Path
) -> None:
    path, file = archived
    before = _snapshot(path)
    lines = [json.loads(line) for line in file.read_text().splitlines()]
    for line in lines:
        if line.get("state") == "tasks" and line["key"] == "done-1":
            line["row"]["goal"] = "something else"
    doctored = tmp_path / "doctored.jsonl"
    doctored.write_text("".join(json.dumps(line) + "\n" for line in lines))
    with pytest.raises(LedgerError) as refused:
        _restore(path, doctored)
    assert refused.value.code == "ARCHIVE_NOT_INTACT"
    # A file that checks out offline but is not the one archived (re-encoded: other bytes).
    reencoded = tmp_path / "reencoded.jsonl"
    reencoded.write_text(
        "".join(json.dumps(json.loads(line), indent=None) + "\n" for line in file.open())
    )
    with pytest.raises(LedgerError) as unrecorded:
        _restore(path, reencoded)
    assert unrecorded.value.code == "ARCHIVE_MISMATCH"
    assert _snapshot(path) == before


def test_a_second_restore_is_refused_and_a_key_replays(archived: tuple[Path, Path]) -> None:
    path, file = archived
    first = _restore(path, file, key="restore-1")
    after = _snapshot(path)
    assert _restore(path, file, key="restore-1") == {**first, "idempotent": True}
    with pytest.raises(LedgerError) as refused:
        _restore(path, file)
    assert refused.value.code == "ARCHIVE_ALREADY_RESTORED"
    assert _snapshot(path) == after
    assert _verify(path)["intact"] is True


def test_a_task_id_taken_since_is_refused_and_changes_nothing(
    archived: tuple[Path, Path],
) -> None:
    path, file = archived
    with TaskLedger(path, clock=Clock()) as ledger:
        _create(ledger, "gone-1")
    before = _snapshot(path)
    with pytest.raises(LedgerError) as refused:
        _restore(path, file)
    assert refused.value.code == "RESTORE_TASK_EXISTS"
    assert _snapshot(path) == before


def test_a_hand_made_delete_of_a_listing_is_still_refused(archived: tuple[Path, Path]) -> None:
    path, _ = archived
    with pytest.raises(Exception, match="EVENTS_APPEND_ONLY"):
        sqlite_shell(path, "DELETE FROM archived_events")
    assert rows(path, "SELECT count(*) FROM archived_events") != [(0,)]


def test_the_command_line_restores(
    archived: tuple[Path, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    path, file = archived
    database = ["--db", str(path)]
    assert main([*database, "archive", "restore", str(file)]) == 0
    assert json.loads(capsys.readouterr().out)["restored"] == 2
    assert main([*database, "archive", "restore", str(file)]) != 0
    assert "ARCHIVE_ALREADY_RESTORED" in capsys.readouterr().err


def test_the_restore_decision_is_golden(archived: tuple[Path, Path], golden: Any) -> None:
    """The plan for a real archive file: its rows, events, seals and sealed rows go back, then
    its listings; one sealed TASKS_RESTORED event with the recorded answer under its key."""
    _, file = archived
    contents = read_archive(file.read_bytes().splitlines())
    ends = {}
    for task in contents.tasks.values():
        last = task.events[-1]
        ends["task:" + task.task_id] = ArchivedChainEnd(last["event_id"], last["seal"])
    state = RestoreState(
        archive_event_id=90,
        recorded=ends,
        listed=ends,
        taken=frozenset(),
        prior=None,
        tail=LogTail.read(100, [LEDGER_CHAIN], []),
    )
    request = RestoreRequest.from_mapping(
        {"archive_sha256": "sha256:" + "2" * 64, "idempotency_key": "restore-1"}
    )
    now = Timestamp.parse("2026-09-01T00:00:00Z")
    plan = decide_restore(state, request, contents, tables=SEALED_TABLES, now=now, actor=ACTOR)
    assert isinstance(plan, WritePlan)
    statements = [str(write.statement) for write in plan.statements()]
    refusals = {}
    for name, changed in (
        ("unrecorded", {"archive_event_id": None}),
        ("restored", {"listed": {}}),
        ("taken", {"taken": frozenset({("tasks", "done-1", "seq")})}),
    ):
        with pytest.raises(LedgerError) as refused:
            decide_restore(
                attrs.evolve(state, **changed),
                request,
                contents,
                tables=SEALED_TABLES,
                now=now,
                actor=ACTOR,
            )
        refusals[name] = refused.value.code
    assert {
        "statements": statements,
        "response": plan.response,
        "refusals": refusals,
    } == golden


def test_verify_archive_holds_each_chain_to_the_seal_the_ledger_recorded(
    ledger_target: Path, tmp_path: Path
) -> None:
    """Two ledgers with the same history but one cancel's reason: each one's archive file
    checks out offline, but against the other ledger neither its digest nor its chain's last
    seal (and so the row digests its seals cover) is one the ledger recorded."""
    files = {}
    for name, path, reason in (
        ("other", tmp_path / "other.sqlite3", "done"),
        ("this", ledger_target, "changed my mind"),
    ):
        with TaskLedger(path, clock=Clock()) as ledger:
            _create(ledger, "old-1")
            ledger.cancel("old-1", reason=reason, idempotency_key="cancel-old-1")
        files[name] = tmp_path / f"{name}.jsonl"
        with Database(path) as db:
            archive_tasks(db, finished_before=LATER, output=files[name])
    with Database(ledger_target) as db:
        assert verify_archive(db, files["this"])["intact"] is True
        report = verify_archive(db, files["other"])
    assert report["intact"] is False
    assert report["finding_counts"] == {"ARCHIVE_MISMATCH": 2}
    assert [finding.get("chain") for finding in report["findings"]] == [None, "task:old-1"]
    with pytest.raises(LedgerError) as refused:
        _restore(ledger_target, files["other"])
    assert refused.value.code == "ARCHIVE_MISMATCH"


def _ledger_event(event_id: int, kind: str, payload: dict[str, Any]) -> EventRow:
    return EventRow(event_id, None, None, kind, json.dumps(payload), "2026-08-20T00:00:00.000Z")


def test_a_chain_neither_listed_nor_restored_is_still_reported() -> None:
    """What `verify` holds a restore to: a chain its archive event recorded that no listing
    holds must be one a later TASKS_RESTORED event restored, ending where it was archived."""
    end = {"task_id": "t", "last_event_id": 3, "last_seal": "sha256:" + "a" * 64}
    archived = _ledger_event(4, "TASKS_ARCHIVED", {"archive_sha256": "sha256:x", "chains": [end]})
    restored = {"archive_sha256": "sha256:x", "archive_event_id": 4, "chains": [end]}

    account = ArchiveAccount()
    assert account.close(archived) == []
    assert account.restored(_ledger_event(5, "TASKS_RESTORED", restored)) == []
    assert account.remaining() == []

    unrestored = ArchiveAccount()
    assert unrestored.close(archived) == []
    ((event_id, problem),) = unrestored.remaining()
    assert event_id == 4 and "no TASKS_RESTORED event restored it" in problem

    elsewhere = ArchiveAccount()
    elsewhere.close(archived)
    moved = {**restored, "chains": [{**end, "last_event_id": 2}]}
    (problem,) = elsewhere.restored(_ledger_event(5, "TASKS_RESTORED", moved))
    assert "restored from archive event 4 up to event 2" in problem
    assert elsewhere.remaining() == []  # reported once, at the restore event


def test_a_creation_sequence_taken_since_is_refused_where_the_store_reuses_it(
    ledger_target: Path, tmp_path: Path
) -> None:
    """SQLite gives a new task the sequence after the largest, which the archive removed:
    the restored task's sealed row would clash with it (RESTORE_SEQ_TAKEN, nothing changed).
    PostgreSQL draws sequences that never come back, and the restore goes through."""
    with TaskLedger(ledger_target, clock=Clock()) as ledger:
        _create(ledger, "last")
        ledger.cancel("last", reason="done", idempotency_key="cancel-last")
    file = tmp_path / "archive.jsonl"
    with Database(ledger_target) as db:
        archive_tasks(db, finished_before=LATER, output=file)
    with TaskLedger(ledger_target, clock=Clock()) as ledger:
        _create(ledger, "fresh")
    if not is_postgres(ledger_target):
        before = _snapshot(ledger_target)
        with pytest.raises(LedgerError) as refused:
            _restore(ledger_target, file)
        assert refused.value.code == "RESTORE_SEQ_TAKEN"
        assert _snapshot(ledger_target) == before
        return
    assert _restore(ledger_target, file)["task_ids"] == ["last"]
    assert _verify(ledger_target)["intact"] is True
