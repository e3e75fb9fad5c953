"""The sealed tables: what the log needs to know of each state table a domain declares.

A domain declares its tables (`SealedTable`, a tuple in its `tables` module); the composition
above every domain (`core.sealed_tables`) gathers them, and the shell hands them to the log's
verify, export and restore code, which knows no domain itself.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TypeAlias

import attrs
from aios_ledger.core.log.records import EventRow


@attrs.frozen
class SealedTable:
    """A state table whose rows only plans with a sealed event write.

    `record` is the row record whose fields are the digested columns, `key` the column its rows
    are sealed under. `later_defaults` are columns a migration added with a default that rows
    from before it hold: a seal taken before them is held against the row without each one that
    still holds its default. `unsealed_writer` tells, for a table sealed only since issue 26, the
    events that wrote its rows before their seals did."""

    name: str
    key: str
    record: type
    later_defaults: Mapping[str, object] = attrs.field(factory=dict)
    unsealed_writer: Callable[[EventRow], bool] | None = None

    def with_later_defaults(self, columns: Mapping[str, object]) -> Mapping[str, object]:
        """A row as an archive written before some of `later_defaults` kept it, with each
        column it lacks at the default its migration gave every row then."""
        defaults = self.later_defaults
        if not defaults or all(name in columns for name in defaults):
            return columns
        return {
            **{name: value for name, value in defaults.items() if name not in columns},
            **columns,
        }


# Every sealed table by name, as `core.sealed_tables.SEALED_TABLES` assembles them.
SealedTables: TypeAlias = Mapping[str, SealedTable]
