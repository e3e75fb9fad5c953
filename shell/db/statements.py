"""Named SQL statements: loaded once from the `aios_ledger.sql` package, and run by name.

The grammar is aiosql's: a block starts with `-- name: NAME` followed by an optional operation
suffix (`!` write, `<!` write returning, `^` one row, `$` one value, none: many rows). SQL is never
assembled in Python; callers name a statement and pass parameters (`execute`, `fetch_*`), inside
a transaction of `connection.Database`.

The runners live here, below the connection, because the migrator (which the Database runs on
open) seals adopted events through the log, and the log runs statements: with the runners in
the connection module, that would be an import cycle.
"""

from __future__ import annotations

import re
from collections.abc import Generator, Mapping
from functools import cache
from importlib import resources
from typing import Any, TypeVar

import apsw
import attrs
from aios_ledger.core import LedgerError, record_columns

R = TypeVar("R")
Row = dict[str, Any]
Params = Mapping[str, Any]

_NAME_LINE = re.compile(r"^--\s*name:\s*([a-z_][a-z0-9_]*)([!^$<*#]*)\s*$")


@attrs.frozen
class Statement:
    name: str
    operation: str
    sql: str


def parse_statements(source: str, content: str) -> dict[str, Statement]:
    found: dict[str, Statement] = {}
    name: str | None = None
    operation = ""
    body: list[str] = []

    def close() -> None:
        if name is None:
            return
        sql = "\n".join(line for line in body if not line.lstrip().startswith("--")).strip()
        if not sql:
            raise ValueError(f"{source}: statement {name} is empty")
        found[name] = Statement(name=name, operation=operation, sql=sql)

    for line in content.splitlines():
        match = _NAME_LINE.match(line)
        if match:
            close()
            name, operation, body = match.group(1), match.group(2), []
            if name in found:
                raise ValueError(f"{source}: statement {name} is defined twice")
        elif name is not None:
            body.append(line)
    close()
    return found


@cache
def statements() -> Mapping[str, Statement]:
    loaded: dict[str, Statement] = {}
    package = resources.files("aios_ledger.sql")
    for entry in sorted(package.iterdir(), key=lambda item: item.name):
        if not entry.name.endswith(".sql") or not entry.is_file():
            continue
        for name, statement in parse_statements(entry.name, entry.read_text("utf-8")).items():
            if name in loaded:
                raise ValueError(f"statement {name} is defined in two files")
            loaded[name] = statement
    return loaded


@cache
def statement_texts() -> Mapping[str, str]:
    """Name -> SQL text, for the write path, which looks a text up for every statement."""
    return {name: statement.sql for name, statement in statements().items()}


def sql(name: str) -> str:
    return statement_texts()[name]


@cache
def migration_files() -> tuple[tuple[str, str], ...]:
    package = resources.files("aios_ledger.sql.migrations")
    return tuple(
        (entry.name, entry.read_text("utf-8"))
        for entry in sorted(package.iterdir(), key=lambda item: item.name)
        if entry.name.endswith(".sql") and entry.is_file()
    )


_TEXTS = statement_texts()


def run_statement(conn: apsw.Connection, name: str, params: Params | None = None) -> apsw.Cursor:
    """Execute a named statement. Parameters SQLite cannot take (text that is not UTF-8, a list,
    an integer over 64 bits) are refused here, at the one place where parameters meet SQLite,
    as a LedgerError: the stores validate first, this is the last line."""
    try:
        return conn.execute(_TEXTS[name], params)
    except UnicodeEncodeError:
        raise LedgerError("TEXT_INVALID", f"{name}: a parameter is not valid UTF-8 text") from None
    except (TypeError, OverflowError) as exc:  # a value SQLite cannot bind (a list, 2**64)
        raise LedgerError("PARAMETER_INVALID", f"{name}: {exc}") from None


def fetch_all(conn: apsw.Connection, name: str, params: Params | None = None) -> list[Row]:
    cursor = run_statement(conn, name, params)
    try:
        columns = [column[0] for column in cursor.get_description()]
    except apsw.ExecutionCompleteError:
        return []
    return [dict(zip(columns, row, strict=True)) for row in cursor]


def fetch_one(conn: apsw.Connection, name: str, params: Params | None = None) -> Row | None:
    rows = fetch_all(conn, name, params)
    return rows[0] if rows else None


def fetch_record(
    conn: apsw.Connection, name: str, params: Params | None, record: type[R]
) -> R | None:
    """The statement's first row as `record(*columns)` (see `stream_records`): the hot reads (a
    task, a first answer) skip building a dict. Read straight off the cursor, not through
    `stream_records`: the generator and its closing were a tenth of a transition's Python
    calls. Leaving the function drops the cursor, which resets the statement."""
    cursor = run_statement(conn, name, params)
    for row in cursor:
        if (name, record) not in _MATCHED_COLUMNS:
            _match_columns(cursor, name, record)
        return record(*row)
    return None


def stream_records(
    conn: apsw.Connection, name: str, params: Params | None, record: type[R]
) -> Generator[R, None, None]:
    """Each row as `record(*columns)`, one at a time; the caller closes the generator (or lets
    it finish) to finish the statement. The statement must select the record's fields in field
    order, which is checked on its first row in each process."""
    cursor = run_statement(conn, name, params)
    for row in cursor:
        if (name, record) not in _MATCHED_COLUMNS:
            _match_columns(cursor, name, record)
        yield record(*row)


_MATCHED_COLUMNS: set[tuple[str, type]] = set()


def _match_columns(cursor: apsw.Cursor, name: str, record: type) -> None:
    selected = tuple(column[0] for column in cursor.get_description())
    if selected != record_columns(record):
        raise TypeError(f"{name} selects {selected}, not the fields of {record.__name__}")
    _MATCHED_COLUMNS.add((name, record))


def fetch_value(conn: apsw.Connection, name: str, params: Params | None = None) -> Any:
    for row in run_statement(conn, name, params):
        return row[0]
    return None


def execute(conn: apsw.Connection, name: str, params: Params | None = None) -> int:
    """Run a write and return how many rows it changed."""
    run_statement(conn, name, params)
    return conn.changes()
