"""The rows of runs: a `runs` row and a `run_events` row."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import attrs
from aios_ledger.core.errors import LedgerError
from aios_ledger.core.jsonvalue import JsonObject, JsonValue, loads_document
from aios_ledger.core.log.rows import RUN_EVENTS, RowImage, row_image, run_event_key
from aios_ledger.core.records import record_from_row


@attrs.frozen
class RunRow:
    run_id: str
    session_id: str
    prompt: str
    event_count: int
    created_at: str
    updated_at: str

    @classmethod
    def from_row(cls, row: Mapping[str, Any]) -> RunRow:
        return record_from_row(cls, row)

    def evidence_view(self) -> JsonObject:
        """What evidence pins of the run: nothing that changes when events are appended."""
        return {
            "run_id": self.run_id,
            "session_id": self.session_id,
            "prompt": self.prompt,
            "created_at": self.created_at,
        }

    def public(self) -> JsonObject:
        return {
            **self.evidence_view(),
            "event_count": self.event_count,
            "updated_at": self.updated_at,
        }


@attrs.frozen
class RunEventRow:
    """One row of `run_events`: written once, by an append whose sealed event covers it."""

    run_id: str
    seq: int
    kind: str
    payload_json: str
    created_at: str

    @classmethod
    def from_row(cls, row: Mapping[str, Any]) -> RunEventRow:
        return record_from_row(cls, row)

    def image(self) -> RowImage:
        return row_image(RUN_EVENTS, run_event_key(self.run_id, self.seq), attrs.asdict(self))

    def payload(self) -> JsonValue:
        try:
            return loads_document(self.payload_json, what=f"run event {self.seq} payload")
        except LedgerError as refused:
            raise LedgerError("RUN_ROW_CORRUPT", f"run {self.run_id}: {refused}") from None

    def public(self) -> JsonObject:
        return {
            "seq": self.seq,
            "kind": self.kind,
            "payload": self.payload(),
            "created_at": self.created_at,
        }
