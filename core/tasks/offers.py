"""Which operations a caller may ask for on a task now, read from the tables so that the console and
the API do not restate them; the decision still refuses what other facts forbid."""

from __future__ import annotations

from collections.abc import Collection, Mapping

from aios_ledger.core.tasks.modes import VerifyDecision
from aios_ledger.core.tasks.operations import TASK_OPERATIONS
from aios_ledger.core.tasks.transitions import (
    TASK_TRANSITIONS,
    TaskOperation,
    TaskTransition,
    expire_operation,
    release_operation,
    verify_operation,
)

_EITHER = (True, False)
# Every column an operation whose outcome is chosen from the task or the request may land in.
_CHOSEN: Mapping[str, frozenset[TaskOperation]] = {
    "release": frozenset(release_operation(attempts_left=left) for left in _EITHER),
    "expire": frozenset(expire_operation(attempts_left=left) for left in _EITHER),
    "verify": frozenset(
        verify_operation(decision, attempts_left=left)
        for decision in VerifyDecision
        for left in _EITHER
    ),
}


def _moves_from(row: TaskTransition) -> frozenset[str]:
    outcome = row.outcome
    outcomes = {outcome} if isinstance(outcome, TaskOperation) else _CHOSEN[row.name]
    return frozenset(str(status) for status, column in TASK_TRANSITIONS if column in outcomes)


def operation_roles(name: str) -> frozenset[str]:
    """The roles that may ask for operation `name` (none: the ledger's own, as expiry is)."""
    role = TASK_OPERATIONS[name].role
    return frozenset() if role is None else frozenset({role})


def open_operations(status: str, roles: Collection[str]) -> frozenset[str]:
    """The operations a caller holding `roles` may ask for on a task of `status` now."""
    return frozenset(
        row.name
        for row in TASK_OPERATIONS.values()
        if row.role in roles and status in _moves_from(row)
    )
