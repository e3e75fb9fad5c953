"""The catalogue of tables: each domain declares its own, so that the log's verify, export and
restore code, and the shell's rendered per-table statements, know no domain themselves.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TypeAlias

import attrs
from aios_ledger.core.log.archived import ArchivedEventRow
from aios_ledger.core.log.records import EventRow, SealedRow, SealRow
from aios_ledger.core.records import record_columns


def _words(text: str | tuple[str, ...]) -> tuple[str, ...]:
    return tuple(text.split()) if isinstance(text, str) else text


@attrs.frozen
class Table:
    """A table whose rows a copy takes whole but no seal covers."""

    name: str
    # The primary key, which orders every read of all its rows.
    key_columns: tuple[str, ...] = attrs.field(converter=_words)
    columns: tuple[str, ...] = attrs.field(converter=_words)
    # The name its whole-row insert goes by where the ledger's own plans write rows with it.
    insert: str | None = None
    # The target of a copy already holds this table's one row (an empty tree's head): the
    # insert replaces it.
    insert_replaces: bool = False

    @property
    def insert_name(self) -> str:
        return self.insert or f"copy_insert_{self.name}"


@attrs.frozen
class SealedTable:
    """A state table whose rows only plans with a sealed event write.

    `record`'s fields are the digested columns, `key` the column its rows are sealed under.
    `later_defaults`: columns a migration added with a default, left out of an older seal's
    digest while they hold it. `unsealed_writer`: the events that wrote its rows before they
    were sealed. The other fields shape its rendered statements."""

    name: str
    key: str
    record: type
    later_defaults: Mapping[str, object] = attrs.field(factory=dict)
    unsealed_writer: Callable[[EventRow], bool] | None = None
    # The primary key: `key` itself unless the rows are sealed under two columns' text.
    key_columns: tuple[str, ...] = attrs.field(
        converter=_words, default=attrs.Factory(lambda self: (self.key,), takes_self=True)
    )
    # Every column, in the schema's order: the record's fields unless the table holds more.
    columns: tuple[str, ...] = attrs.field(
        converter=_words,
        default=attrs.Factory(lambda self: record_columns(self.record), takes_self=True),
    )
    insert: str | None = None
    # The SQL files' fragment that says whether a row no seal proves may have been written
    # before the ledger sealed such rows; None: whether the log holds seals given at adoption says.
    history: str | None = None
    # The fragment that finds a sealed row by its key text, where the key's own expression
    # cannot use the primary key's index; the key as an expression otherwise.
    lookup: str | None = None
    # Read in key order, byte by byte (verify folds the task chains beside the task rows).
    in_key_order: bool = False
    # The rows an archive takes with a task: the shape of their condition on the task's
    # `:task_id` (`sql/table_shapes.sql`); None: an archive leaves the rows in place.
    of_task: str | None = None
    # The plan's statement that deletes an archived task's rows (`core/statements.py`); None:
    # a delete of its own (the task row's is guarded by its revision).
    delete: str | None = None
    # A copy inserts a sealed table's rows; none is there before.
    insert_replaces = False

    @property
    def insert_name(self) -> str:
        return self.insert or f"copy_insert_{self.name}"

    @property
    def key_name(self) -> str | None:
        """The name the key's text is selected under beside its columns, if it is no column."""
        return None if self.key_columns == (self.key,) else self.key

    def with_later_defaults(self, columns: Mapping[str, object]) -> Mapping[str, object]:
        """A row as an archive written before some of `later_defaults` kept it, with each
        column it lacks at the default its migration gave every row then."""
        if all(name in columns for name in self.later_defaults):
            return columns
        return {
            **{name: value for name, value in self.later_defaults.items() if name not in columns},
            **columns,
        }


# Every sealed table by name, as `core.sealed_tables.SEALED_TABLES` assembles them.
SealedTables: TypeAlias = Mapping[str, SealedTable]

# The log's own tables: its events and their seals (their records' fields are their columns),
# and the Merkle log of them.
EVENT_TABLES = (
    Table(
        "events", key_columns="event_id", columns=record_columns(EventRow), insert="insert_event"
    ),
    Table(
        "event_seals", key_columns="event_id", columns=record_columns(SealRow), insert="insert_seal"
    ),
    Table(
        "event_seal_rows",
        key_columns="event_id position",
        columns=record_columns(SealedRow),
        insert="insert_sealed_row",
    ),
    Table("archived_events", key_columns="event_id", columns=record_columns(ArchivedEventRow)),
)
MERKLE_TABLES = (
    Table(
        "merkle_leaves",
        key_columns="leaf_index",
        columns="leaf_index event_id leaf_hash nodes",
        insert="insert_merkle_leaf",
    ),
    Table(
        "merkle_tree",
        key_columns="only_row",
        columns="only_row size frontier revision",
        insert_replaces=True,
    ),
)
