"""`TaskSurface`: the task methods `TaskLedger` and `LedgerClient` share, written once.

Each keyword method builds its request record and hands it to `_apply` or `_apply_all`, which
each class implements; what each side answers its own way is abstract, so mypy holds both to it.
"""

from __future__ import annotations

import abc
import secrets
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, TypeVar

from aios_ledger.core import (
    CancelAnswer,
    CancelRequest,
    ClaimAnswer,
    ClaimBatchRequest,
    ClaimRequest,
    CreateAnswer,
    EventView,
    HeartbeatAnswer,
    HeartbeatRequest,
    HistoryEntry,
    RetryAnswer,
    RetryRequest,
    SubmitAnswer,
    SubmitRequest,
    TaskCreateCommand,
    TaskView,
    VerifyAnswer,
    VerifyRequest,
)
from aios_ledger.core.batches import structure_batch
from aios_ledger.core.structuring import check_built
from aios_ledger.core.tasks.answers import ReleaseAnswer, TaskDetail
from aios_ledger.core.tasks.operations import operation_of
from aios_ledger.core.tasks.requests import ReleaseRequest, TaskRequest
from aios_ledger.core.work import IdleReason

A = TypeVar("A")
C = TypeVar("C", ClaimRequest, ClaimBatchRequest)
LEASE_TOKEN_BYTES = 32


def new_lease_token() -> str:
    return secrets.token_urlsafe(LEASE_TOKEN_BYTES)


def listed(value: object) -> object:
    """An iterable as the JSON array the core's strict checks read; text, mappings and None
    stay as they are, for the core to refuse."""
    if isinstance(value, list | str | bytes | Mapping) or value is None:
        return value
    try:
        return list(value)  # type: ignore[call-overload]
    except TypeError:
        return value


def offered(
    record: type[C],
    agent_id: str,
    capabilities: Sequence[str],
    lease_seconds: int,
    **more: object,
) -> C:
    """A claim's request record, from a keyword claim's arguments."""
    offer = {"agent_id": agent_id, "capabilities": listed(capabilities)}
    return record.from_mapping({**offer, "lease_seconds": lease_seconds, **more})


class TaskSurface(abc.ABC):
    """The task lifecycle's methods, over whatever applies a request record (see the module)."""

    @abc.abstractmethod
    def _apply(self, request: TaskRequest[A]) -> A:
        """One request record, built by `from_mapping` (so not checked again), applied."""

    @abc.abstractmethod
    def _apply_all(self, requests: Sequence[TaskRequest[A]]) -> list[A]:
        """Checked request records, applied in one transaction, all or none."""

    def apply(self, request: TaskRequest[A]) -> A:
        """The write `request` asks for, answered as its keyword method answers."""
        check_built(request, what=operation_of(request).name)
        return self._apply(request)

    @abc.abstractmethod
    def apply_all(self, requests: Iterable[TaskRequest[A]]) -> list[A]:
        """Many writes in one transaction: all or none, a refusal's detail starting `item N:`."""

    # Each side claims with an option of its own, in its signature so that mypy refuses the
    # other's: the ledger's `grant`, beyond which an offer is `CAPABILITY_NOT_GRANTED`; the
    # client's `wait_seconds` of long poll. Both build their records with `offered`.

    @abc.abstractmethod
    def claim(
        self,
        *,
        agent_id: str,
        capabilities: Sequence[str],
        lease_seconds: int,
        task_id: str | None = None,
        idempotency_key: str | None = None,
        lease_token: str | None = None,
    ) -> ClaimAnswer | None:
        """Take the next eligible task (or `task_id`) under a lease, passed leases taken over
        first so that a fleet needs no sweeper; None: nothing to take."""

    @abc.abstractmethod
    def claim_many(
        self, *, agent_id: str, capabilities: Sequence[str], lease_seconds: int, limit: int
    ) -> list[ClaimAnswer]:
        """Take up to `limit` eligible tasks in one transaction, each under its own lease. Not
        idempotent: a repeat after a lost answer takes other tasks, and the lost leases lapse."""

    @abc.abstractmethod
    def idle_reason(self, capabilities: Sequence[str]) -> IdleReason:
        """Why a claimer offering `capabilities` finds nothing to claim now."""

    @abc.abstractmethod
    def get(self, task_id: str) -> TaskDetail:
        """One task, its holders included; `TASK_NOT_FOUND` when there is none."""

    @abc.abstractmethod
    def events(self, task_id: str) -> list[EventView]:
        """A task's events in order; `TASK_NOT_FOUND` when there is no such task."""

    @abc.abstractmethod
    def history(self, task_id: str) -> list[HistoryEntry]:
        """A task's timeline from its sealed events; `TASK_NOT_FOUND` when there is none."""

    @abc.abstractmethod
    def list_tasks(
        self, status: str | None = None, *, limit: int = 100, agent: str | None = None
    ) -> list[TaskView]:
        """Tasks of one status, or all; with `agent`, those it held in any attempt."""

    def create_task(self, mapping: Mapping[str, Any], *, idempotency_key: str) -> CreateAnswer:
        """Enqueue one task (`TASK_CREATED`); `task_id` is generated when absent."""
        command = {"task": mapping, "idempotency_key": idempotency_key}
        return self._apply(TaskCreateCommand.from_mapping(command))

    def create_tasks(self, items: Iterable[tuple[Mapping[str, Any], str]]) -> list[CreateAnswer]:
        """Enqueue (task, idempotency key) pairs in one transaction, all or none."""
        pairs = listed(items)
        shape = "(task mapping, key) pairs"
        return self._apply_all(structure_batch(pairs, TaskCreateCommand.from_pair, shape=shape))

    def heartbeat(self, task_id: str, *, lease_token: str, lease_seconds: int) -> HeartbeatAnswer:
        """Extend the lease (`TASK_HEARTBEAT`): `lease_expires_at` becomes now + lease_seconds."""
        fields = {"task_id": task_id, "lease_token": lease_token, "lease_seconds": lease_seconds}
        return self._apply(HeartbeatRequest.from_mapping(fields))

    def release(self, task_id: str, *, lease_token: str, reason: str) -> ReleaseAnswer:
        """Give the lease back (`TASK_RELEASED`): the task is QUEUED again at once, or FAILED
        when that was its last attempt, since the released attempt stays counted."""
        fields = {"task_id": task_id, "lease_token": lease_token, "reason": reason}
        return self._apply(ReleaseRequest.from_mapping(fields))

    def submit_result(
        self,
        task_id: str,
        *,
        lease_token: str,
        result: Any,
        idempotency_key: str,
        usage: Any = None,
    ) -> SubmitAnswer:
        """Hand the result back (`RESULT_SUBMITTED`); `usage`, what the attempt spent, is held
        against the task's budget."""
        fields = {
            "task_id": task_id,
            "lease_token": lease_token,
            "result": result,
            "idempotency_key": idempotency_key,
            "usage": usage,
        }
        return self._apply(SubmitRequest.from_mapping(fields))

    def verify(
        self,
        task_id: str,
        *,
        decision: str,
        reason: str,
        idempotency_key: str,
        expected_result_digest: str | None = None,
    ) -> VerifyAnswer:
        """Judge a SUBMITTED result (`TASK_VERIFIED`): SUCCEEDED, NEEDS_REWORK (back to QUEUED,
        or FAILED when attempts are used up) or FAILED."""
        fields = {
            "task_id": task_id,
            "decision": decision,
            "reason": reason,
            "idempotency_key": idempotency_key,
            "expected_result_digest": expected_result_digest,
        }
        return self._apply(VerifyRequest.from_mapping(fields))

    def cancel(self, task_id: str, *, reason: str, idempotency_key: str) -> CancelAnswer:
        """Cancel a task in any non-terminal state (`TASK_CANCELLED`); its lease is released."""
        fields = {"task_id": task_id, "reason": reason, "idempotency_key": idempotency_key}
        return self._apply(CancelRequest.from_mapping(fields))

    def retry(
        self, task_id: str, *, reason: str, idempotency_key: str, extra_attempts: int = 1
    ) -> RetryAnswer:
        """Send a FAILED or CANCELLED task back to QUEUED, its `max_attempts` raised by
        `extra_attempts`."""
        fields = {
            "task_id": task_id,
            "reason": reason,
            "idempotency_key": idempotency_key,
            "extra_attempts": extra_attempts,
        }
        return self._apply(RetryRequest.from_mapping(fields))
