"""One SQL source for both engines (`shell/db/statements.py`): a statement both dialects share
is written once in `sql/*.sql`, a dialect's folder holds only what differs or is its alone
(listed here, so a new one is a choice); the task columns are written once (a fragment held to
`TaskRow`); every read that declares `-- returns: RECORD` selects that record's fields, checked
by preparing it on each engine's schema."""

from __future__ import annotations

import re
import sqlite3
from pathlib import Path
from typing import Any

import psycopg
import pytest
from aios_ledger.core.records import record_columns
from aios_ledger.core.tasks.records import TaskRow
from aios_ledger.shell.db.engines.postgresql import TEXTS
from aios_ledger.shell.db.read_records import READ_RECORDS
from aios_ledger.shell.db.statements import (
    DIALECTS,
    combine_statements,
    dialect_specific,
    parse_source,
    rendered_source,
    statements,
)

ROOT = Path(__file__).resolve().parents[1]
_PARAMETER = re.compile(r"('(?:[^']|'')*')|(?<![:\w]):([a-z_][a-z0-9_]*)")

# The statements whose text differs between the engines: written in both dialect folders.
DIFFERING = frozenset(
    [
        "upgrade_close_log",
        "upgrade_open_log",
        "auxiliary_run_events",
        "begin_read",
        "checkpoint_signer_lock",
        "copy_event_id_counter",
        "create_schema_migrations",
        "get_task_for_update",
        "list_tables",
        "log_id_counter",
        "log_next_event_id",
        "merkle_tree_for_update",
        "state_task_chain_seals",
        "table_columns",
        "tasks_claim_candidates",
        "tasks_expired_leases",
        "tasks_next_seq",
        # A task list's page of an agent's claims (SQLite keeps their loop order with a CROSS
        # JOIN), and the last holders of a page's ids, a JSON array read as rows.
        "tasks_page_of_agent",
        "task_last_holders",
    ]
)
# SQLite's alone: pragmas, the older runtime's tables, its catalogue, group commit's savepoints,
# and its BEGIN of a writer (PostgreSQL's engine sends begin_read_committed and its settings).
SQLITE_ALONE = frozenset(
    [
        "begin_immediate",
        "legacy_adopt_copy",
        "legacy_adopt_set_aside",
        "legacy_create_tables",
        "legacy_insert_event",
        "legacy_insert_task",
        "pragma_foreign_keys_on",
        "pragma_integrity_check",
        "pragma_journal_size_limit_full",
        "pragma_journal_size_limit_normal",
        "pragma_journal_wal",
        "pragma_synchronous_full",
        "pragma_synchronous_normal",
        "pragma_wal_autocheckpoint",
        "release_work",
        "rollback_to_work",
        "savepoint_work",
        "schema_objects",
    ]
)
# PostgreSQL's alone: its schema, locks, id sequences, the copy's counter, its LISTEN/NOTIFY and
# the integrator's bound on settled ids.
POSTGRESQL_ALONE = frozenset(
    [
        "merkle_integration_bound",
        "begin_read_committed",
        "copy_set_event_id_counter",
        "copy_target_rows",
        "create_search_path_schema",
        "drop_search_path_schema",
        "listen_events",
        "listen_work",
        "log_event_ids_used",
        "log_reserve_event_ids",
        "notify",
        "writer_settings_exclusive",
        "writer_settings_shared",
    ]
)


def test_each_dialect_defines_only_the_listed_statements() -> None:
    assert dialect_specific("sqlite") == DIFFERING | SQLITE_ALONE
    assert dialect_specific("postgresql") == DIFFERING | POSTGRESQL_ALONE


def test_a_differing_text_does_differ() -> None:
    """A text both dialects write alike belongs in the shared file."""
    sqlite, postgresql = statements("sqlite"), statements("postgresql")
    alike = [
        name
        for name in DIFFERING
        if " ".join(sqlite[name].sql.split()) == " ".join(postgresql[name].sql.split())
        and sqlite[name].operation == postgresql[name].operation
    ]
    assert alike == []


def test_most_statements_are_written_once() -> None:
    shared = set(statements("sqlite")) & set(statements("postgresql"))
    assert len(shared - DIFFERING) > 2 * len(DIFFERING)


def test_the_task_columns_are_the_fields_of_task_row() -> None:
    fragment = rendered_source("sqlite").fragments["task_columns"]
    columns = tuple(part.strip() for part in fragment.split(","))
    assert columns == record_columns(TaskRow)


def test_the_task_columns_are_written_once() -> None:
    """Once, in the catalogue of tables; no statement file spells them. (The older runtime's 22
    columns, in `sqlite/legacy_runtime.sql`, are another table's.)"""
    spelled = re.compile(r"updated_at,\s+verification_mode,\s+retry_base_seconds")
    found = [
        path.relative_to(ROOT).as_posix()
        for path in sorted(ROOT.glob("sql/**/*.sql"))
        if "migrations" not in path.parts
        for _ in spelled.finditer(path.read_text())
    ]
    assert found == []


def _sources(*files: tuple[str, str]) -> list[tuple[str, Any]]:
    return [(name, parse_source(name, text)) for name, text in files]


def test_a_name_in_the_shared_texts_and_a_dialect_is_refused() -> None:
    shared = _sources(("a.sql", "-- name: one^\nSELECT 1;\n"))
    own = _sources(("a.sql", "-- name: one^\nSELECT 2;\n"))
    with pytest.raises(ValueError, match="write a text once"):
        combine_statements(shared, own, "sqlite")


def test_fragments_are_put_in_once_at_load() -> None:
    shared = _sources(
        ("a.sql", "-- fragment: cols\na, b\n\n-- name: one\nSELECT {{cols}} FROM t;\n")
    )
    own = _sources(("b.sql", "-- name: two\nSELECT {{cols}} FROM u;\n"))
    loaded = combine_statements(shared, own, "sqlite")
    assert loaded["one"].sql == "SELECT a, b FROM t;"
    assert loaded["two"].sql == "SELECT a, b FROM u;"
    with pytest.raises(ValueError, match="unknown fragment"):
        combine_statements(_sources(("a.sql", "-- name: one\nSELECT {{nope}};\n")), [], "sqlite")


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("-- name: w!\n-- returns: TaskRow\nDELETE FROM t;\n", "only a read returns rows"),
        ("-- name: r^\n-- returns: NoSuchRow\nSELECT 1;\n", "no row record of the core"),
        ("-- name: r^\n-- returns: TaskRow\n-- returns: TaskRow\nSELECT 1;\n", "twice"),
    ],
)
def test_a_bad_returns_declaration_is_refused_at_load(text: str, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        combine_statements(_sources(("a.sql", text)), [], "sqlite")


def _declared(dialect: str) -> list[str]:
    return sorted(name for name, s in statements(dialect).items() if s.returns is not None)


def test_both_dialects_declare_the_same_reads() -> None:
    assert _declared("sqlite") == _declared("postgresql")
    assert {statements("sqlite")[n].returns for n in _declared("sqlite")} == set(READ_RECORDS)


@pytest.mark.parametrize("name", _declared("sqlite"))
def test_a_declared_read_selects_its_records_fields_on_sqlite(
    sqlite_schema: sqlite3.Connection, name: str
) -> None:
    statement = statements("sqlite")[name]
    asked = {match.group(2) for match in _PARAMETER.finditer(statement.sql) if match.group(2)}
    cursor = sqlite_schema.execute(statement.sql, dict.fromkeys(asked, 0))  # LIMIT takes no NULL
    selected = tuple(column[0] for column in cursor.description)
    assert selected == record_columns(READ_RECORDS[statement.returns or ""])


@pytest.mark.parametrize("name", _declared("postgresql"))
def test_a_declared_read_selects_its_records_fields_on_postgresql(
    pg_schema: psycopg.Connection[Any], name: str
) -> None:
    statement = statements("postgresql")[name]
    asked = {match.group(2) for match in _PARAMETER.finditer(statement.sql) if match.group(2)}
    cursor = pg_schema.execute(TEXTS[name].encode(), dict.fromkeys(asked))
    selected = tuple(column.name for column in cursor.description or ())
    assert selected == record_columns(READ_RECORDS[statement.returns or ""])


def test_every_dialect_is_loadable() -> None:
    for dialect in DIALECTS:
        assert statements(dialect)
    with pytest.raises(ValueError, match="no SQL dialect"):
        statements("oracle")
