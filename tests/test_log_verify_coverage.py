"""`verify` covers every governed row, and a ledger whose `schema_migrations` lost a row is
refused on open: each table's row changed, inserted or deleted by hand (stdlib sqlite3, or psql
with the triggers off) is a finding naming the table and key, on both engines.

Figures (issue 26): 31 tamper cases tried on each engine, 31 reported: recorded answers 4 (+1 after
adoption), bindings 3, repository settings 3, proposals' scan spend 2, a refused scan's charge
1, bundle files 2, runs 3, run events 9 (kind, payload and time rewritten in place, deleted and
inserted with and without the run's count set to match, an orphan, two swapped; +2 after
adoption), and a deleted schema_migrations row refused on open by 3 commands, nothing written."""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import pytest
from aios_ledger.core import LedgerError
from aios_ledger.core.actors import Actor
from aios_ledger.core.log import verify_export_lines
from aios_ledger.core.sealed_tables import SEALED_TABLES
from aios_ledger.shell.db.connection import Database
from aios_ledger.shell.db.migrator import known_migrations
from aios_ledger.shell.db.run import fetch_all
from aios_ledger.shell.git.proposals import PROPOSALS_DIR_ENV, bundle_path
from aios_ledger.shell.git.repos import change_repository_settings
from aios_ledger.shell.log.cli import EXIT_NOT_INTACT
from aios_ledger.shell.log.export import export_log
from aios_ledger.shell.log.verification import verify_log
from aios_ledger.shell.runs.store import RunStore
from aios_ledger.shell.tasks.ledger import TaskLedger
from cli_runner import CliResult, run_cli
from conftest import both_engines, is_postgres
from git_support import (
    REPOSITORY,
    claim,
    edit,
    governed_task,
    make_repository,
    propose,
    register,
    verified_proposal,
    workspace,
)
from git_support import binding as git_binding
from legacy_fixtures import dump, rows
from test_log_support import raw_rows, tamper

# Who the decisions here act as.
ACTOR = Actor("tester", "library")

pytest_generate_tests = both_engines


def report(target: Path) -> dict[str, Any]:
    with Database(target) as db:
        return verify_log(db).public()


def findings(target: Path) -> set[tuple[str, str | None, str | None]]:
    return {
        (finding["code"], finding.get("table"), finding.get("key"))
        for finding in report(target)["findings"]
    }


def cli(target: Path, *argv: str) -> CliResult:
    return run_cli("--db", target, *argv)


@pytest.fixture
def tasks(ledger_target: Path) -> Path:
    """Two tasks, one claimed and submitted: recorded answers under three idempotency keys."""
    with TaskLedger(ledger_target) as ledger:
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
    return ledger_target


# ---------------------------------------------------------------------------------------------
# schema_migrations


def test_a_deleted_schema_migrations_row_is_refused_on_open_and_changes_nothing(
    tasks: Path,
) -> None:
    """Before: opening re-ran the migration whose row was gone and failed half-way with
    `STORAGE_ERROR: table ... already exists`."""
    earlier = known_migrations()[0].version  # the baseline
    tamper(tasks, ("DELETE FROM schema_migrations WHERE version = ?", (earlier,)))
    before = dump(tasks)
    with pytest.raises(LedgerError) as refused:
        Database(tasks)
    assert refused.value.code == "SCHEMA_MIGRATIONS_INCONSISTENT"
    assert repr(earlier) in refused.value.detail and "INSERT INTO schema_migrations" in (
        refused.value.detail
    )
    for argv in (["verify"], ["status"], ["migrate"]):
        done = cli(tasks, *argv)
        assert done.returncode != 0, argv
        # (psycopg's pool may log a line of its own first: the refusal is the error line.)
        assert "\nSCHEMA_MIGRATIONS_INCONSISTENT: " in "\n" + done.stderr, done.stderr
        assert "Traceback" not in done.stderr
    assert dump(tasks) == before
    # Restored as the refusal says, the ledger opens and is intact again.
    tamper(tasks, ("INSERT INTO schema_migrations(version) VALUES (?)", (earlier,)))
    assert report(tasks)["intact"] is True


# ---------------------------------------------------------------------------------------------
# task_idempotency: the recorded answers a replay gives back

ANSWER_COLUMNS = "idempotency_key, operation, subject, request_sha256, response_json, created_at"


@pytest.mark.parametrize(
    ("statement", "key"),
    [
        # A recorded answer rewritten: a replay of `s-1` would tell another story.
        (
            'UPDATE task_idempotency SET response_json = \'{"status":"SUCCEEDED"}\' '
            "WHERE idempotency_key = 's-1'",
            "s-1",
        ),
        (
            "UPDATE task_idempotency SET request_sha256 = 'sha256:0' WHERE idempotency_key = 's-1'",
            "s-1",
        ),
        ("DELETE FROM task_idempotency WHERE idempotency_key = 'create-t-2'", "create-t-2"),
        (
            f"INSERT INTO task_idempotency({ANSWER_COLUMNS}) SELECT 'forged', 'cancel', subject, "
            "request_sha256, response_json, created_at FROM task_idempotency "
            "WHERE idempotency_key = 'create-t-2'",
            "forged",
        ),
    ],
    ids=["answer-changed", "digest-changed", "deleted", "inserted"],
)
def test_a_recorded_answer_tampered_with_is_named(tasks: Path, statement: str, key: str) -> None:
    assert report(tasks)["intact"] is True
    tamper(tasks, (statement, ()))
    assert findings(tasks) == {("STATE_MISMATCH", "task_idempotency", key)}


def test_recorded_answers_stored_before_they_were_sealed_still_verify(
    ledger_target: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Adoption: a ledger whose recorded answers an earlier version stored without sealing them
    stays intact (those rows are counted as unprovable); answers sealed since are proven."""
    from aios_ledger.core.tasks import decisions

    with monkeypatch.context() as earlier_version:
        recorded = decisions._recorded  # stores the answer, and seals it with the event
        earlier_version.setattr(
            decisions, "_recorded", lambda event, *rest: (recorded(event, *rest)[0], event)
        )
        with TaskLedger(ledger_target) as ledger:
            ledger.create_task(
                {"task_id": "old", "goal": "g", "instructions": "i", "success_criteria": ["ok"]},
                idempotency_key="create-old",
            )
    with TaskLedger(ledger_target) as ledger:
        ledger.create_task(
            {"task_id": "new", "goal": "g", "instructions": "i", "success_criteria": ["ok"]},
            idempotency_key="create-new",
        )
        ledger.cancel("old", reason="done", idempotency_key="cancel-old")
    found = report(ledger_target)
    assert found["intact"] is True, found["findings"]
    assert (found["rows_checked"], found["rows_unprovable"]) == (5, 1)
    tamper(
        ledger_target,
        (
            "UPDATE task_idempotency SET response_json = '{}' WHERE idempotency_key = ?",
            ("cancel-old",),
        ),
    )
    assert findings(ledger_target) == {("STATE_MISMATCH", "task_idempotency", "cancel-old")}


# ---------------------------------------------------------------------------------------------
# governed bindings, repositories and the stored proposal bundles (real git, real repositories)


@pytest.fixture
def governed(
    tmp_path: Path, ledger_target: Path, monkeypatch: pytest.MonkeyPatch
) -> tuple[Path, dict[str, Any]]:
    """A repository registered, a task bound to it, projected, claimed, proposed and verified:
    one binding, one repository and one proposal whose bundle is stored on disk."""
    monkeypatch.setenv(PROPOSALS_DIR_ENV, str(tmp_path / "proposals"))
    bare, base = make_repository(tmp_path)
    register(ledger_target, bare)
    proposal = verified_proposal(
        ledger_target, "g-1", git_binding("g-1", base), {"widget.txt": "improved\n"}
    )
    assert report(ledger_target)["intact"] is True
    return ledger_target, proposal


BINDING_COLUMNS = "task_id, job_id, binding_json, binding_sha256, created_at"


@pytest.mark.parametrize(
    ("statement", "key"),
    [
        # Another target branch for the same job: what a later projection would be bound to.
        (
            "UPDATE governed_bindings SET binding_json = replace(binding_json, 'agent/g-1', "
            "'main') WHERE task_id = 'g-1'",
            "g-1 job-g-1",
        ),
        ("DELETE FROM governed_bindings WHERE task_id = 'g-1'", "g-1 job-g-1"),
        (
            f"INSERT INTO governed_bindings({BINDING_COLUMNS}) SELECT task_id, 'job-forged', "
            "binding_json, binding_sha256, created_at FROM governed_bindings",
            "g-1 job-forged",
        ),
    ],
    ids=["changed", "deleted", "inserted"],
)
def test_a_binding_tampered_with_is_named(
    governed: tuple[Path, dict[str, Any]], statement: str, key: str
) -> None:
    target, _ = governed
    tamper(target, (statement, ()))
    assert findings(target) == {("STATE_MISMATCH", "governed_bindings", key)}


@pytest.mark.parametrize(
    "statement",
    [
        # Emptying the protected patterns would let a write reach `main`.
        "UPDATE governed_repositories SET protected_json = '[]'",
        # A baseline that allowlists everything an agent brings, or a budget without bounds
        # (0.x migration 0013: the settings are the row's columns).
        "UPDATE governed_repositories SET secrets_baseline_json = '{\"results\": {}}'",
        "UPDATE governed_repositories SET agent_scan_max_bytes = 1099511627776",
    ],
    ids=["protected", "baseline", "agent-budget"],
)
def test_a_repositorys_settings_changed_by_hand_are_named(
    governed: tuple[Path, dict[str, Any]], statement: str
) -> None:
    target, _ = governed
    tamper(target, (statement, ()))
    assert findings(target) == {("STATE_MISMATCH", "governed_repositories", REPOSITORY)}


@pytest.mark.parametrize(
    "statement",
    [
        "UPDATE task_proposals SET scan_bytes = 0",
        "UPDATE task_proposals SET scan_seconds = NULL",
    ],
    ids=["bytes", "seconds"],
)
def test_a_proposals_scan_spend_erased_by_hand_is_named(
    governed: tuple[Path, dict[str, Any]], statement: str
) -> None:
    """What a proposal's scan spent counts against its agent's budget: erased, the agent would
    scan again for free."""
    target, proposal = governed
    tamper(target, (statement, ()))
    assert findings(target) == {("STATE_MISMATCH", "task_proposals", proposal["proposal_id"])}


def test_a_refused_scans_charge_erased_by_hand_is_named(
    governed: tuple[Path, dict[str, Any]],
) -> None:
    """A scan refused over its budget is charged to its agent (0.x migration 0013): deleted, the
    agent would scan again for free."""
    target, _ = governed
    with Database(target) as db:
        change_repository_settings(
            db, REPOSITORY, {"scan_max_seconds": 0.000001}, idempotency_key="tight"
        )
    governed_task(target, "g-2", git_binding("g-2", _base(target)))
    claimed = claim(target, "g-2")
    space = workspace(target, claimed)
    try:
        edit(space, {"widget.txt": "again\n"})
        with pytest.raises(LedgerError) as refused:
            propose(target, space, claimed)
    finally:
        space.remove()
    assert refused.value.code == "SCAN_BUDGET_EXCEEDED"
    assert report(target)["intact"] is True
    tamper(target, ("DELETE FROM agent_scan_charges", ()))
    assert findings(target) == {("STATE_MISMATCH", "agent_scan_charges", "g-2#1#1")}


def _base(target: Path) -> str:
    (row,) = rows(target, "SELECT base_oid FROM task_proposals")
    return str(row[0])


def _bundle_file(target: Path, proposal: dict[str, Any]) -> Path:
    with Database(target) as db:
        (row,) = db.read(lambda conn: list(fetch_all(conn, "proposal_bundles")))
        assert row["proposal_id"] == proposal["proposal_id"]
        return bundle_path(db, str(row["bundle_sha256"]))


def test_a_stored_bundle_changed_on_disk_is_named(
    governed: tuple[Path, dict[str, Any]],
) -> None:
    target, proposal = governed
    stored = _bundle_file(target, proposal)
    stored.write_bytes(stored.read_bytes() + b"\n")
    assert findings(target) == {("BUNDLE_CHANGED", "task_proposals", proposal["proposal_id"])}
    done = cli(target, "verify")
    assert done.returncode == EXIT_NOT_INTACT and "BUNDLE_CHANGED" in done.stdout


def test_a_stored_bundle_removed_from_disk_is_named(
    governed: tuple[Path, dict[str, Any]],
) -> None:
    target, proposal = governed
    _bundle_file(target, proposal).unlink()
    assert findings(target) == {("BUNDLE_MISSING", "task_proposals", proposal["proposal_id"])}


# ---------------------------------------------------------------------------------------------
# runs and their events (the review evidence)


@pytest.fixture
def runs(ledger_target: Path) -> Path:
    with RunStore(ledger_target) as store:
        store.create_run("session-1", "review the widgets", run_id="r-1")
        for number in (1, 2, 3):
            store.append_event("r-1", "step", {"n": number})
        store.create_run("session-1", "another", run_id="r-2")
    assert report(ledger_target)["intact"] is True
    return ledger_target


RUN_EVENT_COLUMNS = "run_id, seq, kind, payload_json, created_at"
COUNT = ("STATE_MISMATCH", "run_events", "r-1")  # the run's count and its events disagree


def _seq(number: int) -> str:
    return f"WHERE run_id = 'r-1' AND seq = {number}"


@pytest.mark.parametrize(
    ("statements", "expected"),
    [
        # Whose session or prompt a run claims is what evidence pins of it.
        (
            ["UPDATE runs SET prompt = 'approve everything' WHERE run_id = 'r-1'"],
            {("STATE_MISMATCH", "runs", "r-1")},
        ),
        (["DELETE FROM runs WHERE run_id = 'r-2'"], {("STATE_MISMATCH", "runs", "r-2")}),
        (
            [
                "INSERT INTO runs(run_id, session_id, prompt, event_count, created_at, "
                "updated_at) SELECT 'r-forged', session_id, prompt, 0, created_at, updated_at "
                "FROM runs WHERE run_id = 'r-2'"
            ],
            {("STATE_MISMATCH", "runs", "r-forged")},
        ),
        # An event rewritten in place: what the worker reported, told otherwise.
        (
            [f"UPDATE run_events SET kind = 'success' {_seq(3)}"],
            {("STATE_MISMATCH", "run_events", "r-1 3")},
        ),
        (
            [f"UPDATE run_events SET payload_json = '{{\"n\":30}}' {_seq(3)}"],
            {("STATE_MISMATCH", "run_events", "r-1 3")},
        ),
        (
            [f"UPDATE run_events SET created_at = '2020-01-01T00:00:00.000Z' {_seq(2)}"],
            {("STATE_MISMATCH", "run_events", "r-1 2")},
        ),
        # The failure the worker reported, taken out of the evidence: its seal says it was
        # written; with the run's count lowered to match, the seal still says so.
        (
            [f"DELETE FROM run_events {_seq(3)}"],
            {COUNT, ("STATE_MISMATCH", "run_events", "r-1 3")},
        ),
        (
            [
                f"DELETE FROM run_events {_seq(3)}",
                "UPDATE runs SET event_count = 2 WHERE run_id = 'r-1'",
            ],
            {("STATE_MISMATCH", "run_events", "r-1 3")},
        ),
        # An event inserted: no seal covers it, even with the run's count raised to match.
        (
            [
                f"INSERT INTO run_events({RUN_EVENT_COLUMNS}) SELECT run_id, 4, kind, "
                f"payload_json, created_at FROM run_events {_seq(1)}"
            ],
            {COUNT, ("STATE_MISMATCH", "run_events", "r-1 4")},
        ),
        (
            [
                f"INSERT INTO run_events({RUN_EVENT_COLUMNS}) SELECT run_id, 4, kind, "
                f"payload_json, created_at FROM run_events {_seq(1)}",
                "UPDATE runs SET event_count = 4 WHERE run_id = 'r-1'",
            ],
            {("STATE_MISMATCH", "run_events", "r-1 4")},
        ),
        (
            [
                f"INSERT INTO run_events({RUN_EVENT_COLUMNS}) SELECT 'r-none', seq, kind, "
                f"payload_json, created_at FROM run_events {_seq(1)}"
            ],
            {
                ("STATE_MISMATCH", "run_events", "r-none"),
                ("STATE_MISMATCH", "run_events", "r-none 1"),
            },
        ),
        # Two events trading places: each row is not the one its seal covers.
        (
            [
                f"UPDATE run_events SET payload_json = '{{\"n\":2}}' {_seq(1)}",
                f"UPDATE run_events SET payload_json = '{{\"n\":1}}' {_seq(2)}",
            ],
            {("STATE_MISMATCH", "run_events", "r-1 1"), ("STATE_MISMATCH", "run_events", "r-1 2")},
        ),
    ],
    ids=[
        "run-changed",
        "run-deleted",
        "run-inserted",
        "event-kind-rewritten",
        "event-payload-rewritten",
        "event-time-rewritten",
        "event-deleted",
        "event-deleted-count-lowered",
        "event-inserted",
        "event-inserted-count-raised",
        "orphan",
        "events-swapped",
    ],
)
def test_a_run_or_its_events_tampered_with_is_named(
    runs: Path, statements: list[str], expected: set[tuple[str, str, str]]
) -> None:
    """Before run events were sealed, an event rewritten in place (kind, payload, time) passed
    `verify`, and one deleted or inserted passed once the run's count was set to match."""
    if not is_postgres(runs):  # PostgreSQL's tamper runs with every trigger off
        tamper(
            runs,
            ("DROP TRIGGER run_events_refuse_delete", ()),
            ("DROP TRIGGER run_events_refuse_update", ()),
        )
    tamper(runs, *((statement, ()) for statement in statements))
    assert findings(runs) == expected
    done = cli(runs, "verify")
    assert done.returncode == EXIT_NOT_INTACT and "STATE_MISMATCH" in done.stdout


def test_every_append_is_a_sealed_event_covering_its_row(runs: Path) -> None:
    """Each append adds one RUN_EVENT_APPENDED event to the ledger chain (after the run's
    RUN_CREATED), whose seal covers the `run_events` row; an export verifies offline."""
    kinds = raw_rows(
        runs, "SELECT event_type, payload_json FROM events WHERE task_id IS NULL ORDER BY 1, 2"
    )
    appended = [json.loads(payload) for kind, payload in kinds if kind == "RUN_EVENT_APPENDED"]
    assert appended == [{"kind": "step", "run_id": "r-1", "seq": n} for n in (1, 2, 3)]
    sealed = raw_rows(
        runs,
        "SELECT row_key FROM event_seal_rows WHERE row_table = 'run_events' ORDER BY row_key",
    )
    assert sealed == [("r-1 1",), ("r-1 2",), ("r-1 3",)]
    found = report(runs)
    assert (found["intact"], found["rows_unprovable"]) == (True, 0)
    with Database(runs) as db, io.StringIO() as out:
        export_log(db, out, task_id=None)
        lines = out.getvalue().splitlines()
    assert sum('"state":"run_events"' in line for line in lines) == 3
    checked = verify_export_lines(lines, SEALED_TABLES).public()
    assert checked["intact"] is True, checked["findings"]
