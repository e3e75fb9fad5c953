"""One migration numbering for both engines: every number exists on SQLite and on PostgreSQL
under the same name, an explicit no-op where one engine needs nothing; and a ledger written
before the numbering was shared (without those no-ops recorded) migrates and still verifies."""

from __future__ import annotations

from pathlib import Path

import pytest
from aios_ledger.core import LedgerError
from aios_ledger.core.migrations import NO_OP_MARKER
from aios_ledger.shell import Database, TaskLedger, migration_status, verify_log
from aios_ledger.shell.db.engines import engine_names
from aios_ledger.shell.db.migrator import known_migrations
from conftest import both_engines
from test_log_support import raw_rows, tamper

pytest_generate_tests = both_engines

ENGINES = engine_names()


def test_every_number_exists_on_every_engine_under_one_name() -> None:
    numbered = [[(m.version, m.name) for m in known_migrations(engine)] for engine in ENGINES]
    assert len(numbered) > 1
    assert all(each == numbered[0] for each in numbered)


def test_a_no_op_says_so_and_changes_nothing() -> None:
    no_ops = [m for engine in ENGINES for m in known_migrations(engine) if m.is_no_op]
    assert no_ops, "the engines' histories differ: some number is a no-op on one of them"
    for migration in no_ops:
        assert migration.up.startswith(NO_OP_MARKER)
        statements = [
            line for line in migration.up.splitlines() if line and not line.startswith("--")
        ]
        assert statements == ["SELECT 1;"], migration
        assert migration.down == "SELECT 1;", migration


def test_no_number_is_a_no_op_on_both_engines() -> None:
    """A number that changes nothing anywhere is not a migration."""
    by_engine = {
        engine: {m.version: m.is_no_op for m in known_migrations(engine)} for engine in ENGINES
    }
    assert not [
        v for v, no_op in by_engine["sqlite"].items() if no_op and by_engine["postgresql"][v]
    ]


@pytest.fixture
def before_shared_numbering(engine: str, ledger_target: Path) -> tuple[Path, list[str]]:
    """A ledger as a release before the shared numbering left it: tasks and events written,
    and the no-ops of its engine not in `schema_migrations`."""
    with TaskLedger(ledger_target) as ledger:
        ledger.create_task(
            {"task_id": "t-1", "goal": "g", "instructions": "i"}, idempotency_key="c"
        )
        claimed = ledger.claim(agent_id="a", capabilities=[], lease_seconds=60, task_id="t-1")
        assert claimed is not None
    no_ops = [m.version for m in known_migrations(engine) if m.is_no_op]
    tamper(
        ledger_target,
        *(("DELETE FROM schema_migrations WHERE version = ?", (version,)) for version in no_ops),
    )
    return ledger_target, no_ops


def test_a_ledger_from_before_the_shared_numbering_migrates_and_verifies(
    before_shared_numbering: tuple[Path, list[str]],
) -> None:
    target, no_ops = before_shared_numbering
    with pytest.raises(LedgerError) as behind:
        Database(target, migrate=False)
    assert behind.value.code == "SCHEMA_TOO_OLD"
    with Database(target) as db:  # migrates: the no-ops are recorded, nothing refused
        assert migration_status(db)["pending"] == []
        assert verify_log(db).intact
    applied = [str(row[0]) for row in raw_rows(target, "SELECT version FROM schema_migrations")]
    assert set(no_ops) <= set(applied)
    Database(target, migrate=False).close()


def test_a_deleted_row_of_a_real_migration_is_still_refused(
    before_shared_numbering: tuple[Path, list[str]], engine: str
) -> None:
    """The no-op exemption is narrow: a schema-changing migration's row, deleted, is refused
    on open as before (SCHEMA_MIGRATIONS_INCONSISTENT)."""
    target, _ = before_shared_numbering
    real = [m.version for m in known_migrations(engine)[:-1] if not m.is_no_op][-1]
    tamper(target, ("DELETE FROM schema_migrations WHERE version = ?", (real,)))
    with pytest.raises(LedgerError) as refused:
        Database(target)
    assert refused.value.code == "SCHEMA_MIGRATIONS_INCONSISTENT"
    assert repr(real) in refused.value.detail
