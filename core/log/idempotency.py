"""The idempotency ledger's rows: the answer recorded for a key, replayed to a retry, and the
whole `task_idempotency` row a sealed event covers."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, NamedTuple

from aios_ledger.core.log.records import EventRow
from aios_ledger.core.log.rows import RECORDED_ANSWERS, RowImage, row_image
from aios_ledger.core.log.tables import SealedTable
from aios_ledger.core.records import record_from_row


class IdempotencyRow(NamedTuple):
    """The answer recorded for an idempotency key and its request's digest, as a decision reads
    them from `task_idempotency` or the projections' ledgers, which share the column names."""

    idempotency_key: str
    request_sha256: str
    response_json: str

    @classmethod
    def from_row(cls, row: Mapping[str, Any]) -> IdempotencyRow:
        return record_from_row(cls, row)


class RecordedAnswerRow(NamedTuple):
    """A whole `task_idempotency` row, as a transition writes it and its sealed event covers it."""

    idempotency_key: str
    operation: str
    subject: str
    request_sha256: str
    response_json: str
    created_at: str

    def image(self) -> RowImage:
        return row_image(RECORDED_ANSWERS, self.idempotency_key, self._asdict())


def _may_have_recorded_answer(event: EventRow) -> bool:
    """Any task event may have recorded an answer (before recorded answers were sealed)."""
    return isinstance(event.task_id, str)


RECORDED_ANSWERS_TABLE = SealedTable(
    RECORDED_ANSWERS,
    "idempotency_key",
    RecordedAnswerRow,
    unsealed_writer=_may_have_recorded_answer,
    insert="task_idempotency_insert",
    history="sealed_history_of_recorded_answers",
    of_task="of_task_by_subject",
    delete="delete_archived_idempotency",
)
