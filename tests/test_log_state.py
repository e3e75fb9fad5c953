"""The history covers the state: a task, auxiliary-run or projection row changed, deleted or
inserted with the DBA's tool (stdlib sqlite3, no trigger in the way) is a STATE_MISMATCH naming
the row, for `verify` in the library and on the command line and for `verify-export`."""

from __future__ import annotations

import asyncio
import json
import sqlite3
from pathlib import Path
from typing import Any

import pytest
from aios_ledger.core import digest_json
from aios_ledger.core.auxiliary import AuxiliaryCapabilityProfile
from aios_ledger.core.log.rows import ROW_SCHEMA, row_digest
from aios_ledger.shell.auxiliary.service import AuxiliaryRunService
from aios_ledger.shell.cli import main
from aios_ledger.shell.clock import AUTHORIZATION_ENV
from aios_ledger.shell.db.connection import Database
from aios_ledger.shell.log.cli import EXIT_NOT_INTACT
from aios_ledger.shell.log.verification import verify_log
from aios_ledger.shell.projection.store import InitialExecutionProjectionStore
from aios_ledger.shell.tasks.ledger import TaskLedger
from legacy_fixtures import OWNER, TASK, dump, legacy_database, projection_request, resolver
from test_aux_service import FixtureExecutor, evidence, spec_for


def sqlite_shell(path: Path, statement: str, params: tuple[Any, ...] = ()) -> None:
    """What a DBA does with the sqlite3 shell: one statement, committed, foreign keys off."""
    con = sqlite3.connect(path)
    try:
        con.execute(statement, params)
        con.commit()
    finally:
        con.close()


def report(path: Path) -> dict[str, Any]:
    with Database(path) as db:
        return verify_log(db).public()


def mismatches(path: Path) -> set[tuple[str, str]]:
    found = report(path)
    assert set(found["finding_counts"]) <= {"STATE_MISMATCH"}, found["findings"]
    return {
        (finding["table"], finding["key"])
        for finding in found["findings"]
        if finding["code"] == "STATE_MISMATCH"
    }


@pytest.fixture
def tasks(tmp_path: Path) -> Path:
    path = tmp_path / "ledger.db"
    with TaskLedger(path) as ledger:
        for name in ("t-1", "t-2"):
            ledger.create_task(
                {"task_id": name, "goal": "g", "instructions": "i", "success_criteria": ["ok"]},
                idempotency_key=f"create-{name}",
            )
        claimed = ledger.claim(agent_id="a", capabilities=[], lease_seconds=60, task_id="t-1")
        assert claimed is not None
        ledger.submit_result(
            "t-1", lease_token=claimed["lease_token"], result={"x": 1}, idempotency_key="s-1"
        )
    return path


def test_an_untouched_ledger_proves_every_row(tasks: Path) -> None:
    found = report(tasks)
    assert found["intact"] is True
    # Two tasks and three recorded answers (two creates, one submit), each sealed.
    assert (found["rows_checked"], found["rows_unprovable"]) == (6, 0)


def test_a_task_row_changed_behind_the_ledgers_back_is_named(tasks: Path) -> None:
    sqlite_shell(tasks, "UPDATE tasks SET status = 'SUCCEEDED' WHERE task_id = 't-1'")
    assert mismatches(tasks) == {("tasks", "t-1")}


def test_a_claim_order_swapped_behind_the_ledgers_back_is_named(tasks: Path) -> None:
    """`seq` decides which of two equal-priority tasks a claim takes first: swapping it is a
    change of state like any other, though the seals predate nothing here."""
    sqlite_shell(tasks, "UPDATE tasks SET seq = seq + 1000 WHERE task_id = 't-1'")
    assert mismatches(tasks) == {("tasks", "t-1")}


def test_a_task_row_deleted_is_named(tasks: Path) -> None:
    sqlite_shell(tasks, "DELETE FROM tasks WHERE task_id = 't-2'")
    assert mismatches(tasks) == {("tasks", "t-2")}


def test_a_task_row_inserted_is_named(tasks: Path) -> None:
    sqlite_shell(
        tasks,
        "INSERT INTO tasks SELECT 't-forged', goal, instructions, success_criteria_json, "
        "required_capabilities_json, constraints_json, metadata_json, deadline, priority, "
        "max_attempts, attempt, status, claimed_by, lease_token_hash, lease_expires_at, "
        "result_json, result_digest, result_idempotency_key, verification_json, revision, "
        "created_at, updated_at, verification_mode, retry_base_seconds, retry_max_seconds, "
        "not_before, (SELECT max(seq) + 1 FROM tasks), awaiting_projection FROM tasks "
        "WHERE task_id = 't-2'",
    )
    assert mismatches(tasks) == {("tasks", "t-forged")}


def test_the_command_line_reports_it_and_exits_not_intact(
    tasks: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["--db", str(tasks), "verify"]) == 0
    capsys.readouterr()
    sqlite_shell(tasks, "UPDATE tasks SET revision = 1 WHERE task_id = 't-1'")
    before = dump(tasks)
    code = main(["--db", str(tasks), "verify"])
    captured = capsys.readouterr()
    assert code == EXIT_NOT_INTACT
    assert captured.err.startswith("LOG_NOT_INTACT")
    (finding,) = json.loads(captured.out)["findings"]
    assert (finding["code"], finding["table"], finding["key"]) == ("STATE_MISMATCH", "tasks", "t-1")
    assert dump(tasks) == before


def test_verify_export_holds_the_exported_state_against_the_seals(
    tasks: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    exported = tmp_path / "all.jsonl"
    assert main(["--db", str(tasks), "export", "--all", "--output", str(exported)]) == 0
    assert main(["verify-export", str(exported)]) == 0
    sqlite_shell(tasks, "UPDATE tasks SET result_json = '{\"x\":2}' WHERE task_id = 't-1'")
    tampered = tmp_path / "tampered.jsonl"
    assert main(["--db", str(tasks), "export", "--all", "--output", str(tampered)]) == 0
    capsys.readouterr()
    assert main(["verify-export", str(tampered)]) == EXIT_NOT_INTACT
    findings = json.loads(capsys.readouterr().out)["findings"]
    assert [(f["code"], f["key"]) for f in findings] == [("STATE_MISMATCH", "t-1")]
    # An export whose state line was edited to hide a deletion is found as well.
    lines = exported.read_text().splitlines()
    kept = [line for line in lines if '"key":"t-2","state":"tasks"' not in line]
    assert len(kept) == len(lines) - 1
    exported.write_text("\n".join(kept) + "\n")
    assert main(["verify-export", str(exported)]) == EXIT_NOT_INTACT


def auxiliary_ledger(path: Path) -> None:
    ev = evidence()
    spec = spec_for(ev, "fixture", "aux-1").with_capabilities(
        AuxiliaryCapabilityProfile.tool_free()
    )

    async def scenario() -> None:
        service = AuxiliaryRunService(FixtureExecutor({"decision": "ok"}), path=path)
        try:
            await (await service.spawn(spec, ev)).wait()
        finally:
            service.close()

    asyncio.run(scenario())


@pytest.mark.parametrize(
    "statement",
    [
        'UPDATE auxiliary_runs SET output_json = \'{"decision":"forged"}\'',
        "DELETE FROM auxiliary_runs",
        "INSERT INTO auxiliary_runs SELECT 'aux-forged', session_id, run_id, parent_json, kind, "
        "mode, state, spec_json, spec_digest, evidence_digest, owner, revision, created_at_ms, "
        "updated_at_ms, output_json, output_digest, error_code, error FROM auxiliary_runs",
    ],
    ids=["changed", "deleted", "inserted"],
)
def test_an_auxiliary_run_row_tampered_with_is_named(tmp_path: Path, statement: str) -> None:
    path = tmp_path / "ledger.db"
    auxiliary_ledger(path)
    assert report(path)["intact"] is True
    sqlite_shell(path, statement)
    expected = "aux-forged" if statement.startswith("INSERT") else "aux-1"
    assert mismatches(path) == {("auxiliary_runs", expected)}


@pytest.fixture
def projected(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The seed's legacy database, adopted (its history v1-sealed), then projected (v2)."""
    monkeypatch.setenv(AUTHORIZATION_ENV, OWNER)
    path = legacy_database(tmp_path / "ledger.db")
    InitialExecutionProjectionStore(path, resolver).project(TASK, projection_request())
    return path


def test_a_projected_task_is_proven_although_its_history_began_under_v1(projected: Path) -> None:
    found = report(projected)
    assert found["intact"] is True
    assert (found["rows_checked"], found["rows_unprovable"]) == (2, 0)


@pytest.mark.parametrize(
    "statement",
    [
        "UPDATE task_initial_execution_projections SET execution_digest = 'sha256:' || "
        "substr('0000000000000000000000000000000000000000000000000000000000000000', 1, 64)",
        "DELETE FROM task_initial_execution_projections",
    ],
    ids=["changed", "deleted"],
)
def test_a_projection_row_tampered_with_is_named(projected: Path, statement: str) -> None:
    sqlite_shell(projected, statement)
    assert mismatches(projected) == {("task_initial_execution_projections", "projection-legacy-1")}


def test_a_projection_row_inserted_is_named(projected: Path) -> None:
    """A recovery the owner never authorised, written beside the real projection."""
    sqlite_shell(
        projected,
        "INSERT INTO task_source_capture_projection_recoveries SELECT 'forged-recovery', task_id, "
        "job_id, request_sha256, execution_digest, response_json, created_at "
        "FROM task_initial_execution_projections",
    )
    assert mismatches(projected) == {
        ("task_source_capture_projection_recoveries", "forged-recovery")
    }


def test_rows_last_written_under_v1_seals_are_counted_not_called_tampered(tmp_path: Path) -> None:
    path = legacy_database(tmp_path / "ledger.db")
    with TaskLedger(path):
        pass
    found = report(path)
    assert found["intact"] is True
    assert found["rows_unprovable"] == 1


@pytest.mark.parametrize(
    "columns",
    [
        {"task_id": "t-1", "attempt": 3, "claimed_by": None, "goal": 'é \u2028 "q" \\ \n'},
        {"b": 2**70, "a": -1, "c": ""},
        {"x": 1.5},
        {"x": True},
    ],
)
def test_the_fast_row_digest_equals_the_checked_one(columns: dict[str, Any]) -> None:
    checked = digest_json(ROW_SCHEMA, {"table": "tasks", "key": "t-1", "columns": columns})
    assert row_digest("tasks", "t-1", columns) == checked


def test_a_row_holding_what_no_plan_writes_has_no_digest() -> None:
    assert row_digest("tasks", "t-1", {"goal": b"blob"}) is None
    assert row_digest("tasks", "t-1", {"goal": float("nan")}) is None
