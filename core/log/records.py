"""The rows of the event log: one record for an `events` row and one for an `event_seals` row.

Every part of the log speaks in these two: a decision's plan appends an `EventRow` with its
`SealRow`, the seal is computed over an `EventRow` at its place in its chain, the verifier and
the export read them back. They are typed as a valid row holds them. A row read from a database
(or an export) may have been tampered with and hold anything SQLite can store; the records do
not check their fields when built, so the verifier can read such a row and check the types
itself before it trusts them (`verification._content_well_typed`, `_seal_well_formed`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import attrs
from aios_ledger.core.errors import LedgerError
from aios_ledger.core.jsonvalue import JsonValue, loads_document
from aios_ledger.core.log.rows import RowImage
from aios_ledger.core.records import record_from_row
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
        return attrs.asdict(self)

    def insert(self) -> SqlWrite:
        return SqlWrite(
            Statement.INSERT_EVENT,
            {
                "event_id": self.event_id,
                "task_id": self.task_id,
                "agent_id": self.agent_id,
                "event_type": self.event_type,
                "payload_json": self.payload_json,
                "created_at": self.created_at,
                "actor": self.actor,
            },
        )


@attrs.frozen
class SealRow:
    """One row of `event_seals`: the seal of the event `event_id`, at `chain_seq` in `chain`,
    built on `prev_seal`. `sealed_at_adoption` is stored as 0 or 1; any other stored value
    reads as False. `seal_version` is the seal's schema: 5, the one the ledger writes, covers the
    event's content and place in its chain (not its `event_id`), the rows its transition wrote
    (`SealedRow`, see `core.log.rows`) but the chain's task row, of which it covers `row_changes`
    (the columns the transition changed, as canonical JSON text) and `chained_row_digest` (a
    digest over the previous one of the chain and those changes,
    `core.log.rows.chained_row_digest`), both stored here. Both are None in a seal of an event
    that did not write the task row (`chained_row_digest` then carries the chain's last one,
    None before the first). Versions 1 to 4 are 0.x ledgers' (`core.log.legacy_seals`)."""

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
        return cls(
            event_id=row["event_id"],
            chain=row["chain"],
            chain_seq=row["chain_seq"],
            prev_seal=row["prev_seal"],
            seal=row["seal"],
            sealed_at_adoption=row["sealed_at_adoption"] == 1,
            seal_version=row["seal_version"],
            row_changes=row.get("row_changes"),
            chained_row_digest=row.get("chained_row_digest"),
        )

    def public(self) -> dict[str, Any]:
        """The seal's columns without its event id (an export line holds it once), the two
        chained row columns null where the event wrote no task row."""
        return {
            "chain": self.chain,
            "chain_seq": self.chain_seq,
            "prev_seal": self.prev_seal,
            "seal": self.seal,
            "sealed_at_adoption": self.sealed_at_adoption,
            "seal_version": self.seal_version,
            "row_changes": self.row_changes,
            "chained_row_digest": self.chained_row_digest,
        }

    def insert(self) -> SqlWrite:
        return SqlWrite(
            Statement.INSERT_SEAL,
            {
                "event_id": self.event_id,
                "chain": self.chain,
                "chain_seq": self.chain_seq,
                "prev_seal": self.prev_seal,
                "seal": self.seal,
                "sealed_at_adoption": int(self.sealed_at_adoption),
                "seal_version": self.seal_version,
                "row_changes": self.row_changes,
                "chained_row_digest": self.chained_row_digest,
            },
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
        return SqlWrite(
            Statement.INSERT_SEALED_ROW,
            {
                "event_id": self.event_id,
                "position": self.position,
                "row_table": self.row_table,
                "row_key": self.row_key,
                "row_digest": self.row_digest,
            },
        )


def sealed_rows(event_id: int, images: Sequence[RowImage]) -> tuple[SealedRow, ...]:
    return tuple(
        SealedRow(event_id, position, image.table, image.key, image.digest)
        for position, image in enumerate(images, start=1)
    )
