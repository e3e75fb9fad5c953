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
        # Spelled out, as are the seal's and the sealed row's: they are on every write's path,
        # where attrs.asdict is several times slower.
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
