"""What the task ledger answers: `TypedDict`s, plain JSON at run time and checked shapes for
mypy."""

from __future__ import annotations

from typing import Any, NotRequired, TypeAlias, TypedDict, cast

from aios_ledger.core.actors import actor_public
from aios_ledger.core.errors import LedgerError
from aios_ledger.core.jsonvalue import JsonObject, JsonValue, loads_document
from aios_ledger.core.log.records import EventRow
from aios_ledger.core.tasks.records import TaskRow

# A JSON column as a reader sees it (for a corrupt row, what the column held); Any, so that a
# reader indexes a document it knows the shape of without narrowing every level.
ParsedColumn: TypeAlias = Any


class TaskSummary(TypedDict):
    """The fields every write answer about a task carries."""

    task_id: str
    status: str
    revision: int
    attempt: int
    max_attempts: int
    claimed_by: str | None
    lease_expires_at: str | None


_SUMMARY_COLUMNS = tuple(TaskSummary.__annotations__)


class CreateAnswer(TaskSummary):
    """`awaiting_projection`: a governed task no worker may claim before its projection."""

    priority: int
    awaiting_projection: NotRequired[bool]
    idempotent: bool


class ClaimAnswer(TaskSummary):
    """The claimed task, its lease token (shown once), envelope, input and budget."""

    goal: str
    instructions: str
    success_criteria: JsonValue
    constraints: JsonValue
    required_capabilities: list[str]
    deadline: str | None
    priority: int
    envelope: JsonObject | None
    runtime_input: JsonValue
    budget: JsonObject | None
    lease_token: str
    idempotent: bool


class HeartbeatAnswer(TaskSummary):
    idempotent: bool


class ReleaseAnswer(TaskSummary):
    idempotent: bool


class SubmitAnswer(TaskSummary):
    """`over_budget` when usage was reported; true leaves the result for a person."""

    result_digest: str
    over_budget: NotRequired[bool]
    idempotent: bool


class VerifyAnswer(TaskSummary):
    """`decision` is a `VerifyDecision` value, `next_state` the status it led to."""

    decision: str
    next_state: str
    result_digest: str | None
    idempotent: bool


class MoveAnswer(TaskSummary):
    """An owner's move: the task's summary, its status before, and `idempotent`."""

    previous_status: str
    idempotent: bool


CancelAnswer: TypeAlias = MoveAnswer
RetryAnswer: TypeAlias = MoveAnswer


class ExpireAnswer(TypedDict):
    """The tasks whose leases expired (each back to QUEUED, or FAILED when used up)."""

    expired: list[TaskSummary]
    count: int


class TaskView(TypedDict):
    """A `tasks` row as a reader sees it, JSON parsed, with `last_holder`."""

    task_id: str
    goal: str
    instructions: str
    success_criteria: ParsedColumn
    required_capabilities: ParsedColumn
    constraints: ParsedColumn
    metadata: ParsedColumn
    deadline: str | None
    priority: int
    max_attempts: int
    attempt: int
    status: str
    claimed_by: str | None
    lease_token_hash: str | None
    lease_expires_at: str | None
    result: ParsedColumn
    result_digest: str | None
    result_idempotency_key: str | None
    verification: ParsedColumn
    revision: int
    created_at: str
    updated_at: str
    verification_mode: str
    retry: RetryPolicyView
    not_before: str | None
    awaiting_projection: bool
    last_holder: str | None


class HolderView(TypedDict):
    """One attempt's holder: the attempt, the agent that claimed it, and when."""

    attempt: int
    agent_id: str | None
    claimed_at: str


class TaskDetail(TaskView):
    """One task as `get` answers it, with the holder of every attempt in claim order."""

    holders: list[HolderView]


class RetryPolicyView(TypedDict):
    base_seconds: int
    max_seconds: int


class EventView(TypedDict):
    """An `events` row as a reader sees it, its payload parsed as `TaskView` parses."""

    event_id: int
    task_id: str | None
    agent_id: str | None
    event_type: str
    payload: ParsedColumn
    created_at: str
    # Who caused it (`core.actors`): None for an event written before events named actors.
    actor: JsonObject | None


def task_summary(task: TaskRow) -> TaskSummary:
    """The task's columns `TaskSummary` names, in its order."""
    return cast(TaskSummary, {name: getattr(task, name) for name in _SUMMARY_COLUMNS})


def task_view(task: TaskRow, last_holder: str | None) -> TaskView:
    """The task's columns in order, each `*_json` parsed under its name without the suffix;
    `last_holder` as `core.tasks.holders.last_holder` finds it."""
    view: dict[str, Any] = {}
    for column, value in task._asdict().items():
        if column.endswith("_json"):
            view[column.removesuffix("_json")] = _parsed(value, column)
        elif column == "retry_base_seconds":
            view["retry"] = {"base_seconds": value, "max_seconds": task.retry_max_seconds}
        elif column not in ("retry_max_seconds", "seq"):
            view[column] = value
    view["awaiting_projection"] = bool(task.awaiting_projection)
    view["last_holder"] = last_holder
    return cast(TaskView, view)


def event_view(event: EventRow) -> EventView:
    return {
        "event_id": event.event_id,
        "task_id": event.task_id,
        "agent_id": event.agent_id,
        "event_type": event.event_type,
        "payload": _parsed(event.payload_json, "payload_json"),
        "created_at": event.created_at,
        "actor": actor_public(event.actor),
    }


def _parsed(value: object, column: str) -> ParsedColumn:
    """A JSON column's document; a value that is not JSON text (a corrupt row) as it is."""
    if not isinstance(value, str):
        return value
    try:
        return loads_document(value, what=column)
    except LedgerError:
        return value
