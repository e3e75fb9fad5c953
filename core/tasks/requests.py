"""Strict request records of the task lifecycle. `public()`, the form a key is bound to, holds no
lease token but its sha256 and never the acting `agent_id`."""

from __future__ import annotations

import hashlib
import re
from typing import Annotated, Any, ClassVar, Generic, NewType, Self, TypeVar

import attrs
from aios_ledger.core.errors import LedgerError
from aios_ledger.core.jsonvalue import JsonObject, JsonValue
from aios_ledger.core.kinds import (
    Between,
    Identifier,
    JsonArrayValue,
    JsonObjectValue,
    RouteIdentifier,
    Sha256Hex,
    Text,
    TimestampText,
    json_value_check,
    text_check,
)
from aios_ledger.core.structuring import (
    NOT_PUBLIC,
    FieldRefused,
    Structured,
    converter,
    kind_schema,
    register_kind,
    structure,
    unstructure,
)
from aios_ledger.core.tasks.answers import (
    CancelAnswer,
    ClaimAnswer,
    CreateAnswer,
    ExpireAnswer,
    HeartbeatAnswer,
    MoveAnswer,
    ReleaseAnswer,
    RetryAnswer,
    SubmitAnswer,
    VerifyAnswer,
)
from aios_ledger.core.tasks.backoff import RetryPolicy
from aios_ledger.core.tasks.budgets import TaskBudget, Usage
from aios_ledger.core.tasks.modes import VerificationMode, VerifyDecision

MAX_GOAL = 4096
MAX_INSTRUCTIONS = 65536
MAX_REASON = 1000
MAX_CAPABILITIES = 64
MAX_OFFERED_CAPABILITIES = 256
MAX_PRIORITY = 1_000_000
MAX_ATTEMPTS = 1000
MAX_LEASE_SECONDS = 7 * 24 * 3600
MAX_CLAIM_BATCH = 256
MAX_EXPIRE_BATCH = 10_000
DEFAULT_EXPIRE_BATCH = 200
DEFAULT_PRIORITY = 0
DEFAULT_MAX_ATTEMPTS = 3
MAX_EXTRA_ATTEMPTS = 100
LEASE_TOKEN = re.compile(r"^[A-Za-z0-9._~+/=-]{16,256}$")
RESERVED_METADATA = ("execution", "budget")

LeaseToken = NewType("LeaseToken", str)
TaskMetadata = NewType("TaskMetadata", dict[str, JsonValue])
RequiredCapabilities = NewType("RequiredCapabilities", list[Identifier])
OfferedCapabilities = NewType("OfferedCapabilities", list[Identifier])

A_co = TypeVar("A_co", covariant=True)

LeaseSeconds = Annotated[int, Between(1, MAX_LEASE_SECONDS)]
Reason = Annotated[str, Text(max_length=MAX_REASON)]


def lease_token_sha256(token: str) -> str:
    """What the database keeps of a lease token: its sha256, hex."""
    return hashlib.sha256(token.encode("utf-8")).hexdigest()


_lease_token = text_check(LEASE_TOKEN.fullmatch, "must be 16-256 characters of [A-Za-z0-9._~+/=-]")


_json_object = json_value_check(dict, "object")


def _metadata(value: Any) -> TaskMetadata:
    checked: JsonObject = _json_object(value)
    reserved = [key for key in RESERVED_METADATA if key in checked]
    if reserved:
        raise FieldRefused(
            f"{reserved} are reserved: an execution envelope is only set by the governed "
            "projection, a budget by the task's own `budget` field"
        )
    return TaskMetadata(checked)


def _register_capabilities(kind: Any, limit: int) -> None:
    """A list of at most `limit` capability names, kept sorted and once each."""
    names = converter.get_structure_hook(list[Identifier])

    def check(value: Any) -> list[Identifier]:
        if not isinstance(value, list):
            raise FieldRefused(f"must be a list of capability names, got {type(value).__name__}")
        if len(value) > limit:
            raise FieldRefused(f"holds more than {limit} capabilities")
        return sorted(set(names(value, list[Identifier])))

    schema = {"type": "array", "maxItems": limit, "items": kind_schema(Identifier)}
    register_kind(kind, check, schema=schema)


register_kind(LeaseToken, _lease_token, schema={"type": "string", "pattern": LEASE_TOKEN.pattern})
register_kind(
    TaskMetadata,
    _metadata,
    schema={"type": "object", "propertyNames": {"not": {"enum": list(RESERVED_METADATA)}}},
)
_register_capabilities(RequiredCapabilities, MAX_CAPABILITIES)
_register_capabilities(OfferedCapabilities, MAX_OFFERED_CAPABILITIES)


class TaskRequest(Generic[A_co]):
    """A request of the task lifecycle that the ledger answers with an `A_co`."""

    __slots__ = ()
    # The name its refusals give it: its operation's (`heartbeat: lease_seconds: ...`).
    what: ClassVar[str]

    @classmethod
    def from_mapping(cls, raw: object) -> Self:
        """The record `raw` describes: the one structuring step of every entry point."""
        request = structure(raw, cls, what=cls.what)
        request.check()
        return request

    def check(self) -> None:
        """The request's rules across fields, once its fields are structured."""


class _AllPublic:
    """A keyed request whose canonical form is every public field, as structured."""

    __slots__ = ()

    def public(self) -> JsonObject:
        return unstructure(self)


# `agent_id`: who acts, as the edge knows it; given, the task must be that agent's, else the
# lease alone holds. Never part of the canonical form.


@attrs.frozen(kw_only=True)
class TaskCreateRequest(Structured):
    """A new task; every field but `goal` and `instructions` has a default."""

    WHAT = "task"

    task_id: RouteIdentifier | None = None
    goal: Annotated[str, Text(max_length=MAX_GOAL)]
    instructions: Annotated[str, Text(max_length=MAX_INSTRUCTIONS)]
    success_criteria: JsonArrayValue = attrs.field(factory=lambda: JsonArrayValue([]))
    required_capabilities: RequiredCapabilities = attrs.field(
        factory=lambda: RequiredCapabilities([])
    )
    constraints: JsonObjectValue = attrs.field(factory=lambda: JsonObjectValue({}))
    metadata: TaskMetadata = attrs.field(factory=lambda: TaskMetadata({}))
    deadline: TimestampText | None = None
    priority: Annotated[int, Between(-MAX_PRIORITY, MAX_PRIORITY)] = DEFAULT_PRIORITY
    max_attempts: Annotated[int, Between(1, MAX_ATTEMPTS)] = DEFAULT_MAX_ATTEMPTS
    verification: VerificationMode = VerificationMode.REVIEWER
    retry: RetryPolicy = attrs.field(factory=RetryPolicy)
    not_before: TimestampText | None = None
    # What the task may spend (`core/tasks/budgets.py`); its attempts limit is `max_attempts`.
    budget: TaskBudget | None = None
    # A governed task waits for its initial execution projection before any claim.
    governed: bool = False

    def public(self) -> JsonObject:
        """The canonical form; day two's fields only when set, so that old keys replay."""
        form = unstructure(self)
        for name, default in DAY_TWO_DEFAULTS.items():
            if form[name] == default:
                del form[name]
        return form


DAY_TWO_DEFAULTS: dict[str, JsonValue] = {
    "verification": VerificationMode.REVIEWER.value,
    "retry": unstructure(RetryPolicy()),
    "not_before": None,
    "budget": None,
    "governed": False,
}


@attrs.frozen
class TaskCreateCommand(TaskRequest[CreateAnswer]):
    """A task to create and the idempotency key it is filed under: `{"task": {...},
    "idempotency_key": ...}`, one entry of `task create`, or a `(task, key)` pair."""

    task: TaskCreateRequest
    idempotency_key: Identifier

    what = "create"

    @classmethod
    def from_pair(cls, item: object) -> TaskCreateCommand:
        if not isinstance(item, tuple | list) or len(item) != 2:
            raise LedgerError("FIELDS_INVALID", "each item must be a (task mapping, key) pair")
        return cls.from_mapping({"task": item[0], "idempotency_key": item[1]})


@attrs.frozen
class ClaimRequest(TaskRequest[ClaimAnswer | None]):
    """A claim. An idempotent claim (with a key) needs the claimer's own `lease_token`."""

    agent_id: Identifier
    capabilities: OfferedCapabilities
    lease_seconds: LeaseSeconds
    task_id: Identifier | None = None
    idempotency_key: Identifier | None = attrs.field(default=None, metadata=NOT_PUBLIC)
    lease_token: LeaseToken | None = attrs.field(default=None, repr=False, metadata=NOT_PUBLIC)

    what = "claim"

    def check(self) -> None:
        if self.idempotency_key is not None and self.lease_token is None:
            raise LedgerError(
                "LEASE_TOKEN_REQUIRED",
                "an idempotent claim must bring its own lease_token: the ledger keeps only "
                "its digest and could not give a generated one back on a replay",
            )

    def public(self, lease_token: str) -> JsonObject:
        return {**unstructure(self), "lease_token_sha256": lease_token_sha256(lease_token)}


@attrs.frozen
class ClaimBatchRequest(TaskRequest[list[ClaimAnswer]]):
    """Up to `limit` claims at once, each with a lease token drawn by the ledger (so no key)."""

    agent_id: Identifier
    capabilities: OfferedCapabilities
    lease_seconds: LeaseSeconds
    limit: Annotated[int, Between(1, MAX_CLAIM_BATCH)]

    what = "claim"

    def claim(self) -> ClaimRequest:
        """The claim each of the batch's tasks is taken with."""
        return ClaimRequest(
            agent_id=self.agent_id, capabilities=self.capabilities, lease_seconds=self.lease_seconds
        )


@attrs.frozen
class HeartbeatRequest(TaskRequest[HeartbeatAnswer]):
    task_id: Identifier
    lease_token: LeaseToken = attrs.field(repr=False, metadata=NOT_PUBLIC)
    lease_seconds: LeaseSeconds
    agent_id: Identifier | None = attrs.field(default=None, metadata=NOT_PUBLIC)

    what = "heartbeat"


@attrs.frozen
class ReleaseRequest(TaskRequest[ReleaseAnswer]):
    """A holder giving its lease back before the end (a worker that stops): why, in `reason`."""

    task_id: Identifier
    lease_token: LeaseToken = attrs.field(repr=False, metadata=NOT_PUBLIC)
    reason: Reason
    agent_id: Identifier | None = attrs.field(default=None, metadata=NOT_PUBLIC)

    what = "release"


@attrs.frozen
class SubmitRequest(TaskRequest[SubmitAnswer]):
    task_id: Identifier
    lease_token: LeaseToken = attrs.field(repr=False, metadata=NOT_PUBLIC)
    result: JsonObjectValue
    idempotency_key: Identifier = attrs.field(metadata=NOT_PUBLIC)
    agent_id: Identifier | None = attrs.field(default=None, metadata=NOT_PUBLIC)
    # Beside the result rather than in it: a result contract admits no field it does not name.
    usage: Usage | None = None

    what = "submit"

    def public(self) -> JsonObject:
        """The canonical form; `usage` only when reported, so that old keys replay."""
        form = unstructure(self)
        if self.usage is None:
            del form["usage"]
        else:
            form["usage"] = self.usage.public()
        return {**form, "lease_token_sha256": lease_token_sha256(self.lease_token)}


@attrs.frozen
class VerifyRequest(_AllPublic, TaskRequest[VerifyAnswer]):
    """A judgement of a submitted result; `agent_id`: the reviewer, as the edge knows it (an
    HTTP token's name), which may not be the name that submitted the result (`SELF_REVIEW`)."""

    task_id: Identifier
    decision: VerifyDecision
    reason: Reason
    idempotency_key: Identifier = attrs.field(metadata=NOT_PUBLIC)
    expected_result_digest: Sha256Hex | None = None
    agent_id: Identifier | None = attrs.field(default=None, metadata=NOT_PUBLIC)

    what = "verify"


@attrs.frozen
class _OwnerMove(_AllPublic):
    """An owner's keyed move of one task, and why."""

    task_id: Identifier
    reason: Reason
    idempotency_key: Identifier = attrs.field(metadata=NOT_PUBLIC)


@attrs.frozen
class CancelRequest(_OwnerMove, TaskRequest[CancelAnswer]):
    what = "cancel"


@attrs.frozen
class RetryRequest(_OwnerMove, TaskRequest[RetryAnswer]):
    """Send a FAILED or CANCELLED task back to the queue with `extra_attempts` more attempts."""

    extra_attempts: Annotated[int, Between(1, MAX_EXTRA_ATTEMPTS)] = 1

    what = "retry"


@attrs.frozen
class PauseRequest(_OwnerMove, TaskRequest[MoveAnswer]):
    """Hold a QUEUED task out of the queue (PAUSED): no claim takes it until it is resumed. A
    task in another status is `INVALID_TRANSITION`: a CLAIMED one's holder is at work on it
    (cancel it to stop it, or pause it once it is back in the queue)."""

    what = "pause"


@attrs.frozen
class ResumeRequest(_OwnerMove, TaskRequest[MoveAnswer]):
    """Let a PAUSED task back into the queue (QUEUED, with its attempts and schedule as they
    were); a task in another status is `INVALID_TRANSITION`."""

    what = "resume"


@attrs.frozen
class ExpireRequest(TaskRequest[ExpireAnswer]):
    """Expire the leases that have passed, at most `limit` of them in one transaction."""

    limit: Annotated[int, Between(1, MAX_EXPIRE_BATCH)] = DEFAULT_EXPIRE_BATCH

    what = "expire"
