"""`verify` covers every governed row, and a ledger whose `schema_migrations` lost a row is
refused on open: each table's row changed, inserted or deleted by hand (stdlib sqlite3, or psql
with the triggers off) is a finding naming the table and key, on both engines."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from aios_ledger.core import LedgerError
from aios_ledger.shell import Database, TaskLedger, verify_log
from aios_ledger.shell.db.migrator import known_migrations
from conftest import both_engines
from legacy_fixtures import dump
from test_log_support import tamper

pytest_generate_tests = both_engines


def report(target: Path) -> dict[str, Any]:
    with Database(target) as db:
        return verify_log(db).public()


def findings(target: Path) -> set[tuple[str, str | None, str | None]]:
    return {
        (finding["code"], finding.get("table"), finding.get("key"))
        for finding in report(target)["findings"]
    }


def cli(target: Path, *argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "aios_ledger.shell.cli", "--db", str(target), *argv],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


@pytest.fixture
def tasks(ledger_target: Path) -> Path:
    """Two tasks, one claimed and submitted: first answers under three idempotency keys."""
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
    earlier = known_migrations()[-2].version
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
# task_idempotency: the first answers a replay gives back

ANSWER_COLUMNS = "idempotency_key, operation, subject, request_sha256, response_json, created_at"


@pytest.mark.parametrize(
    ("statement", "key"),
    [
        # A first answer rewritten: a replay of `s-1` would tell another story.
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
def test_a_first_answer_tampered_with_is_named(tasks: Path, statement: str, key: str) -> None:
    assert report(tasks)["intact"] is True
    tamper(tasks, (statement, ()))
    assert findings(tasks) == {("STATE_MISMATCH", "task_idempotency", key)}


def test_first_answers_stored_before_they_were_sealed_still_verify(
    ledger_target: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Adoption: a ledger whose first answers an earlier version stored without sealing them
    stays intact (those rows are counted as unprovable); answers sealed since are proven."""
    from aios_ledger.core.tasks import decisions

    with monkeypatch.context() as earlier_version:
        earlier_version.setattr(decisions, "_answered", lambda event, first: event)
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
