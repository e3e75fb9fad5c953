"""The statement registry against the SQL texts: every statement a plan can name exists in each
dialect under its name, takes exactly its declared parameters, and, when guarded, has the one
compare-and-swap form; every named statement of `sql/` compiles against the baseline; and a
guarded write that changes no row is a REVISION_CONFLICT that leaves nothing behind."""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import apsw
import psycopg
import pytest
from aios_ledger.core import LedgerError, SqlWrite, Statement, StatementKind, WritePlan
from aios_ledger.shell import Database
from aios_ledger.shell.db.apply import apply_decision
from aios_ledger.shell.db.statements import (
    DIALECT_PACKAGES,
    statements,
)
from conftest import both_engines
from schema_support import schema_script

ROOT = Path(__file__).resolve().parents[1]
# Each engine's package of statement texts (a third dialect's joins the checks of all).
DIALECTS = tuple(DIALECT_PACKAGES)
# PostgreSQL's texts that PREPARE cannot take (transaction control, DDL, DO blocks); they run in
# every test that opens a ledger on PostgreSQL.
UNPREPARABLE = {
    "begin_read",
    "begin_read_committed",
    "commit",
    "rollback",
    "create_search_path_schema",
    "drop_search_path_schema",
    "listen_work",  # a DO block: tests/test_notify.py runs it
    "listen_events",  # a DO block: tests/test_fleet.py runs it
    "create_schema_migrations",
    # Scripts, on a 0.x ledger's schema: tests/test_upgrade.py runs them.
    "upgrade_open_log",
    "upgrade_close_log",
}
_PG_PARAMETER = re.compile(r"('(?:[^']|'')*')|(?<![:\w]):([a-z_][a-z0-9_]*)")
REGISTERED = list(Statement)
pytest_generate_tests = both_engines
GUARDED = [statement for statement in Statement if statement.guarded]
GUARDED_UPDATES = [s for s in Statement if s.kind is StatementKind.GUARDED_UPDATE]
GUARDED_DELETES = [s for s in Statement if s.kind is StatementKind.GUARDED_DELETE]


class _Placeholders(Mapping[str, None]):
    """Bindings that bind NULL to whatever a statement asks for, and remember what it asked."""

    def __init__(self) -> None:
        self.asked: set[str] = set()

    def __getitem__(self, name: str) -> None:
        self.asked.add(name)

    def __iter__(self) -> Iterator[str]:
        return iter(())

    def __len__(self) -> int:
        return 0


@pytest.fixture(scope="module")
def schema() -> Iterator[apsw.Connection]:
    """A fresh database built from the baseline alone."""
    conn = apsw.Connection(":memory:")
    conn.execute(schema_script())
    yield conn
    conn.close()


def compile_statement(conn: apsw.Connection, text: str) -> set[str]:
    """Compile `text` (as EXPLAIN, so nothing runs) and answer the parameters it binds."""
    bindings = _Placeholders()
    cursor = conn.cursor()
    cursor.execute(text, bindings, can_cache=False, explain=1)
    for _ in cursor:  # step through every statement of the text
        pass
    return bindings.asked


def _clause(text: str) -> tuple[str, list[str], list[str]]:
    """An UPDATE's table, its SET assignments and its WHERE conjuncts, whitespace normalised."""
    flat = " ".join(text.split())
    found = re.fullmatch(r"UPDATE (\w+) SET (.+) WHERE (.+);", flat)
    assert found is not None, f"not a single UPDATE: {flat}"
    table, assignments, where = found.groups()
    return table, [part.strip() for part in assignments.split(",")], where.split(" AND ")


@pytest.mark.parametrize("dialect", DIALECTS)
@pytest.mark.parametrize("statement", REGISTERED, ids=str)
def test_every_registered_statement_has_a_text_in_each_dialect(
    dialect: str, statement: Statement
) -> None:
    texts = statements(dialect)
    assert statement in texts, f"{dialect} has no statement {statement}"
    # Every statement a plan names is a plain write, run for its row count.
    assert texts[statement].operation == "!"


def pg_parameters(text: str) -> tuple[str, set[str]]:
    """PostgreSQL's text with `$n` for each distinct parameter, and the parameters' names."""
    order: dict[str, int] = {}

    def number(match: re.Match[str]) -> str:
        if match.group(1) is not None:
            return match.group(1)
        return f"${order.setdefault(match.group(2), len(order) + 1)}"

    return _PG_PARAMETER.sub(number, text), set(order)


def pg_prepare(conn: psycopg.Connection[Any], name: str) -> set[str]:
    """Prepare a PostgreSQL text (parsed and planned against the schema; nothing runs)."""
    text, asked = pg_parameters(statements("postgresql")[name].sql)
    conn.execute(f"PREPARE registry_check AS {text.rstrip(';')}".encode())
    conn.execute(b"DEALLOCATE registry_check")
    return asked


@pytest.mark.parametrize("statement", REGISTERED, ids=str)
def test_a_registered_statement_takes_exactly_its_declared_parameters_on_postgresql(
    pg_schema: psycopg.Connection[Any], statement: Statement
) -> None:
    assert pg_prepare(pg_schema, statement) == statement.parameters


@pytest.mark.parametrize("name", sorted(set(statements("postgresql")) - UNPREPARABLE))
def test_every_named_postgresql_statement_compiles_against_its_schema(
    pg_schema: psycopg.Connection[Any], name: str
) -> None:
    pg_prepare(pg_schema, name)


def test_postgresql_names_what_sqlite_names_for_the_stores() -> None:
    """Every statement the stores run exists in both dialects; SQLite's own (pragmas, the older
    runtime's, its catalogue, the savepoints of its group commit, which PostgreSQL does not run:
    its pool has concurrent writers, and a writer's BEGIN, which PostgreSQL's engine sends as
    begin_read_committed and its settings) and PostgreSQL's own (its schema and lock) are the
    difference."""
    sqlite_only = set(statements("sqlite")) - set(statements("postgresql"))
    group_commit = {"savepoint_work", "release_work", "rollback_to_work"}
    own = {"schema_objects", "begin_immediate", *group_commit}
    assert all(name.startswith(("pragma_", "legacy_")) or name in own for name in sqlite_only), (
        sorted(sqlite_only)
    )


@pytest.mark.parametrize("statement", REGISTERED, ids=str)
def test_a_registered_statement_takes_exactly_its_declared_parameters(
    schema: apsw.Connection, statement: Statement
) -> None:
    text = statements()[statement].sql
    assert compile_statement(schema, text) == statement.parameters


@pytest.mark.parametrize("dialect", DIALECTS)
@pytest.mark.parametrize("statement", GUARDED_UPDATES, ids=str)
def test_every_guarded_update_has_the_one_compare_and_swap_form(
    dialect: str, statement: Statement
) -> None:
    _, assignments, where = _clause(statements(dialect)[statement].sql)
    assert where == [f"{column} = :{parameter}" for column, parameter in statement.guard]
    revision = statement.revision_column
    assert f"{revision} = {revision} + 1" in assignments


@pytest.mark.parametrize("dialect", DIALECTS)
@pytest.mark.parametrize("statement", GUARDED_DELETES, ids=str)
def test_every_guarded_delete_has_the_one_guard(dialect: str, statement: Statement) -> None:
    flat = " ".join(statements(dialect)[statement].sql.split())
    found = re.fullmatch(r"DELETE FROM (\w+) WHERE (.+);", flat)
    assert found is not None, f"not a single DELETE: {flat}"
    guard = [f"{column} = :{parameter}" for column, parameter in statement.guard]
    assert found.group(2).split(" AND ") == guard


@pytest.mark.parametrize("dialect", DIALECTS)
@pytest.mark.parametrize("statement", REGISTERED, ids=str)
def test_a_plain_delete_removes_by_its_key_alone(dialect: str, statement: Statement) -> None:
    if statement.kind is StatementKind.DELETE:
        assert statements(dialect)[statement].sql.startswith("DELETE FROM ")
        assert statement.guard == () and statement.parameters == {"task_id"}


@pytest.mark.parametrize("dialect", DIALECTS)
@pytest.mark.parametrize("statement", REGISTERED, ids=str)
def test_a_plain_statement_is_an_insert(dialect: str, statement: Statement) -> None:
    if statement.kind is StatementKind.INSERT:
        assert statements(dialect)[statement].sql.startswith("INSERT INTO ")
        assert statement.guard == ()


# The adoption's copy reads the older runtime's tables, set aside under names no ledger has;
# upgrade's scripts change a 0.x ledger's schema (tests/test_upgrade.py runs them).
UPGRADE_SCRIPTS = {"upgrade_open_log", "upgrade_close_log"}


@pytest.mark.parametrize(
    "name", sorted(set(statements()) - {"legacy_adopt_copy", *UPGRADE_SCRIPTS})
)
def test_every_named_statement_compiles_against_the_schema(
    schema: apsw.Connection, name: str
) -> None:
    compile_statement(schema, statements()[name].sql)


def test_every_registered_statement_is_named_by_the_core() -> None:
    """No declaration outlives the decisions that named it."""
    source = "\n".join(
        path.read_text("utf-8")
        for path in (ROOT / "core").rglob("*.py")
        if path.name != "statements.py"
    )
    unused = [member.name for member in Statement if f"Statement.{member.name}" not in source]
    assert unused == []


def test_a_write_names_a_registered_statement_with_exactly_its_parameters() -> None:
    params = dict.fromkeys(Statement.INSERT_RUN.parameters, "x")
    assert SqlWrite(Statement.INSERT_RUN, params).params == params
    with pytest.raises(AttributeError, match="parameters"):
        SqlWrite("insert_run", params)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="takes"):
        SqlWrite(Statement.INSERT_RUN, {**params, "extra": 1})
    del params["prompt"]
    with pytest.raises(TypeError, match="takes"):
        SqlWrite(Statement.INSERT_RUN, params)


@pytest.mark.parametrize("statement", GUARDED, ids=str)
def test_a_guarded_write_that_changes_no_row_is_a_revision_conflict(
    ledger_target: Path, statement: Statement
) -> None:
    write = SqlWrite(statement, dict.fromkeys(statement.parameters))
    later = SqlWrite(
        Statement.INSERT_RUN,
        {"run_id": "r", "session_id": "s", "prompt": "p", "created_at": "2026-01-01T00:00:00Z"},
    )
    plan = WritePlan(writes=(write, later), events=(), response=None, tail=None)
    with Database(ledger_target) as db:
        with pytest.raises(LedgerError) as refused:
            db.write(lambda conn: apply_decision(conn, plan))
        assert refused.value.code == "REVISION_CONFLICT"
        assert db.write_schema(lambda conn: list(conn.execute("SELECT * FROM runs"))) == []
