"""The operations of the task lifecycle, one `TaskTransition` per row of `TASK_OPERATIONS`, and the
one dispatch, `decide_task`. CONTRIBUTING.md ("Adding a task operation") says how to add one."""

from __future__ import annotations

import functools
from collections.abc import Mapping, Sequence
from types import MappingProxyType
from typing import Any, TypeVar, cast

import attrs
from aios_ledger.core.actors import AGENT, OWNER, REVIEWER, Actor
from aios_ledger.core.errors import LedgerError
from aios_ledger.core.log.plan import Decision, WritePlan
from aios_ledger.core.structuring import wire_form
from aios_ledger.core.tasks.answers import (
    CancelAnswer,
    ClaimAnswer,
    CreateAnswer,
    ExpireAnswer,
    HeartbeatAnswer,
    RetryAnswer,
    SubmitAnswer,
    VerifyAnswer,
)
from aios_ledger.core.tasks.decisions import (
    PLAIN,
    RETRY_RULES,
    VERIFY_RULES,
    AttemptProposal,
    DecisionInputs,
    ExpiryState,
    TaskState,
    decide_claims,
    decide_creation,
    decide_expiry,
    decide_on_task,
    submit_rules,
    typed_as,
)
from aios_ledger.core.tasks.records import TaskRow
from aios_ledger.core.tasks.requests import (
    CancelRequest,
    ClaimBatchRequest,
    ClaimRequest,
    ExpireRequest,
    HeartbeatRequest,
    PauseRequest,
    ReleaseRequest,
    ResumeRequest,
    RetryRequest,
    SubmitRequest,
    TaskCreateCommand,
    TaskRequest,
    VerifyRequest,
)
from aios_ledger.core.tasks.transitions import (
    ATTEMPT,
    DECISION,
    IDEMPOTENCY_KEY,
    LEASE_EXPIRES_AT,
    MAX_ATTEMPTS,
    NEXT_STATE,
    PASSED_LEASE,
    PREVIOUS_STATUS,
    REASON,
    RESULT_DIGEST,
    RESULT_SUBMITTED,
    TASK_CANCELLED,
    TASK_CLAIMED,
    TASK_CREATED,
    TASK_HEARTBEAT,
    TASK_LEASE_EXPIRED,
    TASK_PAUSED,
    TASK_RELEASED,
    TASK_REQUEUED,
    TASK_RESUMED,
    TASK_VERIFIED,
    EventAgent,
    Lease,
    Scope,
    StateRead,
    TaskOperation,
    TaskTransition,
    expire_operation,
    release_operation,
    verify_operation,
)
from aios_ledger.core.tasks.verification import Judgement
from aios_ledger.core.timestamps import Timestamp, require_timestamp

_O = TaskOperation
A = TypeVar("A")


def _attempts_left(task: TaskRow) -> bool:
    return task.attempt < task.max_attempts


def _expire_outcome(task: TaskRow, request: object) -> TaskOperation:
    return expire_operation(attempts_left=_attempts_left(task))


def _release_outcome(task: TaskRow, request: object) -> TaskOperation:
    return release_operation(attempts_left=_attempts_left(task))


def _verify_outcome(task: TaskRow, request: VerifyRequest | Judgement) -> TaskOperation:
    return verify_operation(request.decision, attempts_left=_attempts_left(task))


def _submit_reads(request: SubmitRequest) -> tuple[StateRead, ...]:
    task = {"task_id": request.task_id}
    proposal = StateRead("proposal", "get_task_proposal_of_current_attempt", task)
    if request.usage is None:
        return (proposal,)
    return (proposal, StateRead("spent", "task_spend_totals", task))


def _verify_reads(request: VerifyRequest) -> tuple[StateRead, ...]:
    """Who wrote the result, for the separation of duties (a named reviewer only)."""
    if request.agent_id is None:
        return ()
    params = {"task_id": request.task_id, "event_type": RESULT_SUBMITTED}
    return (StateRead("result_author", "task_result_author", params),)


# Expire and verify first: a claim takes leases over, and a submit judges, as they move tasks.
_EXPIRE = TaskTransition(
    name="expire",
    request=ExpireRequest,
    scope=Scope.LEASES,
    decide=decide_expiry,
    event=TASK_LEASE_EXPIRED,
    keyed=False,
    lease=Lease.END,
    outcome=_expire_outcome,
    payload=(ATTEMPT, PASSED_LEASE, NEXT_STATE),
    agent=EventAgent.HOLDER,
    role=None,  # the ledger's own: `expire-leases`, and every claim first
    route=None,
    command="expire-leases",
    summary="requeue (or fail) every claimed task whose lease has passed",
)

_VERIFY = TaskTransition(
    name="verify",
    request=VerifyRequest,
    reads=_verify_reads,
    shell_inputs=("jitter",),
    decide=decide_on_task(VERIFY_RULES),
    event=TASK_VERIFIED,
    lease=Lease.END,
    outcome=_verify_outcome,
    payload=(DECISION, NEXT_STATE, REASON),  # and the backoff's not_before
    answer=(DECISION, NEXT_STATE, RESULT_DIGEST),
    role=REVIEWER,
    route="verification",
    command="task verify",
    tool="verify_result",
    summary="judge a submitted result",
)


def _owner_move(
    name: str, request: type[TaskRequest[Any]], event: str, outcome: TaskOperation, summary: str
) -> TaskTransition:
    return TaskTransition(
        name=name,
        request=request,
        decide=decide_on_task(PLAIN),
        event=event,
        lease=Lease.KEEP,
        outcome=outcome,
        payload=(REASON, PREVIOUS_STATUS, NEXT_STATE),
        answer=(PREVIOUS_STATUS,),
        role=OWNER,
        route=name,
        command=f"task {name}",
        summary=summary,
    )


TASK_OPERATIONS: Mapping[str, TaskTransition] = MappingProxyType(
    {
        row.name: row
        for row in (
            TaskTransition(
                name="create",
                request=TaskCreateCommand,
                shell_inputs=("task_id",),
                decide=decide_creation,
                event=TASK_CREATED,
                lease=Lease.KEEP,
                outcome=_O.CREATE,
                payload=(),  # the task's own fields: the decision's
                role=OWNER,
                route=None,  # POST /v1/tasks
                command="task create",
                summary="create one task or a batch",
            ),
            TaskTransition(
                name="claim",
                request=ClaimRequest,  # one task; a ClaimBatchRequest, up to its limit
                scope=Scope.QUEUE,
                decide=functools.partial(decide_claims, takeover=_EXPIRE),
                event=TASK_CLAIMED,
                keyed=True,  # when the request has a key (with its own lease token)
                lease=Lease.TAKE,
                outcome=_O.CLAIM,
                payload=(ATTEMPT, LEASE_EXPIRES_AT),  # and the attempt's evidence run
                answer=(),  # the task's fields, its envelope and the lease token
                agent=EventAgent.CLAIMER,
                role=AGENT,
                route=None,  # POST /v1/claims
                command="claim",
                tool="claim_task",
                summary="claim (long poll up to 60 s)",
            ),
            TaskTransition(
                name="heartbeat",
                request=HeartbeatRequest,
                decide=decide_on_task(PLAIN),
                event=TASK_HEARTBEAT,
                keyed=False,
                fenced=True,
                lease=Lease.EXTEND,
                outcome=_O.HEARTBEAT,
                payload=(ATTEMPT, LEASE_EXPIRES_AT),
                agent=EventAgent.HOLDER,
                role=AGENT,
                route="heartbeat",
                command="heartbeat",
                tool="heartbeat",
                summary="extend the lease",
            ),
            TaskTransition(
                name="release",
                request=ReleaseRequest,
                decide=decide_on_task(PLAIN),
                event=TASK_RELEASED,
                keyed=False,
                fenced=True,
                lease=Lease.END,
                outcome=_release_outcome,
                payload=(ATTEMPT, REASON, NEXT_STATE),
                agent=EventAgent.HOLDER,
                role=AGENT,
                route="release",
                command="release",
                tool="release_task",
                summary="give the lease back",
            ),
            TaskTransition(
                name="submit",
                request=SubmitRequest,
                reads=_submit_reads,
                shell_inputs=("contracts", "jitter"),
                decide=decide_on_task(submit_rules(judge=_VERIFY)),
                event=RESULT_SUBMITTED,
                fenced=True,
                lease=Lease.END,
                outcome=_O.SUBMIT,
                payload=(ATTEMPT, RESULT_DIGEST, IDEMPOTENCY_KEY),
                answer=(RESULT_DIGEST,),
                agent=EventAgent.HOLDER,
                role=AGENT,
                route="result",
                command="submit",
                tool="submit_result",
                summary="hand the result back",
            ),
            _VERIFY,
            TaskTransition(
                name="cancel",
                request=CancelRequest,
                decide=decide_on_task(PLAIN),
                event=TASK_CANCELLED,
                lease=Lease.END,
                outcome=_O.CANCEL,
                payload=(REASON, PREVIOUS_STATUS),
                answer=(PREVIOUS_STATUS,),
                role=OWNER,
                route="cancel",
                command="cancel",
                summary="cancel a non-terminal task",
                before_projection=True,
            ),
            TaskTransition(
                name="retry",
                request=RetryRequest,
                decide=decide_on_task(RETRY_RULES),
                event=TASK_REQUEUED,
                lease=Lease.END,
                outcome=_O.RETRY,
                payload=(REASON, PREVIOUS_STATUS, ATTEMPT, MAX_ATTEMPTS),
                answer=(PREVIOUS_STATUS,),
                role=OWNER,
                route="retry",
                command="task retry",
                summary="send a FAILED or CANCELLED task back to the queue",
            ),
            _owner_move(
                "pause",
                PauseRequest,
                TASK_PAUSED,
                _O.PAUSE,
                "pause a QUEUED task: no claim takes it until it is resumed",
            ),
            _owner_move(
                "resume",
                ResumeRequest,
                TASK_RESUMED,
                _O.RESUME,
                "resume a PAUSED task: QUEUED again, claimable as before",
            ),
            _EXPIRE,
        )
    }
)

_BY_REQUEST: Mapping[type, TaskTransition] = {
    **{row.request: row for row in TASK_OPERATIONS.values()},
    ClaimBatchRequest: TASK_OPERATIONS["claim"],
}


def operation_of(request: object) -> TaskTransition:
    """The row of the operation `request` asks for, else `FIELDS_INVALID`."""
    row = _BY_REQUEST.get(type(request))
    if row is None:
        raise LedgerError(
            "FIELDS_INVALID", f"{type(request).__name__} is not a request of the task lifecycle"
        )
    return row


def decide_task(
    state: TaskState | ExpiryState,
    request: TaskRequest[Any],
    *,
    now: Timestamp,
    actor: Actor,
    task_id: str | None = None,
    lease_token: str | None = None,
    lease_tokens: Sequence[str] = (),
    jitter: float | None = None,
    contracts: Mapping[str, Mapping[str, object]] | None = None,
    grant: frozenset[str] | None = None,
) -> Decision[Any] | None:
    """The decision of the operation `request` asks for; `inputs` holds what the shell drew."""
    require_timestamp(now)
    row = operation_of(request)
    inputs = DecisionInputs(
        actor=actor,
        task_id=task_id,
        lease_token=lease_token,
        lease_tokens=tuple(lease_tokens),
        jitter=jitter,
        contracts=contracts,
        grant=grant,
    )
    return row.decide(row, state, request, inputs, now)


# --- each operation's decision under its own name -------------------------------------------------


def _decided(
    kind: type[TaskRequest[A]],
    state: TaskState | ExpiryState,
    request: object,
    *,
    now: Timestamp,
    actor: Actor,
    **inputs: Any,
) -> Decision[A]:
    """`decide_task` on a `kind` only: an operation's own name takes no other's request."""
    require_timestamp(now)
    decision = decide_task(state, typed_as(request, kind), now=now, actor=actor, **inputs)
    return cast(Decision[A], decision)


def decide_create(
    state: TaskState, request: TaskCreateCommand, *, now: Timestamp, actor: Actor, task_id: str
) -> Decision[CreateAnswer]:
    """`task_id` is the request's, or one the shell generated; the key is bound to the task."""
    return _decided(TaskCreateCommand, state, request, now=now, actor=actor, task_id=task_id)


def decide_claim(
    state: TaskState,
    request: ClaimRequest,
    *,
    now: Timestamp,
    actor: Actor,
    lease_token: str,
    grant: frozenset[str] | None = None,
) -> Decision[ClaimAnswer | None] | None:
    """Claim after taking over passed leases; None when there is nothing to do at all."""
    decision = _decided(
        ClaimRequest, state, request, now=now, actor=actor, lease_token=lease_token, grant=grant
    )
    return cast(Decision[ClaimAnswer | None] | None, decision)


def decide_heartbeat(
    state: TaskState, request: HeartbeatRequest, *, now: Timestamp, actor: Actor
) -> Decision[HeartbeatAnswer]:
    return _decided(HeartbeatRequest, state, request, now=now, actor=actor)


def decide_submit(
    state: TaskState,
    request: SubmitRequest,
    *,
    now: Timestamp,
    actor: Actor,
    contracts: Mapping[str, Mapping[str, object]],
    jitter: float,
    proposal: AttemptProposal | None = None,
) -> Decision[SubmitAnswer]:
    """`contracts`: result contract name -> JSON Schema."""
    require_timestamp(now)
    return _decided(
        SubmitRequest,
        attrs.evolve(state, proposal=proposal),
        request,
        now=now,
        actor=actor,
        contracts=contracts,
        jitter=jitter,
    )


def decide_verify(
    state: TaskState,
    request: VerifyRequest,
    *,
    now: Timestamp,
    actor: Actor,
    jitter: float,
    reviewer: str | None = None,
) -> Decision[VerifyAnswer]:
    """Judge a submitted result; its author may not (`SELF_REVIEW`)."""
    require_timestamp(now)
    verify = typed_as(request, VerifyRequest)
    if reviewer is not None and verify.agent_id is None:
        verify = VerifyRequest.from_mapping({**wire_form(verify), "agent_id": reviewer})
    decision = decide_task(state, verify, now=now, actor=actor, jitter=jitter)
    return cast(Decision[VerifyAnswer], decision)


def decide_cancel(
    state: TaskState, request: CancelRequest, *, now: Timestamp, actor: Actor
) -> Decision[CancelAnswer]:
    return _decided(CancelRequest, state, request, now=now, actor=actor)


def decide_retry(
    state: TaskState, request: RetryRequest, *, now: Timestamp, actor: Actor
) -> Decision[RetryAnswer]:
    """A FAILED or CANCELLED task back to QUEUED at once, with `extra_attempts` more attempts."""
    return _decided(RetryRequest, state, request, now=now, actor=actor)


def decide_expire(
    state: ExpiryState, request: ExpireRequest, *, now: Timestamp, actor: Actor
) -> WritePlan[ExpireAnswer] | None:
    """Every CLAIMED task whose lease has passed, up to the limit, goes back to QUEUED."""
    require_timestamp(now)
    if not isinstance(state, ExpiryState):
        raise LedgerError("FIELDS_INVALID", "expiring leases reads an ExpiryState")
    decision = _decided(ExpireRequest, state, request, now=now, actor=actor)
    return cast(WritePlan[ExpireAnswer] | None, decision)
