"""The schema step on open: migrate=True brings a database forward, migrate=False (and the CLI's
`--no-migrate` / AIOS_LEDGER_MIGRATE=0) leaves the schema to the DBA and refuses a database that
is behind, without writing to it; the migrator's explicit API."""

from __future__ import annotations

import asyncio
import json
import sqlite3
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from aios_ledger.core import LedgerError
from aios_ledger.shell import (
    AuxiliaryRunService,
    Database,
    InitialExecutionProjectionStore,
    RegisteredBindingResolver,
    RunStore,
    TaskLedger,
    migrate_database,
    migration_status,
)
from aios_ledger.shell.cli import main
from aios_ledger.shell.db.migrator import (
    NOTHING_APPLIED,
    apply_migrations,
    known_migrations,
    migration_plan,
)
from legacy_fixtures import captured_database, rows

KNOWN = [migration.version for migration in known_migrations()]
LATEST = KNOWN[-1]


def behind_database(path: Path, missing: int = 1) -> Path:
    """A ledger as a DBA left it with the `sqlite3` shell: every migration but the last ones."""
    con = sqlite3.connect(path)
    con.execute("CREATE TABLE schema_migrations (version varchar(128) primary key)")
    for migration in known_migrations()[:-missing]:
        con.executescript(migration.up)
        con.execute("INSERT INTO schema_migrations(version) VALUES (?)", (migration.version,))
    con.commit()
    con.close()
    return path


def files_of(folder: Path) -> dict[str, bytes]:
    return {entry.name: entry.read_bytes() for entry in sorted(folder.iterdir())}


def refusal(open_it: Callable[[], object]) -> LedgerError:
    with pytest.raises(LedgerError) as raised:
        opened = open_it()
        close = getattr(opened, "close", None)
        if close is not None:
            close()
    return raised.value


class _NoExecutor:
    async def execute(self, context: Any) -> Any:
        raise AssertionError("never run")


def _no_resolver(*args: object) -> Any:
    raise AssertionError("never called")


def _aux_service(path: Path) -> AuxiliaryRunService:
    async def opened() -> AuxiliaryRunService:
        return AuxiliaryRunService(_NoExecutor(), path, migrate=False)

    return asyncio.run(opened())


STORES: dict[str, Callable[[Path], object]] = {
    "Database": lambda path: Database(path, migrate=False),
    "TaskLedger": lambda path: TaskLedger(path, migrate=False),
    "RunStore": lambda path: RunStore(path, migrate=False),
    "AuxiliaryRunService": _aux_service,
    "RegisteredBindingResolver": lambda path: RegisteredBindingResolver(path, migrate=False),
    "InitialExecutionProjectionStore": lambda path: InitialExecutionProjectionStore(
        path, _no_resolver, migrate=False
    ),
}


@pytest.mark.parametrize("store", sorted(STORES))
def test_migrate_false_refuses_a_database_that_is_behind_and_writes_nothing(
    tmp_path: Path, store: str
) -> None:
    path = behind_database(tmp_path / "ledger.db")
    before = files_of(tmp_path)
    refused = refusal(lambda: STORES[store](path))
    assert refused.code == "SCHEMA_TOO_OLD"
    assert str(KNOWN[:-1]) in refused.detail and str(KNOWN) in refused.detail
    assert files_of(tmp_path) == before


def test_migrate_true_brings_the_same_database_forward(tmp_path: Path) -> None:
    path = behind_database(tmp_path / "ledger.db", missing=2)
    with TaskLedger(path) as ledger:
        ledger.create_task({"goal": "g", "instructions": "i"}, idempotency_key="k")
    assert [row[0] for row in rows(path, "SELECT version FROM schema_migrations")] == KNOWN
    with TaskLedger(path, migrate=False) as ledger:
        assert [task["goal"] for task in ledger.list_tasks()] == ["g"]


def test_migrate_false_opens_a_current_database_and_writes_to_it(tmp_path: Path) -> None:
    path = tmp_path / "ledger.db"
    Database(path).close()
    with TaskLedger(path, migrate=False) as ledger:
        created = ledger.create_task({"goal": "g", "instructions": "i"}, idempotency_key="k")
        assert ledger.get(created["task_id"])["status"] == "QUEUED"


@pytest.mark.parametrize(
    "make, expected",
    [
        (lambda path: path.write_bytes(b""), "not a ledger yet"),
        (captured_database, "older runtime"),
        (lambda path: None, "does not exist"),
    ],
    ids=["empty file", "older runtime's database", "no file"],
)
def test_migrate_false_refuses_what_is_not_a_ledger_yet(
    tmp_path: Path, make: Callable[[Path], object], expected: str
) -> None:
    path = tmp_path / "ledger.db"
    make(path)
    before = files_of(tmp_path)
    refused = refusal(lambda: Database(path, migrate=False))
    assert refused.code == "SCHEMA_TOO_OLD" and expected in refused.detail
    assert "aios-ledger migrate" in refused.detail
    assert files_of(tmp_path) == before


def test_migrate_false_refuses_an_in_memory_database() -> None:
    assert refusal(lambda: Database(None, migrate=False)).code == "SCHEMA_TOO_OLD"


@pytest.mark.parametrize("migrate", [True, False])
def test_a_newer_database_is_refused_either_way_without_a_write(
    tmp_path: Path, migrate: bool
) -> None:
    path = tmp_path / "newer.db"
    Database(path).close()
    with sqlite3.connect(path) as con:
        con.execute("INSERT INTO schema_migrations(version) VALUES ('9999')")
    con.close()
    before = files_of(tmp_path)
    assert refusal(lambda: Database(path, migrate=migrate)).code == "SCHEMA_TOO_NEW"
    assert files_of(tmp_path) == before


def test_a_foreign_database_is_refused_before_its_journal_mode_is_touched(tmp_path: Path) -> None:
    path = tmp_path / "foreign.db"
    with sqlite3.connect(path) as con:
        con.execute("CREATE TABLE something_else(x)")
    con.close()
    before = files_of(tmp_path)
    assert refusal(lambda: Database(path)).code == "SCHEMA_UNRECOGNIZED"
    assert files_of(tmp_path) == before


def test_the_explicit_migrator_reports_pending_then_applies_them(tmp_path: Path) -> None:
    path = behind_database(tmp_path / "ledger.db")
    with Database.as_found(path) as db:
        assert [m.version for m in db.read(migration_plan).pending] == [LATEST]
        status = migration_status(db)
        assert status["applied"] == KNOWN[:-1] and status["pending"] == [LATEST]
        report = db.write_schema(apply_migrations)
        assert report.applied == (LATEST,) and not report.adopted_legacy
        assert db.read(migration_plan).pending == ()
        assert db.write_schema(apply_migrations) == NOTHING_APPLIED
        assert migrate_database(db) == NOTHING_APPLIED
    Database(path, migrate=False).close()


def cli(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, Any, str]:
    code = main(list(argv))
    captured = capsys.readouterr()
    return code, json.loads(captured.out) if captured.out.strip() else None, captured.err


COMMANDS = [["task", "list"], ["events", "t1"], ["aux", "list"], ["status", "--json"], ["head"]]


@pytest.mark.parametrize("command", COMMANDS, ids=" ".join)
@pytest.mark.parametrize("setting", ["--no-migrate", "AIOS_LEDGER_MIGRATE=0"])
def test_cli_without_migration_refuses_a_database_that_is_behind(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    command: list[str],
    setting: str,
) -> None:
    path = behind_database(tmp_path / "ledger.db")
    before = files_of(tmp_path)
    options = ["--no-migrate"] if setting == "--no-migrate" else []
    if not options:
        monkeypatch.setenv("AIOS_LEDGER_MIGRATE", "0")
    code, _, err = cli(capsys, "--db", str(path), *options, *command)
    assert (code, err.split(":")[0]) == (1, "SCHEMA_TOO_OLD")
    assert files_of(tmp_path) == before


def test_cli_migrates_on_open_by_default(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = behind_database(tmp_path / "ledger.db")
    code, listed, _ = cli(capsys, "--db", str(path), "task", "list")
    assert (code, listed) == (0, [])
    assert [row[0] for row in rows(path, "SELECT version FROM schema_migrations")] == KNOWN


def test_cli_migrate_still_migrates_under_no_migrate(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = str(behind_database(tmp_path / "ledger.db"))
    code, status, _ = cli(capsys, "--db", db, "--no-migrate", "migrate", "--status")
    assert (code, status["pending"]) == (0, [LATEST])
    code, report, _ = cli(capsys, "--db", db, "--no-migrate", "migrate")
    assert (code, report["applied"]) == (0, [LATEST])
    code, listed, _ = cli(capsys, "--db", db, "--no-migrate", "task", "list")
    assert (code, listed) == (0, [])


def test_cli_refuses_an_unclear_migrate_setting(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AIOS_LEDGER_MIGRATE", "no")
    path = tmp_path / "ledger.db"
    code, _, err = cli(capsys, "--db", str(path), "task", "list")
    assert (code, err.split(":")[0]) == (2, "USAGE_INVALID")
    assert not path.exists()
