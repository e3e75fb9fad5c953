"""Decisions of the task lifecycle. Every operation checks in one order so that refusals are
predictable: the key's replay, the task, the holder's live lease, `TASK_TRANSITIONS`, then its own
rules."""

from __future__ import annotations

import functools
import itertools
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, Protocol, TypeVar, cast

import attrs
from aios_ledger.core.actors import Actor
from aios_ledger.core.digests import sha256_of_canonical
from aios_ledger.core.errors import LedgerError
from aios_ledger.core.jsonvalue import JsonObject, JsonValue, encode_checked
from aios_ledger.core.log.idempotency import IdempotencyRow, RecordedAnswerRow
from aios_ledger.core.log.plan import (
    Decision,
    Replay,
    WritePlan,
    replay_or_conflict,
    request_digest,
    sealed_plan,
    stored_answer,
)
from aios_ledger.core.log.rows import RowImage
from aios_ledger.core.log.tail import EventAppend, LogTail
from aios_ledger.core.statements import SqlWrite, Statement, guarded_update
from aios_ledger.core.tasks.answers import (
    ClaimAnswer,
    CreateAnswer,
    ExpireAnswer,
    task_summary,
)
from aios_ledger.core.tasks.attempts import (
    RunIdentity,
    evidence_prompt,
    evidence_run,
    evidence_session,
)
from aios_ledger.core.tasks.backoff import require_jitter, retry_not_before
from aios_ledger.core.tasks.budgets import (
    NO_SPEND,
    SpendRow,
    SpendTotals,
    budget_of,
    over_budget,
    over_budget_mark,
    spend_key,
)
from aios_ledger.core.tasks.modes import VerificationMode
from aios_ledger.core.tasks.records import TaskRow, require_task
from aios_ledger.core.tasks.requests import (
    DAY_TWO_DEFAULTS,
    ClaimBatchRequest,
    ClaimRequest,
    ExpireRequest,
    RetryRequest,
    SubmitRequest,
    TaskCreateCommand,
    TaskCreateRequest,
    VerifyRequest,
    lease_token_sha256,
)
from aios_ledger.core.tasks.results import check_task_result, task_envelope
from aios_ledger.core.tasks.transitions import (
    ABSENT,
    EventAgent,
    Lease,
    Step,
    TaskOperation,
    TaskStatus,
    TaskTransition,
    next_task_status,
)
from aios_ledger.core.tasks.verification import Judgement, automatic_judgement
from aios_ledger.core.timestamps import Timestamp

R = TypeVar("R")


@attrs.frozen
class TaskState:
    """What a decision on one task reads under the write lock (None: no such row)."""

    task: TaskRow | None
    tail: LogTail
    prior: IdempotencyRow | None = None
    next_seq: int | None = None
    result_author: str | None = None
    spent: SpendTotals | None = None
    proposal: AttemptProposal | None = None
    candidates: tuple[TaskRow, ...] = ()
    passed: tuple[TaskRow, ...] = ()


@attrs.frozen
class ExpiryState:
    """CLAIMED tasks whose leases may have passed, and the log's tail."""

    tasks: tuple[TaskRow, ...]
    tail: LogTail


class AttemptProposal(Protocol):
    """An attempt's proposal as a submit reads it, so that tasks need not import git."""

    @property
    def task_id(self) -> str: ...

    @property
    def attempt(self) -> int: ...

    def require_stated_work(self, result: Mapping[str, JsonValue]) -> None: ...


@attrs.frozen
class DecisionInputs:
    """What the shell drew or configured for a decision (None: not given), and who acts."""

    actor: Actor
    task_id: str | None = None
    lease_token: str | None = None
    lease_tokens: tuple[str, ...] = ()
    jitter: float | None = None
    contracts: Mapping[str, Mapping[str, object]] | None = None
    grant: frozenset[str] | None = None

    def need(self, name: str, operation: str) -> Any:
        value = getattr(self, name)
        if value is None:
            raise ValueError(f"a {operation} decision needs {name}")
        return value


# --- shared pieces --------------------------------------------------------------------------------


def _lease_columns(
    lease: Lease, request: Any, now: Timestamp, lease_token: str | None
) -> dict[str, Any]:
    if lease is Lease.END:
        return {"claimed_by": None, "lease_token_hash": None, "lease_expires_at": None}
    if lease is Lease.EXTEND:
        return {"lease_expires_at": now.plus_seconds(request.lease_seconds).text}
    if lease is Lease.TAKE:
        assert lease_token is not None
        return {
            "claimed_by": request.agent_id,
            "lease_token_hash": lease_token_sha256(lease_token),
            "lease_expires_at": now.plus_seconds(request.lease_seconds).text,
        }
    return {}


def _recorded(
    event: EventAppend,
    key: str,
    operation: str,
    subject: str,
    digest: str,
    answer: Mapping[str, object],
    now: Timestamp,
) -> tuple[SqlWrite, EventAppend]:
    row = RecordedAnswerRow(
        idempotency_key=key,
        operation=operation,
        subject=subject,
        request_sha256=digest,
        response_json=stored_answer(answer),
        created_at=now.text,
    )
    # The event also seals the stored answer, so that `verify` finds one changed by hand.
    sealed = attrs.evolve(event, rows=(*event.rows, row.image()))
    return SqlWrite(Statement.TASK_IDEMPOTENCY_INSERT, row._asdict()), sealed


def _event(
    task: TaskRow,
    kind: str,
    payload: JsonObject,
    agent_id: str | None,
    *,
    before: TaskRow | None,
    actor: Actor,
) -> EventAppend:
    """The event of a transition that wrote `task` over `before`, its seal covering the row."""
    return EventAppend(
        task_id=task.task_id,
        agent_id=agent_id,
        event_type=kind,
        payload=payload,
        created_at=task.updated_at,
        written=task.written(before),
        actor=actor,
    )


def _passed(moment: str | None, now: Timestamp) -> bool:
    """Whether the stored `moment` is at or before `now` (a missing moment never passes)."""
    parsed = None if moment is None else Timestamp.parse(moment, field="stored timestamp")
    return parsed is not None and parsed.epoch_ms <= now.epoch_ms


def _check_lease(task: TaskRow, token: str, now: Timestamp) -> None:
    if task.lease_token_hash is None or task.lease_token_hash != lease_token_sha256(token):
        raise LedgerError(
            "LEASE_INVALID", f"the token does not hold the current lease of task {task.task_id!r}"
        )
    if task.lease_expires_at is None or _passed(task.lease_expires_at, now):
        raise LedgerError(
            "LEASE_EXPIRED",
            f"the lease of task {task.task_id!r} expired at {task.lease_expires_at}",
        )


def _check_holder(task: TaskRow, agent_id: str | None) -> None:
    """A task another agent holds is `NOT_TASK_HOLDER`, whatever token comes with it."""
    if agent_id is not None and task.claimed_by is not None and task.claimed_by != agent_id:
        raise LedgerError("NOT_TASK_HOLDER", f"task {task.task_id!r} is held by another agent")


def _agent_of(agent: EventAgent, before: TaskRow, request: Any) -> str | None:
    if agent is EventAgent.HOLDER:
        return before.claimed_by
    if agent is EventAgent.CLAIMER:
        return cast(str, request.agent_id)
    return None


@attrs.frozen
class _Move:
    after: TaskRow
    write: SqlWrite
    event: EventAppend


def _move(
    row: TaskTransition,
    task: TaskRow,
    request: Any,
    now: Timestamp,
    status: TaskStatus,
    *,
    changes: Mapping[str, Any] | None = None,
    payload: Callable[[Step], JsonObject] | None = None,
    lease_token: str | None = None,
    actor: Actor,
) -> _Move:
    after = task._replace(
        status=status,
        **_lease_columns(row.lease, request, now, lease_token),
        **(changes or {}),
        revision=task.revision + 1,
        updated_at=now.text,
    )
    step = Step(task, after, request)
    facts: JsonObject = {fact.key: fact.read(step) for fact in row.payload}
    if payload is not None:
        facts.update(payload(step))
    event = _event(
        after, row.event, facts, _agent_of(row.agent, task, request), before=task, actor=actor
    )
    return _Move(after, guarded_update(Statement.TASKS_CAS_UPDATE, after, task.revision), event)


def _answer(row: TaskTransition, before: TaskRow, after: TaskRow, request: Any) -> dict[str, Any]:
    step = Step(before, after, request)
    return {
        **task_summary(after),
        **{fact.key: fact.read(step) for fact in row.answer},
        "idempotent": False,
    }


def typed_as(request: object, kind: type[R]) -> R:
    if not isinstance(request, kind):
        raise LedgerError(
            "FIELDS_INVALID", f"a {kind.__name__} is needed, not {type(request).__name__}"
        )
    return request


# --- an operation on one named task ---------------------------------------------------------------


@attrs.frozen
class Rules:
    """What an operation decides beyond its row, each optional."""

    prepare: Callable[[DecisionInputs, str], None] | None = None
    check: Callable[[TaskRow, Any, TaskState, DecisionInputs, Timestamp], None] | None = None
    changes: (
        Callable[[TaskRow, Any, DecisionInputs, Timestamp, TaskStatus], Mapping[str, Any]] | None
    ) = None
    payload: Callable[[Step], JsonObject] | None = None
    records: Callable[[TaskRow, Any, TaskState, Timestamp], _Records | None] | None = None
    then: Callable[[TaskRow, Any, DecisionInputs, Timestamp], _Move | None] | None = None


@attrs.frozen
class _Records:
    """Rows beside the task's, sealed by its event; `held` stops the automatic verification."""

    writes: tuple[SqlWrite, ...]
    rows: tuple[RowImage, ...]
    facts: JsonObject
    answer: JsonObject
    held: bool


def decide_on_task(rules: Rules) -> Callable[..., Decision[Any] | None]:
    return functools.partial(_decide_one, rules=rules)


def _decide_one(
    row: TaskTransition,
    state: TaskState | ExpiryState,
    request: Any,
    inputs: DecisionInputs,
    now: Timestamp,
    *,
    rules: Rules,
) -> Decision[Any]:
    state = typed_as(state, TaskState)
    if rules.prepare is not None:
        rules.prepare(inputs, row.name)
    digest = request_digest(row.name, request.task_id, request.public()) if row.keyed else None
    if digest is not None:
        replay = replay_or_conflict(state.prior, digest, dict)
        if replay is not None:
            return replay
    task = require_task(request.task_id, state.task)
    if row.fenced:
        _check_holder(task, request.agent_id)
        _check_lease(task, request.lease_token, now)
    status = row.next_status(task, request)
    if task.awaiting_projection and not row.before_projection:
        raise awaiting_projection_refusal(task, row.name)
    if rules.check is not None:
        rules.check(task, request, state, inputs, now)
    changes = None if rules.changes is None else rules.changes(task, request, inputs, now, status)
    records = None if rules.records is None else rules.records(task, request, state, now)
    move = _move(
        row, task, request, now, status, changes=changes, payload=rules.payload, actor=inputs.actor
    )
    writes, events = [move.write], [move.event]
    if records is not None:
        writes.extend(records.writes)
        payload = {**move.event.payload, **records.facts}
        events[0] = attrs.evolve(
            move.event, payload=payload, rows=(*move.event.rows, *records.rows)
        )
    final = move.after
    if rules.then is not None and (records is None or not records.held):
        more = rules.then(move.after, request, inputs, now)
        if more is not None:
            writes.append(more.write)
            events.append(more.event)
            final = more.after
    answer = _answer(row, task, final, request)
    if records is not None:
        answer.update(records.answer)
    if digest is not None:
        write, events[-1] = _recorded(
            events[-1], request.idempotency_key, row.name, task.task_id, digest, answer, now
        )
        writes.append(write)
    return sealed_plan(writes, events, answer, tail=state.tail)


PLAIN = Rules()


# -- retry: more attempts, due at once


def _retry_changes(
    task: TaskRow, request: RetryRequest, inputs: DecisionInputs, now: Timestamp, status: TaskStatus
) -> Mapping[str, Any]:
    return {"max_attempts": task.max_attempts + request.extra_attempts, "not_before": None}


# -- submit: the result, held to its contract; judged at once when the task says so


def _need_jitter(inputs: DecisionInputs, operation: str) -> None:
    require_jitter(inputs.jitter)


def _submit_prepare(inputs: DecisionInputs, operation: str) -> None:
    _need_jitter(inputs, operation)
    inputs.need("contracts", operation)


def _submit_check(
    task: TaskRow, request: SubmitRequest, state: TaskState, inputs: DecisionInputs, now: Timestamp
) -> None:
    check_task_result(task, request.result, inputs.need("contracts", "submit"))
    proposal = state.proposal
    current = (task.task_id, task.attempt)
    if proposal is not None and (proposal.task_id, proposal.attempt) == current:
        proposal.require_stated_work(request.result)


def _submit_changes(
    task: TaskRow,
    request: SubmitRequest,
    inputs: DecisionInputs,
    now: Timestamp,
    status: TaskStatus,
) -> Mapping[str, Any]:
    result_json = encode_checked(request.result)
    return {
        "result_json": result_json,
        "result_digest": sha256_of_canonical(result_json),  # sha256_hex, from the one encoding
        "result_idempotency_key": request.idempotency_key,
    }


def _submit_then(
    submitted: TaskRow,
    request: SubmitRequest,
    inputs: DecisionInputs,
    now: Timestamp,
    *,
    judge: TaskTransition,
) -> _Move | None:
    """A task verified automatically is judged in the same plan, as the verify row would."""
    if submitted.verification_mode != VerificationMode.AUTO:
        return None
    judgement = automatic_judgement(request.result)
    status = judge.next_status(submitted, judgement)
    jitter = inputs.jitter or 0.0
    changes = _judgement_changes(
        submitted, judgement, now, jitter=jitter, status=status, automatic=True
    )
    payload = _judgement_payload(automatic=True)
    return _move(
        judge,
        submitted,
        judgement,
        now,
        status,
        changes=changes,
        payload=payload,
        actor=inputs.actor,
    )


def _submit_spend(
    task: TaskRow, request: SubmitRequest, state: TaskState, now: Timestamp
) -> _Records | None:
    """The reported usage, held to the budget; past it, recorded but left for a person."""
    usage = request.usage
    if usage is None:
        return None
    passed = over_budget(budget_of(task.metadata(), task.task_id), state.spent or NO_SPEND, usage)
    envelope = task_envelope(task)
    binding = None if envelope is None else envelope.get("binding")
    repository = binding.get("repository") if isinstance(binding, dict) else None
    spend = SpendRow(
        spend_key=spend_key(task.task_id, task.attempt),
        task_id=task.task_id,
        attempt=task.attempt,
        agent_id=task.claimed_by,
        repository=repository if isinstance(repository, str) else None,
        day=now.text[:10],
        input_tokens=usage.input_tokens,
        output_tokens=usage.output_tokens,
        cost_micros=0 if usage.cost is None else usage.cost.micros,
        cost_currency=None if usage.cost is None else usage.cost.currency,
        over_budget=1 if passed else 0,
        created_at=now.text,
    )
    facts: JsonObject = {"usage": usage.public()}
    if passed:
        facts["over_budget"] = over_budget_mark(passed)
    return _Records(
        writes=(SqlWrite(Statement.TASK_SPEND_INSERT, spend._asdict()),),
        rows=(spend.image(),),
        facts=facts,
        answer={"over_budget": bool(passed)},
        held=bool(passed),
    )


# -- verify: a judgement of the submitted result, never by its author


def _judgement_changes(
    task: TaskRow,
    judgement: Judgement,
    now: Timestamp,
    *,
    jitter: float,
    status: TaskStatus,
    automatic: bool,
) -> dict[str, Any]:
    marks: JsonObject = {"automatic": True} if automatic else {}
    verification: JsonObject = {"decision": judgement.decision, "reason": judgement.reason, **marks}
    not_before = task.not_before
    if status == TaskStatus.QUEUED:
        not_before = retry_not_before(task.retry_policy(), task.attempt, jitter, now).text
    return {"not_before": not_before, "verification_json": encode_checked(verification)}


def _judgement_payload(automatic: bool) -> Callable[[Step], JsonObject]:
    """A verdict's facts, sealing who verified; a sent-back task's `not_before`."""

    def payload(step: Step) -> JsonObject:
        facts: JsonObject = {}
        if automatic:
            facts["automatic"] = True
        elif step.request.agent_id is not None:
            facts["reviewer"] = step.request.agent_id
        if step.after.status == TaskStatus.QUEUED:
            facts["not_before"] = step.after.not_before
        return facts

    return payload


def _verify_check(
    task: TaskRow, request: VerifyRequest, state: TaskState, inputs: DecisionInputs, now: Timestamp
) -> None:
    """Separation of duties: a result's author may not judge it (`SELF_REVIEW`)."""
    reviewer = request.agent_id
    if reviewer is not None and reviewer == state.result_author:
        raise LedgerError(
            "SELF_REVIEW",
            f"{reviewer!r} wrote the result of task {task.task_id!r} and may not judge it: "
            "another reviewer, under a token of another name, must verify it",
        )
    expected = request.expected_result_digest
    if expected is not None and expected != task.result_digest:
        raise LedgerError(
            "RESULT_DIGEST_MISMATCH",
            f"the stored result is {task.result_digest}, the verifier expects {expected}",
        )


def _verify_changes(
    task: TaskRow,
    request: VerifyRequest,
    inputs: DecisionInputs,
    now: Timestamp,
    status: TaskStatus,
) -> Mapping[str, Any]:
    judgement = Judgement(request.decision, request.reason)
    jitter = inputs.need("jitter", "verify")
    return _judgement_changes(task, judgement, now, jitter=jitter, status=status, automatic=False)


RETRY_RULES = Rules(changes=_retry_changes)
VERIFY_RULES = Rules(
    prepare=_need_jitter,
    check=_verify_check,
    changes=_verify_changes,
    payload=_judgement_payload(automatic=False),
)


def submit_rules(*, judge: TaskTransition) -> Rules:
    """A submit's rules; `judge`: the verify operation, for a task verified automatically."""
    return Rules(
        prepare=_submit_prepare,
        check=_submit_check,
        changes=_submit_changes,
        records=_submit_spend,
        then=functools.partial(_submit_then, judge=judge),
    )


# --- create ---------------------------------------------------------------------------------------


def create_digest(request: TaskCreateRequest) -> str:
    return request_digest("create", None, request.public())


def decide_creation(
    row: TaskTransition,
    state: TaskState | ExpiryState,
    request: Any,
    inputs: DecisionInputs,
    now: Timestamp,
) -> Decision[CreateAnswer]:
    state = typed_as(state, TaskState)
    command = typed_as(request, TaskCreateCommand)
    task_id = inputs.need("task_id", row.name)
    idempotency_key = command.idempotency_key
    digest = create_digest(command.task)
    replay = replay_or_conflict(state.prior, digest, CreateAnswer)
    if replay is not None:
        return replay
    if command.task.task_id is not None and command.task.task_id != task_id:
        raise LedgerError("FIELDS_INVALID", "task_id disagrees with the request's")
    if state.task is not None:
        raise LedgerError("TASK_ALREADY_EXISTS", f"task {task_id!r} exists already")
    if state.next_seq is None:
        raise ValueError("a create needs the next creation sequence in its state")
    request_task = command.task
    task = TaskRow(
        task_id=task_id,
        goal=request_task.goal,
        instructions=request_task.instructions,
        success_criteria_json=encode_checked(request_task.success_criteria),
        required_capabilities_json=encode_checked(
            list[JsonValue](request_task.required_capabilities)
        ),
        constraints_json=encode_checked(request_task.constraints),
        metadata_json=encode_checked(_metadata_with_budget(request_task)),
        deadline=request_task.deadline,
        priority=request_task.priority,
        max_attempts=request_task.max_attempts,
        attempt=0,
        status=next_task_status(ABSENT, TaskOperation.CREATE),
        claimed_by=None,
        lease_token_hash=None,
        lease_expires_at=None,
        result_json=None,
        result_digest=None,
        result_idempotency_key=None,
        verification_json=None,
        revision=1,
        created_at=now.text,
        updated_at=now.text,
        verification_mode=request_task.verification,
        retry_base_seconds=request_task.retry.base_seconds,
        retry_max_seconds=request_task.retry.max_seconds,
        not_before=request_task.not_before,
        seq=state.next_seq,
        awaiting_projection=1 if request_task.governed else 0,
    )
    insert = SqlWrite(Statement.TASKS_INSERT, task._asdict())
    # (mypy will not spread a summary into a TypedDict with a key it may lack: cast.)
    answer = cast(
        CreateAnswer, {**task_summary(task), "priority": task.priority, "idempotent": False}
    )
    if task.awaiting_projection:  # only then: a plain create answers as it always did
        answer["awaiting_projection"] = True
    payload: JsonObject = {
        "priority": task.priority,
        "max_attempts": task.max_attempts,
        "required_capabilities": list[JsonValue](request_task.required_capabilities),
        "deadline": task.deadline,
        "idempotency_key": idempotency_key,
        # Day two's fields only when set, so that older seals stay as they were.
        **{key: value for key, value in request_task.public().items() if key in DAY_TWO_DEFAULTS},
    }
    event = _event(task, row.event, payload, None, before=None, actor=inputs.actor)
    write, event = _recorded(event, idempotency_key, row.name, task_id, digest, answer, now)
    return sealed_plan((insert, write), (event,), answer, tail=state.tail)


def _metadata_with_budget(request: TaskCreateRequest) -> JsonObject:
    """The metadata as stored, the budget under `budget` (`core/tasks/budgets.py`)."""
    metadata: JsonObject = dict(request.metadata)
    if request.budget is not None:
        metadata["budget"] = request.budget.public()
    return metadata


# --- claim ----------------------------------------------------------------------------------------


def claim_refusal(task: TaskRow, capabilities: Sequence[str], now: Timestamp) -> LedgerError | None:
    """Why `task` cannot be claimed by a claimer offering `capabilities` now, or None."""
    if task.status != TaskStatus.QUEUED:
        return LedgerError("INVALID_TRANSITION", f"a {task.status} task does not allow claim")
    if task.awaiting_projection:
        return awaiting_projection_refusal(task, "claim")
    if task.attempt >= task.max_attempts:
        return LedgerError(
            "ATTEMPTS_EXHAUSTED", f"task used {task.attempt} of {task.max_attempts} attempts"
        )
    try:
        missing = sorted(set(task.required_capabilities()) - set(capabilities))
        if task.deadline is not None and _passed(task.deadline, now):
            return LedgerError("DEADLINE_PASSED", f"task's deadline {task.deadline} has passed")
        if task.not_before is not None and not _passed(task.not_before, now):
            return LedgerError("TASK_NOT_DUE", f"task may not be claimed before {task.not_before}")
    except LedgerError as refused:
        return refused
    if missing:
        return LedgerError("CAPABILITY_MISSING", f"the claimer lacks {missing}")
    return None


def awaiting_projection_refusal(task: TaskRow, operation: str) -> LedgerError:
    """A governed task waits for its projection, which applies only at revision 1."""
    return LedgerError(
        "AWAITING_PROJECTION",
        f"task {task.task_id!r} was created governed and waits for its initial execution "
        f"projection: {operation} is refused until the owner projects it (`aios-ledger "
        "project`); cancel it to give it up",
    )


def refuse_ungranted(offered: Sequence[str], grant: frozenset[str] | None) -> None:
    """An offer beyond the grant is refused, not cut, so that the worker learns it."""
    if grant is None:
        return
    extra = sorted(set(offered) - grant)
    if extra:
        raise LedgerError(
            "CAPABILITY_NOT_GRANTED",
            f"the claim offers {extra}, which this claimer's grant {sorted(grant)} does not "
            "hold: offer only granted capabilities, or have the owner issue a token that "
            "grants them",
        )


def first_claimable(
    candidates: Iterable[TaskRow], capabilities: Sequence[str], now: Timestamp, count: int
) -> list[TaskRow]:
    """The first `count` of `candidates` a claimer may take now, checking no more."""
    chosen: list[TaskRow] = []
    if count < 1:
        return chosen
    for candidate in candidates:
        if claim_refusal(candidate, capabilities, now) is None:
            chosen.append(candidate)
            if len(chosen) == count:
                break
    return chosen


def _passed_leases(state: TaskState, now: Timestamp) -> list[TaskRow]:
    own = () if state.task is None else (state.task,)
    read: dict[str, TaskRow] = {}
    for task in (*state.passed, *own, *state.candidates):
        read.setdefault(task.task_id, task)
    return [task for task in read.values() if _lease_passed(task, now)]


def _lease_passed(task: TaskRow, now: Timestamp) -> bool:
    return task.status == TaskStatus.CLAIMED and _passed(task.lease_expires_at, now)


def _claim_pool(state: TaskState, requeued: Mapping[str, TaskRow]) -> list[TaskRow]:
    own = () if state.task is None else (state.task,)
    pool: dict[str, TaskRow] = {}
    for task in (*own, *state.candidates, *requeued.values()):
        pool.setdefault(task.task_id, requeued.get(task.task_id, task))
    return sorted(pool.values(), key=lambda task: (-task.priority, task.seq))


def _claimed(
    row: TaskTransition,
    task: TaskRow,
    request: ClaimRequest,
    lease_token: str,
    digest: str | None,
    now: Timestamp,
    actor: Actor,
) -> tuple[list[SqlWrite], EventAppend, ClaimAnswer]:
    """One task claimed, its evidence run in the same seal so that `verify` proves it."""
    status = row.next_status(task, request)
    run_id = evidence_run(task.task_id, task.attempt + 1)

    def with_run(step: Step) -> JsonObject:
        return {"run_id": run_id}

    move = _move(
        row,
        task,
        request,
        now,
        status,
        changes={"attempt": task.attempt + 1},
        payload=with_run,
        lease_token=lease_token,
        actor=actor,
    )
    claimed = move.after
    envelope = task_envelope(task)
    runtime_input = None if envelope is None else envelope["runtime_input"]
    budget = budget_of(claimed.metadata(), claimed.task_id)
    answer: ClaimAnswer = {
        **task_summary(claimed),
        "goal": claimed.goal,
        "instructions": claimed.instructions,
        "success_criteria": claimed.success_criteria(),
        "constraints": claimed.constraints(),
        "required_capabilities": claimed.required_capabilities(),
        "deadline": claimed.deadline,
        "priority": claimed.priority,
        "envelope": envelope,
        "runtime_input": runtime_input,
        "budget": None if budget is None else budget.public(),
        "idempotent": False,
        "lease_token": lease_token,
    }
    # The attempt's evidence run is the claim's, in the same plan: no one can take it first.
    attempt_run = RunIdentity(
        run_id=run_id,
        session_id=evidence_session(task.task_id),
        prompt=evidence_prompt(claimed.attempt),
        created_at=now.text,
    )
    writes = [move.write, SqlWrite(Statement.INSERT_ATTEMPT_RUN, attrs.asdict(attempt_run))]
    event = attrs.evolve(move.event, rows=(*move.event.rows, attempt_run.image()))
    if digest is not None:
        assert request.idempotency_key is not None
        write, event = _recorded(
            event, request.idempotency_key, row.name, task.task_id, digest, answer, now
        )
        writes.append(write)
    return writes, event, answer


def decide_claims(
    row: TaskTransition,
    state: TaskState | ExpiryState,
    request: Any,
    inputs: DecisionInputs,
    now: Timestamp,
    *,
    takeover: TaskTransition,
) -> Decision[Any] | None:
    """A claim of one task or a batch; the grant is checked before the replay, so that a token never
    offers what it was not granted."""
    state = typed_as(state, TaskState)
    batch = request if isinstance(request, ClaimBatchRequest) else None
    claim = typed_as(request, ClaimRequest) if batch is None else batch.claim()
    refuse_ungranted(claim.capabilities, inputs.grant)
    if batch is None:
        tokens: tuple[str, ...] = (inputs.need("lease_token", row.name),)
    else:
        tokens = inputs.lease_tokens
        if len(tokens) < batch.limit:
            raise ValueError(f"a batch claim of {batch.limit} needs as many lease tokens")
    # Only an idempotent claim is bound to a request digest.
    digest = None
    if batch is None and claim.idempotency_key is not None:
        digest = request_digest(row.name, claim.task_id, claim.public(tokens[0]))
    replay = None if digest is None else replay_or_conflict(state.prior, digest, ClaimAnswer)
    if replay is not None:
        return Replay({**replay.response, "lease_token": tokens[0]})
    taken_over = _expire(takeover, _passed_leases(state, now), None, now, inputs.actor)
    writes = [move.write for move in taken_over]
    events = [move.event for move in taken_over]
    requeued = {move.after.task_id: move.after for move in taken_over}
    if claim.task_id is not None:
        named = requeued.get(claim.task_id, require_task(claim.task_id, state.task))
        refusal = claim_refusal(named, claim.capabilities, now)
        if refusal is not None:
            raise refusal
        chosen = [named]
    else:
        count = 1 if batch is None else batch.limit
        chosen = first_claimable(_claim_pool(state, requeued), claim.capabilities, now, count)
    answers: list[ClaimAnswer] = []
    for task, token in zip(chosen, tokens, strict=False):
        claim_writes, event, answer = _claimed(row, task, claim, token, digest, now, inputs.actor)
        writes.extend(claim_writes)
        events.append(event)
        answers.append(answer)
    if not events:
        return None
    response: Any = answers if batch is not None else (answers[0] if answers else None)
    return sealed_plan(writes, events, response, tail=state.tail)


# --- expire ---------------------------------------------------------------------------------------


def decide_expiry(
    row: TaskTransition,
    state: TaskState | ExpiryState,
    request: Any,
    inputs: DecisionInputs,
    now: Timestamp,
) -> WritePlan[ExpireAnswer] | None:
    state = typed_as(state, ExpiryState)
    request = typed_as(request, ExpireRequest)
    passed = itertools.islice(
        (task for task in state.tasks if _lease_passed(task, now)), request.limit
    )
    moves = _expire(row, passed, request, now, inputs.actor)
    if not moves:
        return None
    expired = [task_summary(move.after) for move in moves]
    answer: ExpireAnswer = {"expired": expired, "count": len(expired)}
    writes, events = [move.write for move in moves], [move.event for move in moves]
    return sealed_plan(writes, events, answer, tail=state.tail)


def _expire(
    row: TaskTransition, tasks: Iterable[TaskRow], request: Any, now: Timestamp, actor: Actor
) -> list[_Move]:
    """Each of `tasks`, whose lease has passed, back to the queue (or failed, its attempts used)."""
    return [
        _move(row, task, request, now, row.next_status(task, request), actor=actor)
        for task in tasks
    ]
