"""The current state rows as the verifier holds them against their seals: a stored row digested
over the same columns, by name, that its decision digested when it wrote it.
"""

from __future__ import annotations

from collections.abc import Mapping
from itertools import combinations
from typing import Any

from aios_ledger.core.log.rows import LATER_COLUMNS, LATER_NULL_COLUMNS, row_digest
from aios_ledger.core.log.tables import SealedTable, SealedTables
from aios_ledger.core.records import record_columns


def stored_row_state(
    table: SealedTable, row: Mapping[str, Any], sealed_digest: str | None = None
) -> tuple[str, str | None]:
    """The key and digest of a stored row of `table` (None: it holds what no plan writes): over
    every column, or, when that matches `sealed_digest`, without later columns that still hold
    the value their migration gave."""
    key = str(row[table.key])
    row = table.with_later_defaults(row)
    columns = {name: row[name] for name in record_columns(table.record)}
    digest = row_digest(table.name, key, columns)
    later = (LATER_COLUMNS & columns.keys()) | {
        name for name in LATER_NULL_COLUMNS & columns.keys() if columns[name] is None
    }
    later |= {
        name
        for name, default in table.later_defaults.items()
        if name in columns and _same(columns[name], default)
    }
    if digest == sealed_digest or sealed_digest is None or not later:
        return key, digest
    # The seal was taken before some of them existed, not necessarily all (a task sealed after
    # `seq` but before `awaiting_projection`): each set of them left out, fewest first.
    for size in range(1, len(later) + 1):
        for omitted in combinations(sorted(later), size):
            earlier = row_digest(table.name, key, columns, without=frozenset(omitted))
            if earlier == sealed_digest:
                return key, earlier
    return key, digest


def _same(value: object, default: object) -> bool:
    """A stored value is its column's default: equal, and of the same kind (a REAL 20.0 is the
    default 20.0; text "0" is not the integer 0)."""
    if default is None or value is None:
        return value is default
    if isinstance(default, float):
        return type(value) in (int, float) and value == default
    return type(value) is type(default) and value == default


def state_row_columns(table: SealedTable, row: Mapping[str, Any]) -> dict[str, Any]:
    """A stored row of `table` as an archive keeps it: its record's columns and its key."""
    columns = {name: row[name] for name in record_columns(table.record)}
    columns.setdefault(table.key, row[table.key])
    return columns


def held_row_problem(
    tables: SealedTables, name: str, key: str, digest: str | None, columns: object
) -> str | None:
    """What is wrong with a row an archive's state line carries (None: nothing): it must hold
    exactly its table's columns and give the line's key and digest."""
    table = tables.get(name)
    if table is None:
        return f"{name!r} is no state table"
    key_column = table.key
    if isinstance(columns, Mapping):
        columns = table.with_later_defaults(columns)
    expected = set(record_columns(table.record)) | {key_column}
    if not isinstance(columns, Mapping) or set(columns) != expected:
        return "the row does not hold exactly its table's columns"
    if not isinstance(columns[key_column], str) or columns[key_column] != key:
        return "the row's key column is not the line's key"
    if stored_row_state(table, columns, digest) != (key, digest):
        return "the row's columns do not give the digest its line holds: the row was changed"
    return None
