"""Decisions of the task lifecycle: create, claim, heartbeat, release, submit, verify, cancel,
expire, retry.

Each `decide_*(state, request, *, now, ...)` is pure: `state` holds the rows the shell read
inside its `BEGIN IMMEDIATE` (the task, any first answer, the log's tail at the task's chain),
`request` the structured request, `now` the clock's `Timestamp`, and the keywords after it what
the shell generated (a task id, a lease token) or configured (result contracts). It returns a
`Replay` (the first answer for an idempotency key), a `WritePlan` (one compare-and-swap on the
task row per transition, the idempotency-ledger row, one sealed event per transition), or raises
a `LedgerError`. Every status change goes through `TASK_TRANSITIONS`; every write adds 1 to
`revision`, a claim adds 1 to `attempt`.

A judgement that sends a task back to the queue (a reviewer's NEEDS_REWORK, an automatic
verification's rejection) schedules its next attempt after the task's backoff: `jitter` is the
shell's draw in [0, 1), an input like the clock (`core/tasks/backoff.py`).

Fencing: a lease is held by whoever knows the token whose sha256 is `lease_token_hash`. A token
that does not match the task's current lease (never held, requeued, claimed by someone else,
released by submit, release or cancel) is `LEASE_INVALID`; the matching token after the lease's
expiry is `LEASE_EXPIRED`. Neither writes anything.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import attrs
from aios_ledger.core.digests import sha256_of_canonical
from aios_ledger.core.errors import LedgerError
from aios_ledger.core.git.policy import require_stated_work
from aios_ledger.core.git.records import ProposalRow
from aios_ledger.core.jsonvalue import JsonObject, JsonValue, encode_checked
from aios_ledger.core.log.tail import EventAppend, LogTail
from aios_ledger.core.plan import (
    Decision,
    Replay,
    WritePlan,
    replay_or_conflict,
    request_digest,
    sealed_plan,
    stored_answer,
)
from aios_ledger.core.runs.attempts import evidence_prompt, evidence_run, evidence_session
from aios_ledger.core.runs.records import RunIdentity
from aios_ledger.core.statements import SqlWrite, Statement
from aios_ledger.core.tasks.answers import (
    CancelAnswer,
    ClaimAnswer,
    CreateAnswer,
    ExpireAnswer,
    HeartbeatAnswer,
    ReleaseAnswer,
    RetryAnswer,
    SubmitAnswer,
    TaskSummary,
    VerifyAnswer,
    task_summary,
)
from aios_ledger.core.tasks.backoff import require_jitter, retry_not_before
from aios_ledger.core.tasks.records import FirstAnswerRow, IdempotencyRow, TaskRow
from aios_ledger.core.tasks.requests import (
    CancelRequest,
    ClaimRequest,
    ExpireRequest,
    HeartbeatRequest,
    ReleaseRequest,
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
    TaskOperation,
    TaskStatus,
    VerificationMode,
    expire_operation,
    next_task_status,
    release_operation,
    verify_operation,
)
from aios_ledger.core.tasks.verification import Judgement, automatic_judgement
from aios_ledger.core.timestamps import Timestamp, require_timestamp

TASK_CREATED = "TASK_CREATED"
TASK_CLAIMED = "TASK_CLAIMED"
TASK_HEARTBEAT = "TASK_HEARTBEAT"
RESULT_SUBMITTED = "RESULT_SUBMITTED"
TASK_VERIFIED = "TASK_VERIFIED"
TASK_LEASE_EXPIRED = "TASK_LEASE_EXPIRED"
TASK_CANCELLED = "TASK_CANCELLED"
TASK_RELEASED = "TASK_RELEASED"
TASK_REQUEUED = "TASK_REQUEUED"


@attrs.frozen
class TaskState:
    """What a decision on one task reads: the task (None: there is none), the log's tail at
    its chain, any first answer for the request's idempotency key, and (for a create) the
    creation sequence a new task gets, read under the write lock like the next event id; for
    a verify by a named reviewer, the agent that wrote the result it judges (`result_author`,
    the holder its last RESULT_SUBMITTED names)."""

    task: TaskRow | None
    tail: LogTail
    prior: IdempotencyRow | None = None
    next_seq: int | None = None
    result_author: str | None = None


@attrs.frozen
class ExpiryState:
    """What expiring leases reads: CLAIMED tasks whose leases may have passed, and the log's
    tail at each one's chain."""

    tasks: tuple[TaskRow, ...]
    tail: LogTail


# ---------------------------------------------------------------------------------------------
# shared pieces


def _require(task_id: str, task: TaskRow | None) -> TaskRow:
    if task is None:
        raise LedgerError("TASK_NOT_FOUND", f"no task {task_id!r}")
    return task


def _advance(task: TaskRow, now: Timestamp, **changes: Any) -> TaskRow:
    """The next row: the changes, one more revision, the clock."""
    return task._replace(**changes, revision=task.revision + 1, updated_at=now.text)


def _release(task: TaskRow, now: Timestamp, **changes: Any) -> TaskRow:
    """`_advance` for a transition that ends the lease: no holder, no token, no expiry."""
    return _advance(
        task, now, claimed_by=None, lease_token_hash=None, lease_expires_at=None, **changes
    )


def _cas(before: TaskRow, after: TaskRow) -> SqlWrite:
    """The guarded write of a transition: the row must still be at the revision decided on
    (`after` is one revision on, as the statement writes it)."""
    return SqlWrite(
        Statement.TASKS_CAS_UPDATE,
        {
            "task_id": before.task_id,
            "expected_revision": before.revision,
            "status": after.status,
            "attempt": after.attempt,
            "max_attempts": after.max_attempts,
            "not_before": after.not_before,
            "claimed_by": after.claimed_by,
            "lease_token_hash": after.lease_token_hash,
            "lease_expires_at": after.lease_expires_at,
            "result_json": after.result_json,
            "result_digest": after.result_digest,
            "result_idempotency_key": after.result_idempotency_key,
            "verification_json": after.verification_json,
            "updated_at": after.updated_at,
        },
    )


def _first_answer(
    key: str,
    operation: str,
    subject: str,
    digest: str,
    answer: Mapping[str, object],
    now: Timestamp,
) -> FirstAnswerRow:
    return FirstAnswerRow(
        idempotency_key=key,
        operation=operation,
        subject=subject,
        request_sha256=digest,
        response_json=stored_answer(answer),
        created_at=now.text,
    )


def _answer_write(row: FirstAnswerRow) -> SqlWrite:
    return SqlWrite(Statement.TASK_IDEMPOTENCY_INSERT, row._asdict())


def _event(task: TaskRow, kind: str, payload: JsonObject, agent_id: str | None) -> EventAppend:
    """The event of a transition that wrote `task` (the row after it): its seal covers the row."""
    return EventAppend(
        task_id=task.task_id,
        agent_id=agent_id,
        event_type=kind,
        payload=payload,
        created_at=task.updated_at,
        rows=(task.image(),),
    )


def _claimed_event(
    task: TaskRow, payload: JsonObject, agent_id: str | None, attempt_run: RunIdentity
) -> EventAppend:
    """A claim's event: its seal covers the claimed row and the attempt's evidence run the
    claim created, so that `verify` proves the run as it proves a run created on its own."""
    event = _event(task, TASK_CLAIMED, payload, agent_id)
    return attrs.evolve(event, rows=(*event.rows, attempt_run.image()))


def _answered(event: EventAppend, first: FirstAnswerRow | None) -> EventAppend:
    """`event`, whose seal also covers the first answer its transition stored (if it stored
    one), so that an answer changed by hand, replayed later, is found by `verify`."""
    if first is None:
        return event
    return attrs.evolve(event, rows=(*event.rows, first.image()))


def _passed(moment: str | None, now: Timestamp) -> bool:
    """Whether the stored `moment` is at or before `now` (a missing moment never passes)."""
    if moment is None:
        return False
    return Timestamp.parse(moment, field="stored timestamp").epoch_ms <= now.epoch_ms


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


# ---------------------------------------------------------------------------------------------
# create


def create_digest(request: TaskCreateRequest) -> str:
    return request_digest("create", None, request.public())


def decide_create(
    state: TaskState, request: TaskCreateCommand, *, now: Timestamp, task_id: str
) -> Decision[CreateAnswer]:
    """`task_id` is the request's, or one the shell generated; the key is bound to the task."""
    require_timestamp(now)
    idempotency_key = request.idempotency_key
    digest = create_digest(request.task)
    replay = replay_or_conflict(state.prior, digest, CreateAnswer)
    if replay is not None:
        return replay
    if request.task.task_id is not None and request.task.task_id != task_id:
        raise LedgerError("FIELDS_INVALID", "task_id disagrees with the request's")
    if state.task is not None:
        raise LedgerError("TASK_ALREADY_EXISTS", f"task {task_id!r} exists already")
    if state.next_seq is None:
        raise ValueError("a create needs the next creation sequence in its state")
    request_task = request.task
    task = TaskRow(
        task_id=task_id,
        goal=request_task.goal,
        instructions=request_task.instructions,
        success_criteria_json=encode_checked(request_task.success_criteria),
        required_capabilities_json=encode_checked(
            list[JsonValue](request_task.required_capabilities)
        ),
        constraints_json=encode_checked(request_task.constraints),
        metadata_json=encode_checked(request_task.metadata),
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
    )
    insert = SqlWrite(Statement.TASKS_INSERT, task._asdict())
    answer: CreateAnswer = {**task_summary(task), "priority": task.priority, "idempotent": False}
    payload: JsonObject = {
        "priority": task.priority,
        "max_attempts": task.max_attempts,
        "required_capabilities": list[JsonValue](request_task.required_capabilities),
        "deadline": task.deadline,
        "idempotency_key": idempotency_key,
        **{name: value for name, value in request_task.public().items() if name in _DAY_TWO},
    }
    first = _first_answer(idempotency_key, "create", task_id, digest, answer, now)
    return sealed_plan(
        (insert, _answer_write(first)),
        (_answered(_event(task, TASK_CREATED, payload, None), first),),
        answer,
        tail=state.tail,
    )


# What a TASK_CREATED payload says of day two's fields: only those a request set (so that a
# task created as before has the payload, and the seal, it had before).
_DAY_TWO = ("verification", "retry", "not_before")


# ---------------------------------------------------------------------------------------------
# claim


def claim_refusal(task: TaskRow, capabilities: Sequence[str], now: Timestamp) -> LedgerError | None:
    """Why `task` cannot be claimed by a claimer offering `capabilities` now, or None."""
    if task.status != TaskStatus.QUEUED:
        return LedgerError("INVALID_TRANSITION", f"a {task.status} task does not allow claim")
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


def refuse_ungranted(offered: Sequence[str], grant: frozenset[str] | None) -> None:
    """A claimer offers only capabilities its grant holds (a ceiling, as an auxiliary run's
    capabilities are held to its parent's): an offer beyond it is `CAPABILITY_NOT_GRANTED`,
    naming what is not granted, rather than cut down to the grant, so that a worker
    configured with more than its token allows learns it at once. None: no ceiling (a library
    caller that names no grant, a token issued before grants)."""
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
    """The first `count` of `candidates` (in claim order) a claimer offering `capabilities`
    may take now. Candidates are taken one at a time and no more than needed, so that the
    shell can read them a page at a time."""
    chosen: list[TaskRow] = []
    if count < 1:
        return chosen
    for candidate in candidates:
        if claim_refusal(candidate, capabilities, now) is None:
            chosen.append(candidate)
            if len(chosen) == count:
                break
    return chosen


def claim_digest(request: ClaimRequest, lease_token: str) -> str:
    return request_digest("claim", request.task_id, request.public(lease_token))


def decide_claim(
    state: TaskState,
    request: ClaimRequest,
    *,
    now: Timestamp,
    lease_token: str,
    grant: frozenset[str] | None = None,
) -> Decision[ClaimAnswer] | None:
    """Claim `state.task` (the requested one, or the first candidate `claim_refusal` let
    through); None when there is nothing to claim (no plan, nothing recorded). First, the
    offered capabilities are held to the claimer's `grant` (`refuse_ungranted`), replays
    included: a token may not offer what it was not granted, whatever it would find.

    The stored first answer never holds the token; a replay gives back the token the caller
    brought, which the request digest (over its sha256) proves to be the first one.
    """
    require_timestamp(now)
    refuse_ungranted(request.capabilities, grant)
    # Only an idempotent claim is bound to a request digest.
    digest = None if request.idempotency_key is None else claim_digest(request, lease_token)
    replay = None if digest is None else replay_or_conflict(state.prior, digest, ClaimAnswer)
    if replay is not None:
        return Replay({**replay.response, "lease_token": lease_token})
    if state.task is None:
        if request.task_id is not None:
            raise LedgerError("TASK_NOT_FOUND", f"no task {request.task_id!r}")
        return None
    task = state.task
    refusal = claim_refusal(task, request.capabilities, now)
    if refusal is not None:
        raise refusal
    claimed = _advance(
        task,
        now,
        status=next_task_status(task.status, TaskOperation.CLAIM),
        attempt=task.attempt + 1,
        claimed_by=request.agent_id,
        lease_token_hash=lease_token_sha256(lease_token),
        lease_expires_at=now.plus_seconds(request.lease_seconds).text,
    )
    envelope = task_envelope(task)
    runtime_input = None if envelope is None else envelope["runtime_input"]
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
        "idempotent": False,
        "lease_token": lease_token,
    }
    run_id = evidence_run(task.task_id, claimed.attempt)
    payload: JsonObject = {
        "attempt": claimed.attempt,
        "lease_expires_at": claimed.lease_expires_at,
        "run_id": run_id,
    }
    # The attempt's evidence run is the claim's, in the same plan: no one can take it first.
    attempt_run = RunIdentity(
        run_id=run_id,
        session_id=evidence_session(task.task_id),
        prompt=evidence_prompt(claimed.attempt),
        created_at=now.text,
    )
    writes = [
        _cas(task, claimed),
        SqlWrite(Statement.INSERT_ATTEMPT_RUN, attrs.asdict(attempt_run)),
    ]
    first = None
    if request.idempotency_key is not None and digest is not None:
        first = _first_answer(request.idempotency_key, "claim", task.task_id, digest, answer, now)
        writes.append(_answer_write(first))
    return sealed_plan(
        writes,
        (_answered(_claimed_event(claimed, payload, request.agent_id, attempt_run), first),),
        answer,
        tail=state.tail,
    )


# ---------------------------------------------------------------------------------------------
# heartbeat


def decide_heartbeat(
    state: TaskState, request: HeartbeatRequest, *, now: Timestamp
) -> Decision[HeartbeatAnswer]:
    require_timestamp(now)
    task = _require(request.task_id, state.task)
    _check_lease(task, request.lease_token, now)
    beat = _advance(
        task,
        now,
        status=next_task_status(task.status, TaskOperation.HEARTBEAT),
        lease_expires_at=now.plus_seconds(request.lease_seconds).text,
    )
    payload: JsonObject = {"attempt": beat.attempt, "lease_expires_at": beat.lease_expires_at}
    answer: HeartbeatAnswer = {**task_summary(beat), "idempotent": False}
    return sealed_plan(
        (_cas(task, beat),),
        (_event(beat, TASK_HEARTBEAT, payload, task.claimed_by),),
        answer,
        tail=state.tail,
    )


# ---------------------------------------------------------------------------------------------
# release


def decide_release(
    state: TaskState, request: ReleaseRequest, *, now: Timestamp
) -> Decision[ReleaseAnswer]:
    """The holder gives the lease back: QUEUED again, or FAILED when that was the last attempt
    (the attempt stays counted, as when a lease expires)."""
    require_timestamp(now)
    task = _require(request.task_id, state.task)
    _check_lease(task, request.lease_token, now)
    attempts_left = task.attempt < task.max_attempts
    released = _release(
        task,
        now,
        status=next_task_status(task.status, release_operation(attempts_left=attempts_left)),
    )
    payload: JsonObject = {
        "attempt": task.attempt,
        "reason": request.reason,
        "next_state": released.status,
    }
    answer: ReleaseAnswer = {**task_summary(released), "idempotent": False}
    return sealed_plan(
        (_cas(task, released),),
        (_event(released, TASK_RELEASED, payload, task.claimed_by),),
        answer,
        tail=state.tail,
    )


# ---------------------------------------------------------------------------------------------
# submit


def submit_digest(request: SubmitRequest) -> str:
    return request_digest("submit", request.task_id, request.public())


def decide_submit(
    state: TaskState,
    request: SubmitRequest,
    *,
    now: Timestamp,
    contracts: Mapping[str, Mapping[str, object]],
    jitter: float,
    proposal: ProposalRow | None = None,
) -> Decision[SubmitAnswer]:
    """`contracts`: result contract name -> JSON Schema (see `RESULT_CONTRACTS`). A task
    verified automatically is judged in the same plan: RESULT_SUBMITTED, then TASK_VERIFIED.
    `proposal`: what the attempt proposed to a governed repository, if it did (the result must
    state its changed files and head as the proposal shows them)."""
    require_timestamp(now)
    require_jitter(jitter)
    digest = submit_digest(request)
    replay = replay_or_conflict(state.prior, digest, SubmitAnswer)
    if replay is not None:
        return replay
    task = _require(request.task_id, state.task)
    _check_lease(task, request.lease_token, now)
    status = next_task_status(task.status, TaskOperation.SUBMIT)
    check_task_result(task, request.result, contracts)
    if proposal is not None and (proposal.task_id, proposal.attempt) == (
        task.task_id,
        task.attempt,
    ):
        require_stated_work(request.result, proposal.changed_files(), proposal.head_oid)
    result_json = encode_checked(request.result)
    result_digest = sha256_of_canonical(result_json)  # sha256_hex, from the one encoding
    submitted = _release(
        task,
        now,
        status=status,
        result_json=result_json,
        result_digest=result_digest,
        result_idempotency_key=request.idempotency_key,
    )
    payload: JsonObject = {
        "attempt": submitted.attempt,
        "result_digest": result_digest,
        "idempotency_key": request.idempotency_key,
    }
    writes = [_cas(task, submitted)]
    events = [_event(submitted, RESULT_SUBMITTED, payload, task.claimed_by)]
    settled = submitted
    if task.verification_mode == VerificationMode.AUTO:
        judgement = automatic_judgement(request.result)
        settled, verified = _judged(submitted, judgement, now, jitter=jitter, automatic=True)
        writes.append(_cas(submitted, settled))
        events.append(verified)
    answer: SubmitAnswer = {
        **task_summary(settled),
        "result_digest": result_digest,
        "idempotent": False,
    }
    first = _first_answer(request.idempotency_key, "submit", task.task_id, digest, answer, now)
    writes.append(_answer_write(first))
    events[-1] = _answered(events[-1], first)
    return sealed_plan(writes, events, answer, tail=state.tail)


# ---------------------------------------------------------------------------------------------
# verify


def verify_digest(request: VerifyRequest) -> str:
    return request_digest("verify", request.task_id, request.public())


def _judged(
    task: TaskRow, judgement: Judgement, now: Timestamp, *, jitter: float, automatic: bool
) -> tuple[TaskRow, EventAppend]:
    """A SUBMITTED task after `judgement` and its TASK_VERIFIED event. NEEDS_REWORK goes back to
    QUEUED behind the task's backoff (its `attempt`-th retry), or FAILED when used up."""
    attempts_left = task.attempt < task.max_attempts
    status = next_task_status(
        task.status, verify_operation(judgement.decision, attempts_left=attempts_left)
    )
    marks: JsonObject = {"automatic": True} if automatic else {}
    verification: JsonObject = {
        "decision": judgement.decision,
        "reason": judgement.reason,
        **marks,
    }
    not_before = task.not_before
    if status == TaskStatus.QUEUED:
        not_before = retry_not_before(task.retry_policy(), task.attempt, jitter, now).text
    verified = _release(
        task,
        now,
        status=status,
        not_before=not_before,
        verification_json=encode_checked(verification),
    )
    payload: JsonObject = {
        "decision": judgement.decision,
        "next_state": status,
        "reason": judgement.reason,
        **marks,
    }
    if status == TaskStatus.QUEUED:
        payload["not_before"] = not_before
    return verified, _event(verified, TASK_VERIFIED, payload, None)


def decide_verify(
    state: TaskState,
    request: VerifyRequest,
    *,
    now: Timestamp,
    jitter: float,
    reviewer: str | None = None,
) -> Decision[VerifyAnswer]:
    """SUCCEEDED; NEEDS_REWORK back to QUEUED after the backoff (FAILED when attempts are used
    up); FAILED. Separation of duties: a `reviewer` (the name a verify is made under: an HTTP
    token's) that wrote the result itself (`state.result_author`) is `SELF_REVIEW`."""
    require_timestamp(now)
    require_jitter(jitter)
    digest = verify_digest(request)
    replay = replay_or_conflict(state.prior, digest, VerifyAnswer)
    if replay is not None:
        return replay
    task = _require(request.task_id, state.task)
    # The state machine first: a task that is not SUBMITTED has nothing to judge.
    next_task_status(task.status, verify_operation(request.decision, attempts_left=True))
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
    judgement = Judgement(request.decision, request.reason)
    verified, event = _judged(task, judgement, now, jitter=jitter, automatic=False)
    answer: VerifyAnswer = {
        **task_summary(verified),
        "decision": request.decision,
        "next_state": verified.status,
        "result_digest": task.result_digest,
        "idempotent": False,
    }
    first = _first_answer(request.idempotency_key, "verify", task.task_id, digest, answer, now)
    return sealed_plan(
        (_cas(task, verified), _answer_write(first)),
        (_answered(event, first),),
        answer,
        tail=state.tail,
    )


# ---------------------------------------------------------------------------------------------
# cancel


def cancel_digest(request: CancelRequest) -> str:
    return request_digest("cancel", request.task_id, request.public())


def decide_cancel(
    state: TaskState, request: CancelRequest, *, now: Timestamp
) -> Decision[CancelAnswer]:
    require_timestamp(now)
    digest = cancel_digest(request)
    replay = replay_or_conflict(state.prior, digest, CancelAnswer)
    if replay is not None:
        return replay
    task = _require(request.task_id, state.task)
    cancelled = _release(
        task,
        now,
        status=next_task_status(task.status, TaskOperation.CANCEL),
    )
    answer: CancelAnswer = {
        **task_summary(cancelled),
        "previous_status": task.status,
        "idempotent": False,
    }
    payload: JsonObject = {"reason": request.reason, "previous_status": task.status}
    first = _first_answer(request.idempotency_key, "cancel", task.task_id, digest, answer, now)
    return sealed_plan(
        (_cas(task, cancelled), _answer_write(first)),
        (_answered(_event(cancelled, TASK_CANCELLED, payload, None), first),),
        answer,
        tail=state.tail,
    )


# ---------------------------------------------------------------------------------------------
# retry


def retry_digest(request: RetryRequest) -> str:
    return request_digest("retry", request.task_id, request.public())


def decide_retry(
    state: TaskState, request: RetryRequest, *, now: Timestamp
) -> Decision[RetryAnswer]:
    """A FAILED or CANCELLED task back to QUEUED at once, with `extra_attempts` more attempts."""
    require_timestamp(now)
    digest = retry_digest(request)
    replay = replay_or_conflict(state.prior, digest, RetryAnswer)
    if replay is not None:
        return replay
    task = _require(request.task_id, state.task)
    requeued = _release(
        task,
        now,
        status=next_task_status(task.status, TaskOperation.RETRY),
        max_attempts=task.max_attempts + request.extra_attempts,
        not_before=None,
    )
    answer: RetryAnswer = {
        **task_summary(requeued),
        "previous_status": task.status,
        "idempotent": False,
    }
    payload: JsonObject = {
        "reason": request.reason,
        "previous_status": task.status,
        "attempt": task.attempt,
        "max_attempts": requeued.max_attempts,
    }
    first = _first_answer(request.idempotency_key, "retry", task.task_id, digest, answer, now)
    return sealed_plan(
        (_cas(task, requeued), _answer_write(first)),
        (_answered(_event(requeued, TASK_REQUEUED, payload, None), first),),
        answer,
        tail=state.tail,
    )


# ---------------------------------------------------------------------------------------------
# expire


def decide_expire(
    state: ExpiryState, request: ExpireRequest, *, now: Timestamp
) -> WritePlan[ExpireAnswer] | None:
    """Every CLAIMED task whose lease has passed, up to the request's limit, goes back to
    QUEUED (FAILED when used up); None when no lease has passed."""
    require_timestamp(now)
    writes: list[SqlWrite] = []
    events: list[EventAppend] = []
    expired: list[TaskSummary] = []
    for task in state.tasks:
        if len(writes) == request.limit:
            break
        if task.status != TaskStatus.CLAIMED or not _passed(task.lease_expires_at, now):
            continue
        attempts_left = task.attempt < task.max_attempts
        released = _release(
            task,
            now,
            status=next_task_status(task.status, expire_operation(attempts_left=attempts_left)),
        )
        payload: JsonObject = {
            "attempt": task.attempt,
            "lease_expires_at": task.lease_expires_at,
            "next_state": released.status,
        }
        writes.append(_cas(task, released))
        events.append(_event(released, TASK_LEASE_EXPIRED, payload, task.claimed_by))
        expired.append(task_summary(released))
    if not writes:
        return None
    answer: ExpireAnswer = {"expired": expired, "count": len(expired)}
    return sealed_plan(writes, events, answer, tail=state.tail)
