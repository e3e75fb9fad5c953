"""The task state machine as one data table: (status, operation) -> next status.

Every write to a task looks its transition up here; a pair that is not in the table is an
`INVALID_TRANSITION`. Outcomes that depend on the attempts left are separate operations
(`rework` / `rework_exhausted`, `expire` / `expire_exhausted`, `release` / `release_exhausted`),
so the table stays a plain map.
`ABSENT` is the pseudo-status of a task that does not exist yet.
"""

from __future__ import annotations

from collections.abc import Mapping

from aios_ledger.core.errors import LedgerError

TASK_STATUSES = ("QUEUED", "CLAIMED", "SUBMITTED", "SUCCEEDED", "FAILED", "CANCELLED")
ABSENT = "ABSENT"

TASK_TRANSITIONS: Mapping[tuple[str, str], str] = {
    (ABSENT, "create"): "QUEUED",
    ("QUEUED", "claim"): "CLAIMED",
    ("CLAIMED", "heartbeat"): "CLAIMED",
    ("CLAIMED", "submit"): "SUBMITTED",
    ("CLAIMED", "expire"): "QUEUED",
    ("CLAIMED", "expire_exhausted"): "FAILED",
    ("CLAIMED", "release"): "QUEUED",
    ("CLAIMED", "release_exhausted"): "FAILED",
    ("SUBMITTED", "verify_succeeded"): "SUCCEEDED",
    ("SUBMITTED", "rework"): "QUEUED",
    ("SUBMITTED", "rework_exhausted"): "FAILED",
    ("SUBMITTED", "verify_failed"): "FAILED",
    ("QUEUED", "cancel"): "CANCELLED",
    ("CLAIMED", "cancel"): "CANCELLED",
    ("SUBMITTED", "cancel"): "CANCELLED",
}

TASK_OPERATIONS = tuple(sorted({operation for _, operation in TASK_TRANSITIONS}))

# Which verification decision maps to which operation (NEEDS_REWORK depends on attempts left).
VERIFY_DECISIONS = ("SUCCEEDED", "NEEDS_REWORK", "FAILED")


def next_task_status(status: str, operation: str) -> str:
    """The status after `operation`, or `INVALID_TRANSITION`."""
    try:
        return TASK_TRANSITIONS[(status, operation)]
    except KeyError:
        raise LedgerError(
            "INVALID_TRANSITION", f"a {status} task does not allow {operation}"
        ) from None


def verify_operation(decision: str, *, attempts_left: bool) -> str:
    if decision == "SUCCEEDED":
        return "verify_succeeded"
    if decision == "FAILED":
        return "verify_failed"
    return "rework" if attempts_left else "rework_exhausted"


def expire_operation(*, attempts_left: bool) -> str:
    return "expire" if attempts_left else "expire_exhausted"


def release_operation(*, attempts_left: bool) -> str:
    """A released attempt still counts, as an expired one does: a task whose command keeps
    getting its worker stopped (or killed by the stop) must not come back forever."""
    return "release" if attempts_left else "release_exhausted"
