"""The task lifecycle as data, so that every rule is one row a reader can check: `TASK_TRANSITIONS`
maps (status, outcome) to the next status; a pair not in it is `INVALID_TRANSITION`."""

from __future__ import annotations

import enum
from collections.abc import Callable, Mapping
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, Final, Literal, NamedTuple

import attrs
from aios_ledger.core.errors import LedgerError
from aios_ledger.core.jsonvalue import JsonValue
from aios_ledger.core.log.plan import Decision
from aios_ledger.core.tasks.modes import VerifyDecision
from aios_ledger.core.tasks.requests import TaskRequest

if TYPE_CHECKING:
    from aios_ledger.core.tasks.records import TaskRow


class TaskStatus(enum.StrEnum):
    QUEUED = "QUEUED"
    CLAIMED = "CLAIMED"
    SUBMITTED = "SUBMITTED"
    SUCCEEDED = "SUCCEEDED"
    FAILED = "FAILED"
    CANCELLED = "CANCELLED"
    PAUSED = "PAUSED"  # held out of the queue by its owner until resumed


class TaskOperation(enum.StrEnum):
    """The outcomes of the operations: each is a column of `TASK_TRANSITIONS`."""

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
    PAUSE = "pause"
    RESUME = "resume"


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
            # an owner holds a waiting task out of the queue, and lets it back in
            (_S.QUEUED, _O.PAUSE): _S.PAUSED,
            (_S.PAUSED, _O.RESUME): _S.QUEUED,
            (_S.PAUSED, _O.CANCEL): _S.CANCELLED,
        }
    )
)

# A status only an operator's `retry` moves a task out of.
TERMINAL_STATUSES = frozenset(
    status
    for status in TaskStatus
    if not any(
        source == status and operation != TaskOperation.RETRY
        for source, operation in TASK_TRANSITIONS
    )
)

# The same table keyed by plain text, as rows store it (a StrEnum member hashes as its text).
_NEXT: Mapping[tuple[str, str], TaskStatus] = {
    key: value for key, value in TASK_TRANSITIONS.items()
}


def next_task_status(status: str, operation: TaskOperation) -> TaskStatus:
    """The status after `operation` on a task of `status`, or `INVALID_TRANSITION`."""
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
    """A released attempt counts, so that a task whose worker keeps being stopped ends."""
    return TaskOperation.RELEASE if attempts_left else TaskOperation.RELEASE_EXHAUSTED


# --- the operations -------------------------------------------------------------------------------


TASK_CREATED = "TASK_CREATED"
TASK_CLAIMED = "TASK_CLAIMED"
TASK_HEARTBEAT = "TASK_HEARTBEAT"
RESULT_SUBMITTED = "RESULT_SUBMITTED"
TASK_VERIFIED = "TASK_VERIFIED"
TASK_LEASE_EXPIRED = "TASK_LEASE_EXPIRED"
TASK_CANCELLED = "TASK_CANCELLED"
TASK_RELEASED = "TASK_RELEASED"
TASK_REQUEUED = "TASK_REQUEUED"
TASK_PAUSED = "TASK_PAUSED"
TASK_RESUMED = "TASK_RESUMED"


class Lease(enum.StrEnum):
    """What an operation does to the task's lease (its holder, token digest and expiry)."""

    TAKE = "take"  # the claimer's: its agent, its token's sha256, now + lease_seconds
    EXTEND = "extend"  # the expiry moves to now + lease_seconds
    END = "end"  # none any more: no holder, no token, no expiry
    KEEP = "keep"  # as it was (a task that holds none keeps none)


class EventAgent(enum.StrEnum):
    """Whose agent an operation's event names (`events.agent_id`)."""

    HOLDER = "holder"  # the agent that held the task before the operation
    CLAIMER = "claimer"  # the request's agent
    NOBODY = "nobody"  # none: an owner's or a reviewer's write, or the ledger's own


class Step(NamedTuple):
    """One move of one task, as its event's and answer's facts read it."""

    before: TaskRow
    after: TaskRow
    request: Any


@attrs.frozen
class Fact:
    """One entry of an event's payload or an answer: its key, and how it is read."""

    key: str
    read: Callable[[Step], JsonValue]


ATTEMPT = Fact("attempt", lambda step: step.after.attempt)
LEASE_EXPIRES_AT = Fact("lease_expires_at", lambda step: step.after.lease_expires_at)
PASSED_LEASE = Fact("lease_expires_at", lambda step: step.before.lease_expires_at)
REASON = Fact("reason", lambda step: step.request.reason)
NEXT_STATE = Fact("next_state", lambda step: step.after.status)
PREVIOUS_STATUS = Fact("previous_status", lambda step: step.before.status)
MAX_ATTEMPTS = Fact("max_attempts", lambda step: step.after.max_attempts)
RESULT_DIGEST = Fact("result_digest", lambda step: step.after.result_digest)
IDEMPOTENCY_KEY = Fact("idempotency_key", lambda step: step.request.idempotency_key)
DECISION = Fact("decision", lambda step: step.request.decision)


class Scope(enum.Enum):
    """Which rows an operation decides on, and so how the ledger reads them."""

    TASK = "task"  # the task its request names (locked), its chain's tip, its key's answer
    QUEUE = "queue"  # a claim: its task or the candidates, and the passed leases it takes over
    LEASES = "leases"  # an expiry: the claimed tasks whose leases have passed


@attrs.frozen
class StateRead:
    """A named read made with the task in one round trip; its first row fills `into`."""

    into: str
    statement: str
    params: Mapping[str, object]


def no_reads(request: Any) -> tuple[StateRead, ...]:
    return ()


@attrs.frozen(kw_only=True)
class TaskTransition:
    """One operation of the lifecycle, a row of `TASK_OPERATIONS`: all the ledger and its entry
    points know of it."""

    name: str
    request: type[TaskRequest[Any]]
    scope: Scope = Scope.TASK
    reads: Callable[[Any], tuple[StateRead, ...]] = no_reads
    shell_inputs: tuple[str, ...] = ()
    decide: Callable[..., Decision[Any] | None]
    event: str
    keyed: bool = True  # bound to an idempotency key
    fenced: bool = False  # only the live lease's holder may ask
    lease: Lease
    outcome: TaskOperation | Callable[[TaskRow, Any], TaskOperation]
    payload: tuple[Fact, ...]
    answer: tuple[Fact, ...] = ()
    agent: EventAgent = EventAgent.NOBODY
    role: str | None
    route: str | None
    command: str | None
    tool: str | None = None
    summary: str
    before_projection: bool = False

    def outcome_of(self, task: TaskRow, request: Any) -> TaskOperation:
        outcome = self.outcome
        return outcome if isinstance(outcome, TaskOperation) else outcome(task, request)

    def next_status(self, task: TaskRow, request: Any) -> TaskStatus:
        return next_task_status(task.status, self.outcome_of(task, request))
