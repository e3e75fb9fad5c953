"""The catalogue of tables (`core.sealed_tables`) and the statements rendered from it
(`shell/db/table_statements.py`, the shapes of `sql/table_shapes.sql`): its columns and keys are
each engine's migrated schema's, a sealed table's digested fields are among its columns, what
it renders loads beside the hand-written statements under names of its own, and no statement
text goes by two names."""

from __future__ import annotations

import re
import sqlite3
from typing import Any

import psycopg
import pytest
from aios_ledger.core.log.tables import SealedTable
from aios_ledger.core.records import record_columns
from aios_ledger.core.sealed_tables import BY_NAME, SEALED_TABLES, TABLES
from aios_ledger.shell.db.statements import (
    DIALECTS,
    SqlSource,
    combine_statements,
    parse_source,
    rendered_source,
    statements,
    table_shapes,
)
from aios_ledger.shell.db.table_statements import fill, parse_shapes

# On SQLite a read that locks its row is the plain read (the write transaction locks the file):
# the one pair of names whose texts are alike, in that dialect alone.
LOCKING_READS = {
    "sqlite": [["get_task", "get_task_for_update"], ["merkle_tree", "merkle_tree_for_update"]]
}


def _spacing_aside(text: str) -> str:
    """A text with its spacing made one: runs of white space, and none inside parentheses."""
    flat = " ".join(text.split())
    return re.sub(r"\(\s+", "(", re.sub(r"\s+\)", ")", flat))


def _catalogued() -> dict[str, tuple[tuple[str, ...], tuple[str, ...]]]:
    return {table.name: (table.columns, table.key_columns) for table in TABLES}


def test_the_catalogue_matches_the_sqlite_schema(sqlite_schema: sqlite3.Connection) -> None:
    found = {}
    for name in BY_NAME:
        info = sqlite_schema.execute(f"PRAGMA table_info({name})").fetchall()
        key = tuple(row[1] for row in sorted(info, key=lambda row: row[5]) if row[5])
        found[name] = (tuple(row[1] for row in info), key)
    assert found == _catalogued()


def test_the_catalogue_matches_the_postgresql_schema(pg_schema: psycopg.Connection[Any]) -> None:
    found = {}
    for name in BY_NAME:
        columns = pg_schema.execute(
            b"SELECT column_name FROM information_schema.columns"
            b" WHERE table_schema = current_schema() AND table_name = %s"
            b" ORDER BY ordinal_position",
            (name,),
        ).fetchall()
        key = pg_schema.execute(
            b"SELECT a.attname FROM pg_index AS i"
            b" JOIN pg_attribute AS a ON a.attrelid = i.indrelid AND a.attnum = ANY(i.indkey)"
            b" WHERE i.indrelid = %s::regclass AND i.indisprimary"
            b" ORDER BY array_position(i.indkey, a.attnum)",
            (name,),
        ).fetchall()
        found[name] = (tuple(row[0] for row in columns), tuple(row[0] for row in key))
    assert found == _catalogued()


def test_a_sealed_tables_digested_fields_are_its_columns() -> None:
    for table in SEALED_TABLES.values():
        assert set(record_columns(table.record)) <= set(table.columns), table.name
        assert set(table.key_columns) <= set(table.columns), table.name


@pytest.mark.parametrize("dialect", DIALECTS)
def test_every_table_renders_its_reads_and_its_insert(dialect: str) -> None:
    loaded = statements(dialect)
    for table in TABLES:
        assert loaded[f"all_{table.name}"].operation == ""
        assert loaded[table.insert_name].sql.startswith(f"INSERT INTO {table.name}(")
        if not isinstance(table, SealedTable):
            continue
        assert f"FROM {table.name} AS stored" in loaded[f"state_rows_{table.name}"].sql
        if table.of_task is not None:
            of_task = table_shapes(dialect)[table.of_task]
            assert f"WHERE {of_task}" in loaded[f"archive_rows_{table.name}"].sql
        if table.delete is not None:
            assert loaded[table.delete].sql.startswith(f"DELETE FROM {table.name} WHERE")
    for text in (statement.sql for statement in loaded.values()):
        assert "{{" not in text


@pytest.mark.parametrize("dialect", DIALECTS)
def test_no_statement_text_goes_by_two_names(dialect: str) -> None:
    names: dict[str, list[str]] = {}
    for name, statement in statements(dialect).items():
        names.setdefault(_spacing_aside(statement.sql), []).append(name)
    alike = sorted(sorted(group) for group in names.values() if len(group) > 1)
    assert alike == LOCKING_READS.get(dialect, [])


def test_a_hand_written_statement_under_a_rendered_name_is_refused() -> None:
    shared = [("tokens.sql", parse_source("tokens.sql", "-- name: all_api_tokens\nSELECT 1;\n"))]
    rendered = rendered_source("sqlite").statements["all_api_tokens"]
    catalogue = SqlSource(statements={"all_api_tokens": rendered}, fragments={})
    with pytest.raises(ValueError, match="the catalogue of tables"):
        combine_statements(shared, [], "sqlite", catalogue)


def test_a_shape_fills_its_slots_and_wraps_a_list_under_its_slot() -> None:
    parsed = parse_shapes("a.sql", "-- shape: one\n-- why\nSELECT {{columns}}\nFROM {{table}};\n")
    columns = [f"column_{number:02}" for number in range(10)]
    text = fill(parsed["one"], {"columns": columns, "table": "t"})
    assert text.splitlines()[1] == "       column_08, column_09"
    assert text.endswith("\nFROM t;")
    with pytest.raises(ValueError, match=r"slot \{\{table\}\} is not given"):
        fill(parsed["one"], {"columns": columns})
    with pytest.raises(ValueError, match="shape one is defined twice"):
        parse_shapes("a.sql", "-- shape: one\nx\n-- shape: one\ny\n")
