"""The task state machine as one data table: (status, operation) -> next status.

Every write to a task looks its transition up here; a pair that is not in the table is an
`INVALID_TRANSITION`. Outcomes that depend on the attempts left are separate operations
(`rework` / `rework_exhausted`, `expire` / `expire_exhausted`, `release` / `release_exhausted`),
so the table stays a plain map. An operator's `retry` is the one way out of FAILED and
CANCELLED. `ABSENT` is the pseudo-status of a task that does not exist yet. Statuses, operations
and verification decisions are `StrEnum`s: rows, digests and JSON answers hold their plain text.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from types import MappingProxyType
from typing import Final, Literal

from aios_ledger.core.errors import LedgerError


class TaskStatus(enum.StrEnum):
    QUEUED = "QUEUED"
    CLAIMED = "CLAIMED"
    SUBMITTED = "SUBMITTED"
    SUCCEEDED = "SUCCEEDED"
    FAILED = "FAILED"
    CANCELLED = "CANCELLED"


class TaskOperation(enum.StrEnum):
    CREATE = "create"
    CLAIM = "claim"
    HEARTBEAT = "heartbeat"
    SUBMIT = "submit"
    EXPIRE = "expire"
    EXPIRE_EXHAUSTED = "expire_exhausted"
    RELEASE = "release"
    RELEASE_EXHAUSTED = "release_exhausted"
    VERIFY_SUCCEEDED = "verify_succeeded"
    REWORK = "rework"
    REWORK_EXHAUSTED = "rework_exhausted"
    VERIFY_FAILED = "verify_failed"
    CANCEL = "cancel"
    RETRY = "retry"


class VerifyDecision(enum.StrEnum):
    """A verifier's judgement of a submitted result (NEEDS_REWORK depends on attempts left)."""

    SUCCEEDED = "SUCCEEDED"
    NEEDS_REWORK = "NEEDS_REWORK"
    FAILED = "FAILED"


class VerificationMode(enum.StrEnum):
    """Who judges a task's submitted results: a reviewer (`task verify`), or the ledger itself
    when they arrive (`core/tasks/verification.py`)."""

    REVIEWER = "reviewer"
    AUTO = "auto"


ABSENT: Final = "ABSENT"

_S, _O = TaskStatus, TaskOperation

TASK_TRANSITIONS: Mapping[tuple[TaskStatus | Literal["ABSENT"], TaskOperation], TaskStatus] = (
    MappingProxyType(
        {
            (ABSENT, _O.CREATE): _S.QUEUED,
            (_S.QUEUED, _O.CLAIM): _S.CLAIMED,
            (_S.CLAIMED, _O.HEARTBEAT): _S.CLAIMED,
            (_S.CLAIMED, _O.SUBMIT): _S.SUBMITTED,
            (_S.CLAIMED, _O.EXPIRE): _S.QUEUED,
            (_S.CLAIMED, _O.EXPIRE_EXHAUSTED): _S.FAILED,
            (_S.CLAIMED, _O.RELEASE): _S.QUEUED,
            (_S.CLAIMED, _O.RELEASE_EXHAUSTED): _S.FAILED,
            (_S.SUBMITTED, _O.VERIFY_SUCCEEDED): _S.SUCCEEDED,
            (_S.SUBMITTED, _O.REWORK): _S.QUEUED,
            (_S.SUBMITTED, _O.REWORK_EXHAUSTED): _S.FAILED,
            (_S.SUBMITTED, _O.VERIFY_FAILED): _S.FAILED,
            (_S.QUEUED, _O.CANCEL): _S.CANCELLED,
            (_S.CLAIMED, _O.CANCEL): _S.CANCELLED,
            (_S.SUBMITTED, _O.CANCEL): _S.CANCELLED,
            # day two: an operator sends a finished failure back to the queue
            (_S.FAILED, _O.RETRY): _S.QUEUED,
            (_S.CANCELLED, _O.RETRY): _S.QUEUED,
        }
    )
)

# A status nothing but an operator's `retry` moves a task out of: no worker, reviewer or lease
# changes it again.
TERMINAL_STATUSES = frozenset(
    status
    for status in TaskStatus
    if not any(
        source == status and operation != TaskOperation.RETRY
        for source, operation in TASK_TRANSITIONS
    )
)

# The same table keyed by plain text: a row's status is the text it was stored as (a StrEnum
# member hashes and compares as its text, so this finds the same entries).
_NEXT: Mapping[tuple[str, str], TaskStatus] = {
    key: value for key, value in TASK_TRANSITIONS.items()
}


def next_task_status(status: str, operation: TaskOperation) -> TaskStatus:
    """The status after `operation` on a task of `status` (as its row holds it), or
    `INVALID_TRANSITION`."""
    following = _NEXT.get((status, operation))
    if following is None:
        raise LedgerError("INVALID_TRANSITION", f"a {status} task does not allow {operation}")
    return following


def verify_operation(decision: VerifyDecision, *, attempts_left: bool) -> TaskOperation:
    if decision == VerifyDecision.SUCCEEDED:
        return TaskOperation.VERIFY_SUCCEEDED
    if decision == VerifyDecision.FAILED:
        return TaskOperation.VERIFY_FAILED
    return TaskOperation.REWORK if attempts_left else TaskOperation.REWORK_EXHAUSTED


def expire_operation(*, attempts_left: bool) -> TaskOperation:
    return TaskOperation.EXPIRE if attempts_left else TaskOperation.EXPIRE_EXHAUSTED


def release_operation(*, attempts_left: bool) -> TaskOperation:
    """A released attempt still counts, as an expired one does: a task whose command keeps
    getting its worker stopped (or killed by the stop) must not come back forever."""
    return TaskOperation.RELEASE if attempts_left else TaskOperation.RELEASE_EXHAUSTED
