"""The row of `commit_attestations` (0.x migration 0019): the signed attestations of one landed
governed write, as its git note holds them."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, NamedTuple

from aios_ledger.core.errors import LedgerError
from aios_ledger.core.jsonvalue import JsonObject, loads_object
from aios_ledger.core.log.rows import RowImage, row_image
from aios_ledger.core.records import record_from_row

COMMIT_ATTESTATIONS = "commit_attestations"


class CommitAttestationRow(NamedTuple):
    """One row of `commit_attestations`, keyed by the governed write's idempotency key."""

    idempotency_key: str
    task_id: str
    repository: str
    commit_oid: str
    keyid: str
    note_json: str
    provenance_sha256: str
    review_sha256: str
    created_at: str

    @classmethod
    def from_row(cls, row: Mapping[str, Any]) -> CommitAttestationRow:
        return record_from_row(cls, row)

    def image(self) -> RowImage:
        return row_image(COMMIT_ATTESTATIONS, self.idempotency_key, self._asdict())

    def note(self) -> JsonObject:
        try:
            return loads_object(self.note_json, what="note_json")
        except LedgerError as refused:
            raise LedgerError(
                "ATTESTATION_ROW_CORRUPT",
                f"{COMMIT_ATTESTATIONS} {self.idempotency_key}: {refused}",
            ) from None
