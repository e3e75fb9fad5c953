"""Migrations: fresh databases, adoption of the older runtime's, refusals, and DBA tools."""

from __future__ import annotations

import json
import re
import shutil
import sqlite3
import subprocess
from pathlib import Path

import pytest
from aios_ledger.core import LedgerError
from aios_ledger.shell import Database, TaskLedger, migration_status
from aios_ledger.shell.db.migrator import known_migrations
from aios_ledger.shell.db.schema_dump import schema_sql
from conftest import postgres_url
from legacy_fixtures import REWORK_TRAIL, captured_database, dump, rows

ROOT = Path(__file__).resolve().parents[1]
LATEST = known_migrations()[-1].version


# The older runtime's events as it wrote them; once adopted, each also names no actor.
LEGACY_EVENT_COLUMNS = (
    "SELECT event_id, task_id, agent_id, event_type, payload_json, created_at FROM events "
    "ORDER BY event_id"
)


def _statements(text: str) -> set[str]:
    """A schema's text as its statements (blank-line separated), comments left out."""
    blocks = (block.strip() for block in re.split(r"\n\s*\n", text))
    return {block for block in blocks if block and not block.startswith("--")}


def _holds_the_baseline(dumped: str, dialect: str) -> None:
    """What a fresh ledger's schema dump shows is the baseline's text, statement for statement:
    beside it only dbmate's `schema_migrations`, and the baseline's one row, which no dump shows."""
    baseline = _statements(known_migrations(dialect)[0].up)
    found = _statements(dumped)
    assert all("schema_migrations" in extra for extra in found - baseline), found - baseline
    assert all(missing.startswith("INSERT INTO ") for missing in baseline - found), baseline - found


def test_the_sqlite_baseline_is_the_schema_of_a_fresh_ledger() -> None:
    _holds_the_baseline(schema_sql(), "sqlite")


def test_the_postgresql_baseline_is_the_schema_of_a_fresh_ledger(
    postgres_database: str | None,
) -> None:
    _holds_the_baseline(schema_sql(postgres_url(postgres_database)), "postgresql")


def test_fresh_database_is_migrated_once(tmp_path: Path) -> None:
    path = tmp_path / "fresh.db"
    Database(path).close()
    first = dump(path)
    Database(path).close()
    assert dump(path) == first
    versions = [row[0] for row in rows(path, "SELECT version FROM schema_migrations")]
    assert versions == [migration.version for migration in known_migrations()]
    assert rows(path, "PRAGMA journal_mode") == [("wal",)]


def test_older_runtime_database_is_adopted_in_place(tmp_path: Path) -> None:
    path = captured_database(tmp_path / "legacy.db")
    tasks_before = rows(path, "SELECT * FROM tasks")
    events_before = rows(path, LEGACY_EVENT_COLUMNS)
    with Database(path) as db:
        status = migration_status(db)
    assert status["pending"] == []
    # The older runtime's columns keep their values, whole-second times respelled to the
    # millisecond (0008); day two's columns follow them, at the defaults that keep each task's
    # behaviour (a reviewer judges it, nothing is scheduled), then the creation sequence, then
    # no hold for a projection (0027: the older runtime created no governed task).
    adopted = rows(path, "SELECT * FROM tasks ORDER BY seq")
    legacy_width = len(tasks_before[0])
    assert [row[:legacy_width] for row in adopted] == [
        tuple(_to_milliseconds(value) for value in row) for row in tasks_before
    ]
    assert [row[legacy_width:] for row in adopted] == [
        ("reviewer", 10, 3600, None, seq, 0) for seq in range(1, len(adopted) + 1)
    ]
    # The sealed events keep their texts as written.
    assert rows(path, LEGACY_EVENT_COLUMNS) == events_before
    assert rows(path, "SELECT count(*) FROM events WHERE actor IS NOT NULL") == [(0,)]
    seals = rows(
        path, "SELECT event_id, chain_seq, sealed_at_adoption FROM event_seals ORDER BY event_id"
    )
    assert seals == [(index, index, 1) for index in range(1, len(REWORK_TRAIL) + 1)]


def _to_milliseconds(value: object) -> object:
    """A whole-second timestamp text as 0.x migration 0008 respells it; any other value itself."""
    if isinstance(value, str) and re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", value):
        return value[:-1] + ".000Z"
    return value


def test_events_are_append_only(tmp_path: Path) -> None:
    path = captured_database(tmp_path / "legacy.db")
    Database(path).close()
    con = sqlite3.connect(path)
    for statement in ("UPDATE events SET payload_json = '{}'", "DELETE FROM events"):
        with pytest.raises(sqlite3.DatabaseError, match="EVENTS_APPEND_ONLY"):
            con.execute(statement)
    con.close()


def test_newer_schema_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "newer.db"
    Database(path).close()
    with sqlite3.connect(path) as con:
        con.execute("INSERT INTO schema_migrations(version) VALUES ('9999')")
    con.close()
    before = dump(path)
    with pytest.raises(LedgerError, match="SCHEMA_TOO_NEW"):
        Database(path)
    assert dump(path) == before


@pytest.mark.parametrize(
    "ddl",
    [
        "CREATE TABLE something_else(x)",
        "CREATE TABLE tasks(task_id TEXT); CREATE TABLE events(event_id INTEGER)",
    ],
)
def test_foreign_database_is_not_written(tmp_path: Path, ddl: str) -> None:
    path = tmp_path / "foreign.db"
    with sqlite3.connect(path) as con:
        con.executescript(ddl)
    con.close()
    before = dump(path)
    with pytest.raises(LedgerError, match="SCHEMA_UNRECOGNIZED"):
        Database(path)
    assert dump(path) == before


def test_directory_and_garbage_files_are_refused(tmp_path: Path) -> None:
    with pytest.raises(LedgerError, match="DATABASE_PATH_INVALID"):
        Database(tmp_path)
    garbage = tmp_path / "garbage.db"
    garbage.write_bytes(b"this is not a database" * 100)
    with pytest.raises(LedgerError, match="DATABASE_CORRUPT"):
        Database(garbage)
    assert garbage.read_bytes() == b"this is not a database" * 100


def test_stdlib_sqlite_of_this_machine_reads_the_schema(tmp_path: Path) -> None:
    """The file is shared with programs on an older SQLite: every object must load there."""
    path = tmp_path / "ledger.db"
    Database(path).close()
    with sqlite3.connect(path) as con:
        names = [row[0] for row in con.execute("SELECT name FROM sqlite_master")]
        assert con.execute("PRAGMA integrity_check").fetchone() == ("ok",)
    con.close()
    assert "events_refuse_update" in names


@pytest.mark.skipif(shutil.which("sqlite3") is None, reason="no sqlite3 shell on this machine")
def test_sqlite3_shell_opens_a_ledger_and_integrity_passes(tmp_path: Path) -> None:
    path = captured_database(tmp_path / "legacy.db")
    Database(path).close()
    answer = subprocess.run(
        ["sqlite3", str(path), "PRAGMA integrity_check; SELECT COUNT(*) FROM event_seals;"],
        capture_output=True,
        text=True,
        check=True,
    )
    assert answer.stdout.split() == ["ok", str(len(REWORK_TRAIL))]


def dbmate_binary() -> str | None:
    found = shutil.which("dbmate")
    if found:
        return found
    candidate = Path(__file__).resolve().parents[1] / ".venv" / "bin" / "dbmate"
    return str(candidate) if candidate.exists() else None


def dbmate_on(path: Path) -> list[str]:
    dbmate = dbmate_binary()
    assert dbmate is not None
    return [
        dbmate,
        "--url",
        f"sqlite:{path}",
        "--migrations-dir",
        str(ROOT / "sql/migrations"),
        "--no-dump-schema",
    ]


needs_dbmate = pytest.mark.skipif(
    dbmate_binary() is None, reason="dbmate is installed by the test extras"
)


@needs_dbmate
def test_dbmate_applies_and_rolls_back_the_migrations(tmp_path: Path) -> None:
    path = tmp_path / "dba.db"
    base = dbmate_on(path)
    subprocess.run([*base, "up"], check=True, capture_output=True)
    with Database(path) as db:
        assert migration_status(db)["pending"] == []
    ours = tmp_path / "ours.db"
    Database(ours).close()
    assert schema_of(path) == schema_of(ours)
    for _ in known_migrations():
        subprocess.run([*base, "rollback"], check=True, capture_output=True)
    assert rows(path, "SELECT version FROM schema_migrations") == []
    assert (
        rows(
            path,
            "SELECT name FROM sqlite_master WHERE name NOT LIKE 'sqlite_%' "
            "AND name != 'schema_migrations'",
        )
        == []
    )
    status = subprocess.run([*base, "status"], capture_output=True, text=True)
    assert "Pending: " + str(len(known_migrations())) in status.stdout
    with Database(path) as db:
        assert migration_status(db)["pending"] == []
    subprocess.run([*base, "status", "--exit-code"], check=True, capture_output=True)


@needs_dbmate
def test_a_dba_who_rolls_back_gets_schema_too_old_without_migration(tmp_path: Path) -> None:
    """The DBA flow with `migrate=False`: after `dbmate up` the library opens the database;
    after a rollback of the last migration it refuses it, unchanged, until migrated again."""
    path = tmp_path / "dba.db"
    base = dbmate_on(path)
    subprocess.run([*base, "up"], check=True, capture_output=True)
    Database(path, migrate=False).close()
    subprocess.run([*base, "rollback"], check=True, capture_output=True)
    before = path.read_bytes()
    with pytest.raises(LedgerError, match="SCHEMA_TOO_OLD") as refused:
        Database(path, migrate=False)
    assert f"{[LATEST]} pending" in refused.value.detail
    assert path.read_bytes() == before
    with Database(path) as db:
        assert migration_status(db)["pending"] == []
    subprocess.run([*base, "status", "--exit-code"], check=True, capture_output=True)
    Database(path, migrate=False).close()


@needs_dbmate
def test_a_rollback_never_drops_a_ledger_that_holds_events(tmp_path: Path) -> None:
    """Going back from the baseline would drop every table: refused once an event is written,
    the file unchanged."""
    path = tmp_path / "dba.db"
    base = dbmate_on(path)
    subprocess.run([*base, "up"], check=True, capture_output=True)
    with TaskLedger(path, migrate=False) as ledger:
        ledger.create_task({"goal": "g", "instructions": "i"}, idempotency_key="c")
    before = path.read_bytes()
    refused = subprocess.run([*base, "rollback"], capture_output=True, text=True)
    assert refused.returncode != 0
    assert "ledger_holds_events_and_cannot_go_back" in refused.stdout + refused.stderr
    assert path.read_bytes() == before
    with TaskLedger(path, migrate=False) as ledger:
        assert len(ledger.list_tasks()) == 1


def schema_of(path: Path) -> list[tuple[str, str]]:
    return [
        (name, " ".join(sql.split()))
        for name, sql in rows(
            path,
            "SELECT name, sql FROM sqlite_master WHERE sql IS NOT NULL "
            "AND name NOT LIKE 'sqlite_%' ORDER BY name",
        )
    ]


def test_migrate_status_in_json(tmp_path: Path) -> None:
    with Database(tmp_path / "x.db") as db:
        status = migration_status(db)
    assert json.loads(json.dumps(status))["applied"][-1] == LATEST
