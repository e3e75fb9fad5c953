"""The rows of the event log: one record for an `events` row and one for an `event_seals` row.

They are typed as a valid row holds them but do not check their fields when built, so that the
verifier can read a tampered row and check its types itself before it trusts them.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import attrs
from aios_ledger.core.errors import LedgerError
from aios_ledger.core.jsonvalue import JsonValue, loads_document
from aios_ledger.core.log.rows import RowImage
from aios_ledger.core.records import record_columns, record_from_row
from aios_ledger.core.statements import SqlWrite, Statement

# The seal format a 1.0 ledger holds (`core.log.seals`; 0.x's are `core.log.legacy_seals`).
SEAL_VERSION_5 = 5


@attrs.frozen
class EventRow:
    """One row of `events`."""

    event_id: int
    task_id: str | None
    agent_id: str | None
    event_type: str
    payload_json: str
    created_at: str
    # Who caused it (`core.actors`, canonical JSON); None for an event written before actors
    # were recorded.
    actor: str | None = None

    @classmethod
    def from_row(cls, row: Mapping[str, Any]) -> EventRow:
        return record_from_row(cls, row)

    def payload(self) -> JsonValue:
        """The payload, or None when the stored text is not a JSON document."""
        try:
            return loads_document(self.payload_json, what=f"event {self.event_id} payload")
        except LedgerError:
            return None

    def public(self) -> dict[str, Any]:
        return attrs.asdict(self, recurse=False)

    def insert(self) -> SqlWrite:
        return SqlWrite(Statement.INSERT_EVENT, self.public())


@attrs.frozen
class SealRow:
    """One row of `event_seals`: the seal of the event `event_id`, at `chain_seq` in `chain`,
    built on `prev_seal`. `sealed_at_adoption` is stored as 0 or 1 (any other value reads as
    False); `row_changes` and `chained_row_digest` are what a v5 seal covers of its chain's task
    row (`core.log.seals.ChainedRow`)."""

    event_id: int
    chain: str
    chain_seq: int
    prev_seal: str
    seal: str
    sealed_at_adoption: bool
    seal_version: int = SEAL_VERSION_5
    row_changes: str | None = None
    chained_row_digest: str | None = None

    @classmethod
    def from_row(cls, row: Mapping[str, Any]) -> SealRow:
        columns = {name: row.get(name) for name in record_columns(cls)}
        return cls(**{**columns, "sealed_at_adoption": row["sealed_at_adoption"] == 1})

    def public(self) -> dict[str, Any]:
        """The seal's columns without its event id, which an export line holds once."""
        columns = attrs.asdict(self, recurse=False)
        del columns["event_id"]
        return columns

    def insert(self) -> SqlWrite:
        columns = attrs.asdict(self, recurse=False)
        return SqlWrite(
            Statement.INSERT_SEAL,
            {**columns, "sealed_at_adoption": int(self.sealed_at_adoption)},
        )


@attrs.frozen
class SealedRow:
    """One row of `event_seal_rows`: the `position`-th state row the event `event_id` wrote,
    as its seal covers it."""

    event_id: int
    position: int
    row_table: str
    row_key: str
    row_digest: str

    @classmethod
    def from_row(cls, row: Mapping[str, Any]) -> SealedRow:
        return record_from_row(cls, row)

    def image(self) -> RowImage:
        return RowImage(self.row_table, self.row_key, self.row_digest)

    def insert(self) -> SqlWrite:
        return SqlWrite(Statement.INSERT_SEALED_ROW, attrs.asdict(self, recurse=False))


def sealed_rows(event_id: int, images: Sequence[RowImage]) -> tuple[SealedRow, ...]:
    return tuple(
        SealedRow(event_id, position, image.table, image.key, image.digest)
        for position, image in enumerate(images, start=1)
    )
