"""Running named statements on an engine's connection, below the Database and the migrator so
that everything above can use them without an import cycle."""

from __future__ import annotations

from collections.abc import Generator, Sequence
from typing import Any, TypeVar

from aios_ledger.core import LedgerError
from aios_ledger.core.records import record_columns
from aios_ledger.core.statements import Statement
from aios_ledger.shell.db.engines import Connection, Params, Read, Row, SchemaConnection

__all__ = [
    "MATCHED_COLUMNS",
    "Connection",
    "Params",
    "Read",
    "Row",
    "SchemaConnection",
    "check_columns",
    "execute",
    "fetch_all",
    "fetch_one",
    "fetch_record",
    "fetch_record_lists_together",
    "fetch_records_together",
    "fetch_value",
    "revision_conflict",
    "stream_records",
]

R = TypeVar("R")


def fetch_all(conn: Connection, name: str, params: Params | None = None) -> list[Row]:
    return conn.fetch_all(name, params)


def fetch_one(conn: Connection, name: str, params: Params | None = None) -> Row | None:
    rows = conn.fetch_all(name, params)
    return rows[0] if rows else None


def fetch_record(conn: Connection, name: str, params: Params | None, record: type[R]) -> R | None:
    """The statement's first row as `record(*columns)`: the hot reads skip building a dict."""
    return conn.fetch_record(name, params, record)


def fetch_records_together(
    conn: Connection, reads: Sequence[Read], *, appending: int = 0
) -> list[Any]:
    """Each read's first row as its record, or None, read together."""
    return [rows[0] if rows else None for rows in conn.fetch_together(reads, appending=appending)]


def fetch_record_lists_together(
    conn: Connection, reads: Sequence[Read], *, appending: int = 0
) -> list[list[Any]]:
    return conn.fetch_together(reads, appending=appending)


def stream_records(
    conn: Connection, name: str, params: Params | None, record: type[R]
) -> Generator[R, None, None]:
    """Each row as `record(*columns)`, until the caller closes the generator."""
    return conn.stream_records(name, params, record)


def fetch_value(conn: Connection, name: str, params: Params | None = None) -> Any:
    return conn.fetch_record(name, params, None)


def execute(conn: Connection, name: str, params: Params | None = None) -> int:
    return conn.run_write(name, params)


# (statement, record) pairs whose columns were checked against the record's fields.
MATCHED_COLUMNS: set[tuple[str, type]] = set()


def check_columns(selected: tuple[str, ...], name: str, record: type) -> None:
    """A statement read into a record must select the record's fields, in field order."""
    if selected != record_columns(record):
        raise TypeError(f"{name} selects {selected}, not the fields of {record.__name__}")
    MATCHED_COLUMNS.add((name, record))


def revision_conflict(error: type[LedgerError], statement: Statement, changed: int) -> LedgerError:
    """A guarded write of a plan that changed `changed` rows, not one."""
    return error(
        "REVISION_CONFLICT",
        f"{statement} changed {changed} rows: the row moved on since it was read",
    )
