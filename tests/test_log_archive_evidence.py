"""Archiving a task with its evidence (issue 28 part 7): a task whose attempt run holds events
and whose result an auxiliary review judged is archived with both (the run, its events, the
review's row), and a governed task with its proposal and the proposal's bundle file; each is
shown, verified, refused when any of those rows (or the bundle) is changed in the file, and
restored exactly; a hand-made DELETE of a run event no archive listed is still refused."""

from __future__ import annotations

import base64
import hashlib
import json
from pathlib import Path
from typing import Any

import pytest
from aios_ledger.core import LedgerError
from aios_ledger.core.log.archived import (
    LedgerSealedRow,
    chains_without_bindings,
    ledger_rows_record,
    recorded_ledger_rows,
)
from aios_ledger.core.log.export import (
    ArchivedBundles,
    export_bundle_lines,
    parse_export_header,
)
from aios_ledger.core.sealed_tables import SEALED_TABLES
from aios_ledger.shell.db.connection import Database
from aios_ledger.shell.git.proposals import bundle_path
from aios_ledger.shell.log.archive import (
    archive_tasks,
    restore_archive,
    show_archive,
    verify_archive,
)
from aios_ledger.shell.log.cli import render_archive
from aios_ledger.shell.log.export import verify_export
from aios_ledger.shell.log.verification import verify_log
from aios_ledger.shell.projection.bindings import register_binding
from aios_ledger.shell.runs.store import RunStore
from aios_ledger.shell.tasks.ledger import TaskLedger
from aios_ledger.shell.work.reviewer import review_submitted
from conftest import both_engines, is_postgres
from git_support import binding, make_repository, register, verified_proposal
from legacy_fixtures import rows
from test_log_archive import LATER, create_release_notes, sqlite_shell
from test_log_support import tamper
from test_tasks_support import Clock

pytest_generate_tests = both_engines

ACCEPT = """echo '{"decision": "SUCCEEDED", "reason": "the notes read well"}'"""
# Every table the archive empties of the task and a restore fills again, read whole.
_TABLES = (
    "tasks",
    "events",
    "event_seals",
    "event_seal_rows",
    "archived_events",
    "task_idempotency",
    "runs",
    "run_events",
    "auxiliary_runs",
    "merkle_leaves",
)


def _snapshot(path: Path) -> dict[str, list[str]]:
    return {table: sorted(map(repr, rows(path, f"SELECT * FROM {table}"))) for table in _TABLES}


def _reviewed_task(path: Path) -> None:
    """`done-1`: claimed, two evidence events in its attempt run, submitted, then judged
    SUCCEEDED by an auxiliary review (`review:done-1:1:1`); `open` stays queued."""
    with TaskLedger(path, clock=Clock()) as ledger:
        create_release_notes(ledger)
        ledger.create_task(
            {"task_id": "open", "goal": "g", "instructions": "i", "success_criteria": ["ok"]},
            idempotency_key="create-open",
        )
        claim = ledger.claim(
            agent_id="agent-a", capabilities=[], lease_seconds=600, task_id="done-1"
        )
        assert claim is not None
        with RunStore(path, clock=Clock()) as runs:
            runs.append_event(
                "done-1@1", "read", {"file": "NEWS"}, lease_token=claim["lease_token"]
            )
            runs.append_event("done-1@1", "wrote", {"lines": 40}, lease_token=claim["lease_token"])
        ledger.submit_result(
            "done-1",
            lease_token=claim["lease_token"],
            result={"summary": "notes written"},
            idempotency_key="submit-done-1",
        )
    summary = review_submitted(path, ACCEPT, reviewer="reviewer-1")
    assert summary["exit"] == 0, summary


@pytest.fixture
def archived(ledger_target: Path, tmp_path: Path) -> tuple[Path, Path, dict[str, Any]]:
    _reviewed_task(ledger_target)
    assert verify_log(Database(ledger_target)).intact
    before = _snapshot(ledger_target)
    output = tmp_path / "archive.jsonl"
    with Database(ledger_target) as db:
        answer = archive_tasks(db, finished_before=LATER, output=output)
    assert answer["task_ids"] == ["done-1"]
    return ledger_target, output, before


def _verify(path: Path) -> dict[str, Any]:
    with Database(path) as db:
        return verify_log(db).public()


def _check(path: Path, file: Path) -> dict[str, Any]:
    with Database(path) as db:
        return verify_archive(db, file)


def _lines(file: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in file.read_text().splitlines()]


def _write_lines(file: Path, lines: list[dict[str, Any]]) -> None:
    file.write_text("".join(json.dumps(line) + "\n" for line in lines))


def test_a_task_with_evidence_and_a_review_is_archived_shown_verified_and_restored(
    archived: tuple[Path, Path, dict[str, Any]],
) -> None:
    path, output, before = archived
    for table, query in (
        ("runs", "SELECT count(*) FROM runs"),
        ("run_events", "SELECT count(*) FROM run_events"),
        ("auxiliary_runs", "SELECT count(*) FROM auxiliary_runs"),
    ):
        assert rows(path, query) == [(0,)], table
    found = _verify(path)
    assert found["intact"] is True, found["findings"]
    checked = _check(path, output)
    assert checked["intact"] is True, checked["findings"]
    assert verify_export(output).intact

    (payload,) = [
        json.loads(text)
        for (text,) in rows(
            path, "SELECT payload_json FROM events WHERE event_type = 'TASKS_ARCHIVED'"
        )
    ]
    (chain,) = payload["chains"]
    # The two run events and the review, each with the event id of its ledger seal.
    assert [entry[:2] for entry in chain["ledger_rows"]] == [
        ["auxiliary_runs", "review:done-1:1:1"],
        ["run_events", "done-1@1 1"],
        ["run_events", "done-1@1 2"],
    ]
    assert len(recorded_ledger_rows(payload)["task:done-1"]) == 3

    shown = show_archive(output, "done-1")["tasks"][0]
    assert shown["goal"] == "write the release notes"
    assert [(e["seq"], e["kind"], e["payload"]) for e in shown["evidence"]] == [
        (1, "read", {"file": "NEWS"}),
        (2, "wrote", {"lines": 40}),
    ]
    (review,) = shown["reviews"]
    assert review["aux_id"] == "review:done-1:1:1" and review["state"] == "COMPLETED"
    assert review["output"]["reason"] == "the notes read well"

    with Database(path) as db:
        answer = restore_archive(db, output, clock=Clock())
    assert answer["task_ids"] == ["done-1"]
    after = _snapshot(path)
    for table in ("tasks", "runs", "run_events", "auxiliary_runs", "task_idempotency"):
        assert after[table] == before[table], table
    found = _verify(path)
    assert found["intact"] is True, found["findings"]
    assert _check(path, output)["intact"] is True


def _tamper(line: dict[str, Any], table: str) -> bool:
    row = line.get("row")
    if line.get("state") != table or not isinstance(row, dict):
        return False
    if table == "run_events":
        row["payload_json"] = json.dumps({"file": "SECRETS"})
    elif table == "auxiliary_runs":
        row["output_json"] = row["output_json"].replace("read well", "read badly")
    else:
        row["prompt"] = "another prompt"
    return True


@pytest.mark.parametrize("table", ["run_events", "auxiliary_runs", "runs"])
def test_a_changed_evidence_row_in_the_file_is_refused(
    archived: tuple[Path, Path, dict[str, Any]], table: str
) -> None:
    path, output, _ = archived
    lines = _lines(output)
    assert sum(_tamper(line, table) for line in lines) >= 1
    _write_lines(output, lines)
    checked = _check(path, output)
    assert checked["intact"] is False
    assert "STATE_MISMATCH" in checked["finding_counts"], checked["findings"]
    with Database(path) as db, pytest.raises(LedgerError) as refused:
        restore_archive(db, output, clock=Clock())
    assert refused.value.code == "ARCHIVE_NOT_INTACT"
    assert rows(path, "SELECT count(*) FROM run_events") == [(0,)]


def test_a_changed_row_resealed_in_the_file_is_refused_by_the_ledger(
    archived: tuple[Path, Path, dict[str, Any]],
) -> None:
    """A run event changed with its line's digest recomputed passes the offline check of the
    line; the ledger's seal of it (the ledger chain's) does not."""
    from aios_ledger.core.log.state import stored_row_state

    path, output, _ = archived
    lines = _lines(output)
    for line in lines:
        if line.get("state") == "run_events":
            line["row"]["payload_json"] = json.dumps({"file": "SECRETS"})
            line["digest"] = stored_row_state(SEALED_TABLES["run_events"], line["row"])[1]
            break
    _write_lines(output, lines)
    checked = _check(path, output)
    assert checked["intact"] is False
    assert "ARCHIVE_MISMATCH" in checked["finding_counts"], checked["findings"]


def test_a_hand_made_delete_of_a_run_event_is_still_refused(ledger_target: Path) -> None:
    _reviewed_task(ledger_target)
    before = _snapshot(ledger_target)
    with pytest.raises(Exception, match="EVENTS_APPEND_ONLY"):
        sqlite_shell(ledger_target, "DELETE FROM run_events WHERE run_id = 'done-1@1'")
    assert _snapshot(ledger_target) == before


def test_a_run_event_or_review_deleted_by_hand_after_a_forged_listing_is_reported(
    ledger_target: Path,
) -> None:
    """A DBA who lists the chain by hand gets the DELETE through the trigger; `verify` finds the
    listing that no sealed TASKS_ARCHIVED event records, and the review row gone."""
    _reviewed_task(ledger_target)
    (last,) = rows(ledger_target, "SELECT max(event_id) FROM events")
    sqlite_shell(
        ledger_target,
        "INSERT INTO archived_events(event_id, archive_event_id, chain, seal) "
        f"VALUES ({last[0] + 5}, {last[0] + 6}, 'task:done-1', 'sha256:x')",
        "DELETE FROM run_events WHERE run_id = 'done-1@1' AND seq = 2",
        "DELETE FROM auxiliary_runs",
    )
    found = _verify(ledger_target)
    assert found["intact"] is False
    assert {"ARCHIVE_MISMATCH", "STATE_MISMATCH"} <= set(found["finding_counts"])


def test_the_ledger_rows_record_is_golden(golden: Any) -> None:
    listed = (
        LedgerSealedRow("run_events", "t@1 2", 9),
        LedgerSealedRow("auxiliary_runs", "review:t:1:1", 12),
        LedgerSealedRow("run_events", "t@1 1", 8),
    )
    assert {
        "record": ledger_rows_record(listed),
        "read_back": sorted(
            recorded_ledger_rows(
                {"chains": [{"task_id": "t", "ledger_rows": ledger_rows_record(listed)}]}
            )["task:t"]
        )
        == sorted(listed),
        "bundle_lines": export_bundle_lines(hashlib.sha256(b"bundle").hexdigest(), b"bundle"),
        "bundle_findings": [
            finding.public()
            for finding in _bundles(b"bundle").findings(
                {"p-same": hashlib.sha256(b"bundle").hexdigest(), "p-other": "0" * 64}
            )
        ],
    } == golden


def _bundles(data: bytes) -> ArchivedBundles:
    bundles = ArchivedBundles(keep=True)
    for line in export_bundle_lines(hashlib.sha256(data).hexdigest(), data):
        bundles.add(line)
    return bundles


def test_a_bundle_cut_or_out_of_order_is_refused() -> None:
    data = bytes(range(256)) * 40000  # three parts
    lines = export_bundle_lines(hashlib.sha256(data).hexdigest(), data)
    assert [line["part"] for line in lines] == [0, 1, 2]
    assert _bundles(data).data(lines[0]["bundle"]) == data
    bundles = ArchivedBundles()
    with pytest.raises(LedgerError) as refused:
        for line in (lines[0], lines[2]):
            bundles.add(line)
    assert refused.value.code == "EXPORT_INVALID"
    cut = ArchivedBundles()
    cut.add(lines[0])
    (finding,) = cut.findings({"p": lines[0]["bundle"]})
    assert finding.code == "BUNDLE_MISSING"


@pytest.fixture
def proposed(ledger_target: Path, tmp_path: Path) -> tuple[Path, dict[str, Any], Path]:
    """`gw-1`: a governed task whose proposal (a verified git bundle) was accepted and never
    written; archived to a file."""
    bare, base = make_repository(tmp_path / "repo")
    register(ledger_target, bare)
    proposal = verified_proposal(
        ledger_target, "gw-1", binding("gw-1", base), {"widgets.txt": "better widgets\n"}
    )
    output = tmp_path / "archive.jsonl"
    with Database(ledger_target) as db:
        answer = archive_tasks(db, finished_before=LATER, output=output)
    assert answer["task_ids"] == ["gw-1"]
    return ledger_target, proposal, output


def _bundle(path: Path, digest: str) -> Path:
    with Database(path) as db:
        return bundle_path(db, digest)


def test_a_proposal_and_its_bundle_are_archived_shown_verified_and_restored(
    proposed: tuple[Path, dict[str, Any], Path],
) -> None:
    path, proposal, output = proposed
    (row,) = [line["row"] for line in _lines(output) if line.get("state") == "task_proposals"]
    digest = row["bundle_sha256"]
    bundle_lines = [line for line in _lines(output) if "bundle" in line]
    assert [line["bundle"] for line in bundle_lines] == [digest]
    assert rows(path, "SELECT count(*) FROM task_proposals") == [(0,)]
    assert not _bundle(path, digest).exists()  # no proposal left names it
    assert _verify(path)["intact"] is True
    checked = _check(path, output)
    assert checked["intact"] is True, checked["findings"]

    (shown,) = show_archive(output, "gw-1")["tasks"][0]["proposals"]
    assert shown["proposal_id"] == proposal["proposal_id"]
    assert shown["changed_files"] == ["widgets.txt"]

    with Database(path) as db:
        restore_archive(db, output, clock=Clock())
    assert rows(path, "SELECT proposal_id, bundle_sha256 FROM task_proposals") == [
        (proposal["proposal_id"], digest)
    ]
    assert _bundle(path, digest).exists()
    found = _verify(path)
    assert found["intact"] is True, found["findings"]


def _binding_rows(path: Path) -> list[tuple[Any, ...]]:
    return rows(path, "SELECT * FROM governed_bindings ORDER BY task_id, job_id")


def test_a_governed_binding_is_kept_shown_and_restored_with_its_task(
    ledger_target: Path, tmp_path: Path
) -> None:
    """Nothing acknowledged is lost: the binding the task was bound by goes into the file (held
    against its seal, the ledger chain's), is recorded by the TASKS_ARCHIVED event, is shown,
    and comes back, byte for byte, on restore."""
    bare, base = make_repository(tmp_path / "repo")
    register(ledger_target, bare)
    verified_proposal(ledger_target, "gw-1", binding("gw-1", base), {"widgets.txt": "better\n"})
    before = _binding_rows(ledger_target)
    assert [row[:2] for row in before] == [("gw-1", "job-gw-1")]
    output = tmp_path / "archive.jsonl"
    with Database(ledger_target) as db:
        assert archive_tasks(db, finished_before=LATER, output=output)["task_ids"] == ["gw-1"]
    assert _binding_rows(ledger_target) == []
    (held,) = [line for line in _lines(output) if line.get("state") == "governed_bindings"]
    assert held["key"] == "gw-1 job-gw-1" and held["row"]["binding_json"] == before[0][2]
    (payload,) = [
        json.loads(text)
        for (text,) in rows(
            ledger_target, "SELECT payload_json FROM events WHERE event_type = 'TASKS_ARCHIVED'"
        )
    ]
    assert payload["archive_format"] == 3
    (chain,) = payload["chains"]
    assert ["governed_bindings", "gw-1 job-gw-1"] in [entry[:2] for entry in chain["ledger_rows"]]
    assert _verify(ledger_target)["intact"] is True
    checked = _check(ledger_target, output)
    assert checked["intact"] is True, checked["findings"]

    shown = show_archive(output, "gw-1")
    assert shown["bindings_kept"] is True
    (bound,) = shown["tasks"][0]["bindings"]
    assert bound["job_id"] == "job-gw-1" and bound["binding"]["base_oid"] == base
    assert "binding       job-gw-1  " in render_archive(shown)

    with Database(ledger_target) as db:
        restore_archive(db, output, clock=Clock())
    assert _binding_rows(ledger_target) == before
    found = _verify(ledger_target)
    assert found["intact"] is True, found["findings"]


def test_a_binding_deleted_by_hand_after_a_restore_is_reported(
    proposed: tuple[Path, dict[str, Any], Path],
) -> None:
    """Before format 3, any binding of a chain an archive ever recorded could be gone unseen;
    now one gone is accounted for only by the archive that recorded removing it."""
    path, _, output = proposed
    with Database(path) as db:
        restore_archive(db, output, clock=Clock())
    sqlite_shell(path, "DELETE FROM governed_bindings")
    found = _verify(path)
    assert found["intact"] is False
    assert [
        (finding["code"], finding["table"], finding["key"])
        for finding in found["findings"]
        if finding.get("table") == "governed_bindings"
    ] == [("STATE_MISMATCH", "governed_bindings", "gw-1 job-gw-1")]


def test_a_binding_registered_again_since_the_archive_refuses_the_restore(
    proposed: tuple[Path, dict[str, Any], Path], tmp_path: Path
) -> None:
    """A binding of the archived task's id and job registered since takes the key a restore
    would put back: `RESTORE_ROW_EXISTS`, and nothing is restored."""
    path, _, output = proposed
    (line,) = [line for line in _lines(output) if line.get("state") == "governed_bindings"]
    again = json.loads(line["row"]["binding_json"])
    again["generation"] = 2
    with Database(path) as db:
        register_binding(db, again, clock=Clock())
    taken = _binding_rows(path)
    with Database(path) as db, pytest.raises(LedgerError) as refused:
        restore_archive(db, output, clock=Clock())
    assert refused.value.code == "RESTORE_ROW_EXISTS"
    assert "governed_bindings" in refused.value.detail
    assert _binding_rows(path) == taken
    assert rows(path, "SELECT count(*) FROM tasks WHERE task_id = 'gw-1'") == [(0,)]


def test_a_binding_no_seal_covers_is_kept_and_checked_by_the_files_digest(
    ledger_target: Path, tmp_path: Path
) -> None:
    """A binding registered before bindings were sealed (issue 26) has no seal row: simulated
    here by removing its seal row before the archive. The archive keeps it and does not
    record it; `verify-archive` passes over it in the file the ledger recorded, and the file
    changed is still refused by its digest; a restore puts it back."""
    bare, base = make_repository(tmp_path / "repo")
    register(ledger_target, bare)
    verified_proposal(ledger_target, "gw-1", binding("gw-1", base), {"widgets.txt": "better\n"})
    before = _binding_rows(ledger_target)
    if not is_postgres(ledger_target):  # on PostgreSQL, tamper's session skips triggers
        sqlite_shell(ledger_target, "DROP TRIGGER event_seal_rows_refuse_delete")
    tamper(ledger_target, ("DELETE FROM event_seal_rows WHERE row_table = 'governed_bindings'", ()))
    output = tmp_path / "archive.jsonl"
    with Database(ledger_target) as db:
        archive_tasks(db, finished_before=LATER, output=output)
    checked = _check(ledger_target, output)
    assert checked["intact"] is True, checked["findings"]
    lines = _lines(output)
    (line,) = [line for line in lines if line.get("state") == "governed_bindings"]
    line["row"]["created_at"] = "2026-01-01T00:00:00.000Z"
    changed = tmp_path / "changed.jsonl"
    _write_lines(changed, lines)
    assert "ARCHIVE_MISMATCH" in _check(ledger_target, changed)["finding_counts"]
    with Database(ledger_target) as db:
        restore_archive(db, output, clock=Clock())
    assert _binding_rows(ledger_target) == before


@pytest.mark.parametrize("resealed", [False, True])
def test_a_changed_binding_in_the_file_is_refused(
    proposed: tuple[Path, dict[str, Any], Path], resealed: bool
) -> None:
    """Offline, a binding changed in the file fails its line's digest; changed with its line's
    digest recomputed, it fails the ledger's own seal of it (`verify-archive`)."""
    from aios_ledger.core.log.state import stored_row_state

    path, _, output = proposed
    lines = _lines(output)
    (line,) = [line for line in lines if line.get("state") == "governed_bindings"]
    bound = json.loads(line["row"]["binding_json"])
    bound["target_branch"] = "main"
    line["row"]["binding_json"] = json.dumps(bound, sort_keys=True, separators=(",", ":"))
    if resealed:
        line["digest"] = stored_row_state(SEALED_TABLES["governed_bindings"], line["row"])[1]
    _write_lines(output, lines)
    checked = _check(path, output)
    assert checked["intact"] is False
    code = "ARCHIVE_MISMATCH" if resealed else "STATE_MISMATCH"
    assert code in checked["finding_counts"], checked["findings"]
    with Database(path) as db, pytest.raises(LedgerError) as refused:
        restore_archive(db, output, clock=Clock())
    assert refused.value.code == ("ARCHIVE_MISMATCH" if resealed else "ARCHIVE_NOT_INTACT")
    assert _binding_rows(path) == []


@pytest.mark.parametrize("what", ["bundle", "proposal"])
def test_a_changed_bundle_or_proposal_in_the_file_is_refused(
    proposed: tuple[Path, dict[str, Any], Path], what: str
) -> None:
    path, _, output = proposed
    lines = _lines(output)
    for line in lines:
        if what == "bundle" and "bundle" in line:
            data = bytearray(base64.b64decode(line["data"]))
            data[-1] ^= 1
            line["data"] = base64.b64encode(bytes(data)).decode()
        if what == "proposal" and line.get("state") == "task_proposals":
            line["row"]["changed_files_json"] = '["README.md"]'
    _write_lines(output, lines)
    checked = _check(path, output)
    assert checked["intact"] is False
    code = "BUNDLE_CHANGED" if what == "bundle" else "STATE_MISMATCH"
    assert code in checked["finding_counts"], checked["findings"]
    with Database(path) as db, pytest.raises(LedgerError) as refused:
        restore_archive(db, output, clock=Clock())
    assert refused.value.code == "ARCHIVE_NOT_INTACT"
    assert rows(path, "SELECT count(*) FROM task_proposals") == [(0,)]


def test_only_an_archive_before_format_3_accounts_for_bindings_by_its_chains_alone() -> None:
    """A TASKS_ARCHIVED event of a format 2 archive deleted its tasks' bindings unkept: `verify`
    passes over those gone by their chain; one of format 3 records each binding it removed."""
    chains = [{"task_id": "t", "last_event_id": 4, "last_seal": "sha256:" + "0" * 64}]
    assert chains_without_bindings({"archive_sha256": "sha256:x", "chains": chains}) == {"task:t"}
    kept = {"archive_sha256": "sha256:x", "archive_format": 3, "chains": chains}
    assert chains_without_bindings(kept) == set()
    assert chains_without_bindings({**kept, "archive_format": "3"}) == {"task:t"}
    header = {"schema": "aios.event_export.v1", "scope": "archive", "finished_before": "x"}
    for archive_format in (2, 3):
        parsed = parse_export_header({**header, "format": archive_format})
        assert parsed.archive_format == archive_format
    for refused in (4, True, "3"):
        with pytest.raises(LedgerError, match="EXPORT_INVALID"):
            parse_export_header({**header, "format": refused})
