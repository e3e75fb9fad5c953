"""Running named statements on a connection: the helpers with which the stores, the log and
the migrator read and write, inside a transaction of `connection.Database`.

They sit below the Database and the migrator (which the Database runs on open, and which seals
adopted events through the log), so that everything above can use them without an import
cycle; `connection` re-exports them with the Database. A `Connection` is either engine's: an
apsw connection (SQLite) or a `PgConnection` (PostgreSQL, `pg`), which carries its dialect; the
helpers look the statement's text up in that dialect, under the same name.
"""

from __future__ import annotations

from collections.abc import Generator, Mapping, Sequence
from typing import Any, TypeAlias, TypeVar

import apsw
import psycopg
from aios_ledger.core import LedgerError
from aios_ledger.core.records import record_columns
from aios_ledger.shell.db.pg import PgConnection
from aios_ledger.shell.db.statements import statement_texts

R = TypeVar("R")
Row = dict[str, Any]
Params = Mapping[str, Any]
Connection: TypeAlias = apsw.Connection | PgConnection

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


def _pg_columns(cursor: psycopg.Cursor[Any]) -> list[str] | None:
    description = cursor.description
    return None if description is None else [column.name for column in description]


def fetch_all(conn: Connection, name: str, params: Params | None = None) -> list[Row]:
    if isinstance(conn, PgConnection):
        found = conn.run(name, params)
        names = _pg_columns(found)
        return [] if names is None else [dict(zip(names, row, strict=True)) for row in found]
    cursor = run_statement(conn, name, params)
    try:
        columns = [column[0] for column in cursor.get_description()]
    except apsw.ExecutionCompleteError:
        return []
    return [dict(zip(columns, row, strict=True)) for row in cursor]


def fetch_one(conn: Connection, name: str, params: Params | None = None) -> Row | None:
    rows = fetch_all(conn, name, params)
    return rows[0] if rows else None


def fetch_record(conn: Connection, name: str, params: Params | None, record: type[R]) -> R | None:
    """The statement's first row as `record(*columns)` (see `stream_records`): the hot reads (a
    task, a first answer) skip building a dict. Read straight off the cursor, not through
    `stream_records`: the generator and its closing were a tenth of a transition's Python
    calls. Leaving the function drops the cursor, which resets the statement."""
    if isinstance(conn, PgConnection):
        return next(stream_records(conn, name, params, record), None)
    cursor = run_statement(conn, name, params)
    for row in cursor:
        if (name, record) not in _MATCHED_COLUMNS:
            _match_columns(cursor, name, record)
        return record(*row)
    return None


def fetch_records_together(
    conn: Connection, reads: Sequence[tuple[str, Params | None, type[Any]]]
) -> list[Any]:
    """Each read's first row as its record (see `fetch_record`), or None: on PostgreSQL the
    reads a decision needs go in one pipeline, one round trip (`PgConnection.run_together`)."""
    if not isinstance(conn, PgConnection):
        return [fetch_record(conn, name, params, record) for name, params, record in reads]
    found = []
    cursors = conn.run_together([(name, params) for name, params, _ in reads])
    for (name, _, record), cursor in zip(reads, cursors, strict=True):
        row = cursor.fetchone() if cursor.description is not None else None
        if row is not None and (name, record) not in _MATCHED_COLUMNS:
            _check_columns(tuple(_pg_columns(cursor) or ()), name, record)
        found.append(None if row is None else record(*row))
    return found


def stream_records(
    conn: Connection, name: str, params: Params | None, record: type[R]
) -> Generator[R, None, None]:
    """Each row as `record(*columns)`, one at a time; the caller closes the generator (or lets
    it finish) to finish the statement. The statement must select the record's fields in field
    order, which is checked on its first row in each process."""
    if isinstance(conn, PgConnection):
        found = conn.run(name, params)
        for row in found:
            if (name, record) not in _MATCHED_COLUMNS:
                _check_columns(tuple(_pg_columns(found) or ()), name, record)
            yield record(*row)
        return
    cursor = run_statement(conn, name, params)
    for row in cursor:
        if (name, record) not in _MATCHED_COLUMNS:
            _match_columns(cursor, name, record)
        yield record(*row)


_MATCHED_COLUMNS: set[tuple[str, type]] = set()


def _match_columns(cursor: apsw.Cursor, name: str, record: type) -> None:
    _check_columns(tuple(column[0] for column in cursor.get_description()), name, record)


def _check_columns(selected: tuple[str, ...], name: str, record: type) -> None:
    if selected != record_columns(record):
        raise TypeError(f"{name} selects {selected}, not the fields of {record.__name__}")
    _MATCHED_COLUMNS.add((name, record))


def fetch_value(conn: Connection, name: str, params: Params | None = None) -> Any:
    if isinstance(conn, PgConnection):
        found = conn.run(name, params)
        first = found.fetchone() if found.description is not None else None
        return None if first is None else first[0]
    for row in run_statement(conn, name, params):
        return row[0]
    return None


def execute(conn: Connection, name: str, params: Params | None = None) -> int:
    """Run a write and return how many rows it changed."""
    if isinstance(conn, PgConnection):
        return max(conn.run(name, params).rowcount, 0)
    run_statement(conn, name, params)
    return conn.changes()
