"""The row of a task: a `tasks` row."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from functools import lru_cache
from typing import Any, NamedTuple

from aios_ledger.core.errors import LedgerError
from aios_ledger.core.jsonvalue import JsonObject, JsonValue, loads_document
from aios_ledger.core.log.rows import TASKS, RowWrite
from aios_ledger.core.records import record_from_row
from aios_ledger.core.structuring import FieldRefused
from aios_ledger.core.tasks.backoff import (
    DEFAULT_RETRY_BASE_SECONDS,
    DEFAULT_RETRY_MAX_SECONDS,
    RetryPolicy,
)
from aios_ledger.core.tasks.modes import VerificationMode

# Most tasks hold `{}` or `[]` in these columns: a fresh empty container skips the parser.
_EMPTY_DOCUMENTS: dict[str, Callable[[], JsonValue]] = {"{}": dict, "[]": list}


def _column_json(row_id: str, column: str, raw: object) -> JsonValue:
    if not isinstance(raw, str):
        raise LedgerError("TASK_ROW_CORRUPT", f"task {row_id}: {column} is not JSON text")
    empty = _EMPTY_DOCUMENTS.get(raw)
    if empty is not None:
        return empty()
    try:
        return loads_document(raw, what=column)
    except LedgerError as refused:
        raise LedgerError("TASK_ROW_CORRUPT", f"task {row_id}: {refused}") from None


_MAX_CAPABILITIES_TEXT = 16 * 1024


@lru_cache(maxsize=1024)
def _capability_names(raw: str) -> tuple[str, ...] | None:
    """The names in a `required_capabilities_json` text, cached as claims read one often."""
    try:
        value = loads_document(raw)
    except LedgerError:
        return None
    if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
        return None
    return tuple(str(item) for item in value)


def require_task(
    task_id: str, task: TaskRow | None, *, error: type[LedgerError] = LedgerError
) -> TaskRow:
    if task is None:
        raise error("TASK_NOT_FOUND", f"no task {task_id!r}")
    return task


class TaskRow(NamedTuple):
    """One row of `tasks`; a NamedTuple, as every transition reads one and `_replace`s it."""

    task_id: str
    goal: str
    instructions: str
    success_criteria_json: str
    required_capabilities_json: str
    constraints_json: str
    metadata_json: str
    deadline: str | None
    priority: int
    max_attempts: int
    attempt: int
    status: str
    claimed_by: str | None
    lease_token_hash: str | None
    lease_expires_at: str | None
    result_json: str | None
    result_digest: str | None
    result_idempotency_key: str | None
    verification_json: str | None
    revision: int
    created_at: str
    updated_at: str
    verification_mode: str = VerificationMode.REVIEWER
    retry_base_seconds: int = DEFAULT_RETRY_BASE_SECONDS
    retry_max_seconds: int = DEFAULT_RETRY_MAX_SECONDS
    not_before: str | None = None
    # Creation order, which breaks claim ties of equal priority; the table refuses 0.
    seq: int = 0
    # 1 while a governed task waits for its initial projection, whose write alone clears it.
    awaiting_projection: int = 0

    @classmethod
    def from_row(cls, row: Mapping[str, Any]) -> TaskRow:
        """The row's columns by name; a row without day two's reads as their defaults."""
        if "awaiting_projection" not in row:
            row = {**cls._field_defaults, **row}
        return record_from_row(cls, row)

    def written(self, before: TaskRow | None) -> RowWrite:
        return RowWrite(TASKS, self.task_id, self._fields, before, self)

    def metadata(self) -> JsonObject:
        value = _column_json(self.task_id, "metadata_json", self.metadata_json)
        if not isinstance(value, dict):
            raise LedgerError("TASK_ROW_CORRUPT", f"task {self.task_id}: metadata is not an object")
        return value

    def required_capabilities(self) -> list[str]:
        raw = self.required_capabilities_json
        # Only texts of a size a valid list can have are remembered (64 names of 200 characters).
        memoisable = type(raw) is str and len(raw) <= _MAX_CAPABILITIES_TEXT
        names = _capability_names(raw) if memoisable else None
        if names is not None:
            return list(names)
        value = _column_json(
            self.task_id, "required_capabilities_json", self.required_capabilities_json
        )
        if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
            raise LedgerError(
                "TASK_ROW_CORRUPT", f"task {self.task_id}: required capabilities are not strings"
            )
        return [str(item) for item in value]

    def success_criteria(self) -> JsonValue:
        return _column_json(self.task_id, "success_criteria_json", self.success_criteria_json)

    def constraints(self) -> JsonValue:
        return _column_json(self.task_id, "constraints_json", self.constraints_json)

    def result(self) -> JsonValue:
        if self.result_json is None:
            return None
        return _column_json(self.task_id, "result_json", self.result_json)

    def retry_policy(self) -> RetryPolicy:
        try:
            return RetryPolicy(self.retry_base_seconds, self.retry_max_seconds)
        except FieldRefused:  # the columns' own checks let a max below the base through
            raise LedgerError(
                "TASK_ROW_CORRUPT", f"task {self.task_id}: its retry policy is not valid"
            ) from None

    def verification(self) -> JsonValue:
        if self.verification_json is None:
            return None
        return _column_json(self.task_id, "verification_json", self.verification_json)
