"""The initial execution projection of a task created without an envelope, and its recovery after a
source capture that asked for rework."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Annotated, Any

import attrs
from aios_ledger.core.actors import Actor
from aios_ledger.core.contracts.checks import require_contract
from aios_ledger.core.digests import canonical_json, sha256_hex
from aios_ledger.core.envelopes import (
    GOVERNANCE_FLAGS,
    GovernedExecutionBinding,
    verify_execution_envelope,
)
from aios_ledger.core.errors import InitialExecutionProjectionError as ProjectionError
from aios_ledger.core.errors import LedgerError
from aios_ledger.core.jsonvalue import JsonObject, JsonValue
from aios_ledger.core.kinds import Between, Identifier, LedgerDigest, Sha256Hex, Text
from aios_ledger.core.log.idempotency import IdempotencyRow
from aios_ledger.core.log.plan import (
    Decision,
    Replay,
    WritePlan,
    replay_or_conflict,
    request_digest,
    sealed_plan,
    stored_answer,
)
from aios_ledger.core.log.records import EventRow
from aios_ledger.core.log.rows import INITIAL_PROJECTIONS, SOURCE_CAPTURE_RECOVERIES
from aios_ledger.core.log.tail import EventAppend, LogTail
from aios_ledger.core.projection.answers import ProjectionAnswer
from aios_ledger.core.projection.bindings import source_capture_envelope
from aios_ledger.core.projection.records import ProjectionLedgerRow
from aios_ledger.core.statements import SqlWrite, Statement, guarded_update
from aios_ledger.core.structuring import Structured, refuse_as, structure
from aios_ledger.core.tasks.records import TaskRow, require_task
from aios_ledger.core.tasks.refusals import (
    PROJECTION_REFUSED,
    REFUSAL_EVENTS,
    RefusalAnswer,
    RefusalState,
    RefusedAttempt,
    decide_refusal,
    replay_refusal,
)
from aios_ledger.core.tasks.transitions import TaskStatus
from aios_ledger.core.timestamps import Timestamp, require_timestamp

PROJECTION_EVENT = "TASK_INITIAL_EXECUTION_PROJECTION_AUTHORIZED"
RUNTIME_ACTION = "agent_runtime"
LEGACY_SCOPE: JsonObject = {"scope_type": "legacy", "tenant_id": None, "project_id": None}
MAX_REVISION = 2**62
# Where the shell reads the owner's authorization id from (the core only names it, to say so).
AUTHORIZATION_SETTING = "AIOS_AGENT_TASK_INITIAL_EXECUTION_PROJECTION_AUTHORIZATION_ID"
# The checks whose refusal is recorded on the task's chain; a request that does not parse, a
# missing task, a reused key and the resolver's own failures leave no trace.
PROJECTION_REFUSALS = frozenset(
    {
        "AUTHORIZATION_DENIED",
        "TASK_ALREADY_CLAIMED",
        "ACTIVE_LEASE_DENY",
        "TASK_EXECUTION_ALREADY_PROJECTED",
        "TASK_INITIAL_CAPABILITIES_MUST_BE_EMPTY",
        "REVISION_CONFLICT",
        "METADATA_DIGEST_MISMATCH",
        "REQUIRED_CAPABILITIES_DIGEST_MISMATCH",
        "TASK_INITIAL_EVENT_CHAIN_REQUIRED",
        "SOURCE_CAPTURE_RECOVERY_EVENT_CHAIN_INVALID",
        "SOURCE_CAPTURE_NEEDS_REWORK_VERIFICATION_REQUIRED",
        "VERIFICATION_DIGEST_MISMATCH",
        "SOURCE_CAPTURE_RESULT_DIGEST_MISMATCH",
        "SOURCE_CAPTURE_RESULT_CONTRACT_INVALID",
        "SOURCE_CAPTURE_EXECUTION_DIGEST_MISMATCH",
        "EXECUTION_ENVELOPE_INVALID",
        "GOVERNED_BINDING_CONFLICT",
        "EXECUTION_ACTION_INVALID",
        "EXECUTION_ADAPTER_MISMATCH",
        "EXECUTION_CAPABILITY_MISMATCH",
        "EXECUTION_RUNTIME_INPUT_MISMATCH",
        "EXECUTION_DIGEST_DRIFT",
    }
)

_REFUSE = refuse_as(ProjectionError, "FIELDS_INVALID")

Revision = Annotated[int, Between(1, MAX_REVISION)]
Attempt = Annotated[int, Between(0, MAX_REVISION)]
Reason = Annotated[str, Text(max_length=1000)]


@attrs.frozen
class _ProjectionFields(Structured):
    expected_status: TaskStatus
    expected_revision: Revision
    expected_attempt: Attempt
    expected_metadata_sha256: Sha256Hex
    expected_required_capabilities_sha256: Sha256Hex
    expected_job_id: Identifier
    expected_execution_digest: LedgerDigest
    required_capability: Identifier
    adapter: Identifier
    authorization_id: Identifier
    idempotency_key: Identifier
    reason: Reason


@attrs.frozen
class InitialExecutionProjectionRequest(_ProjectionFields):
    @classmethod
    def from_mapping(cls, raw: object) -> InitialExecutionProjectionRequest:
        request = structure(raw, cls, what="request", refuse=_REFUSE)
        initial = (request.expected_status, request.expected_revision, request.expected_attempt)
        if initial != ("QUEUED", 1, 0):
            raise ProjectionError(
                "INITIAL_STATE_REQUIRED",
                "the initial projection applies only to a QUEUED task at revision 1, attempt 0",
            )
        return request


@attrs.frozen
class SourceCaptureProjectionRecoveryRequest(_ProjectionFields):
    """The recovery also names the source capture it recovers from: the verification that asked for
    rework, the captured result and the capture's execution digest."""

    previous_verification_sha256: Sha256Hex
    expected_source_capture_result_sha256: Sha256Hex
    expected_source_capture_execution_digest: LedgerDigest

    @classmethod
    def from_mapping(cls, raw: object) -> SourceCaptureProjectionRecoveryRequest:
        request = structure(raw, cls, what="request", refuse=_REFUSE)
        if request.expected_status != "QUEUED" or request.expected_attempt < 1:
            raise ProjectionError(
                "SOURCE_CAPTURE_RECOVERY_STATE_REQUIRED",
                "recovery applies only to a QUEUED task after at least one attempt",
            )
        return request


ProjectionRequest = InitialExecutionProjectionRequest | SourceCaptureProjectionRecoveryRequest


@attrs.frozen
class ProjectionCommand:
    """One projection, or its recovery, asked of one task."""

    task_id: str
    request: ProjectionRequest


@attrs.frozen
class ProjectionState:
    """The task, its events in order, the answer and refusal under the key, and the tail."""

    task: TaskRow | None
    events: tuple[EventRow, ...]
    prior: IdempotencyRow | None
    tail: LogTail
    refused: IdempotencyRow | None = None


@attrs.frozen
class ResolverCall:
    """The arguments of `resolver(task_id, job_id, capability, adapter, runtime_input)`."""

    task_id: str
    job_id: str
    capability: str
    adapter: str
    runtime_input: JsonObject


def projection_operation(request: ProjectionRequest) -> str:
    """The operation a projection's request digest and a refusal's recorded answer name."""
    if isinstance(request, SourceCaptureProjectionRecoveryRequest):
        return "project_from_source_capture"
    return "project"


def _drifted(what: str, actual: object, expected: object) -> str:
    return f"{what} has sha256 {actual}, the request expects {expected}"


def require_authorization(authorization_id: str | None) -> str:
    """The owner authorization in force; none configured is `AUTHORIZATION_DENIED`."""
    if not authorization_id:
        raise ProjectionError(
            "AUTHORIZATION_DENIED",
            "no owner authorization is configured for projections: the owner sets "
            f"{AUTHORIZATION_SETTING} where the ledger runs (for the API: in the environment "
            "of `serve`)",
        )
    return authorization_id


def prepare_projection(
    state: ProjectionState, command: ProjectionCommand, *, authorization_id: str | None
) -> Replay[ProjectionAnswer] | ResolverCall:
    """Before resolving: authorization, then replay, then which envelope the task needs."""
    task_id, request = command.task_id, command.request
    if request.authorization_id != require_authorization(authorization_id):
        raise ProjectionError(
            "AUTHORIZATION_DENIED",
            "the request's authorization_id is not the owner authorization configured in "
            f"{AUTHORIZATION_SETTING}: ask the owner for it",
        )
    digest = _request_digest(task_id, request)
    replay = replay_or_conflict(state.prior, digest, ProjectionAnswer, error=ProjectionError)
    if replay is not None:
        return replay
    replay_refusal(state.refused, digest, error=ProjectionError)
    task = require_task(task_id, state.task, error=ProjectionError)
    return ResolverCall(
        task_id=task_id,
        job_id=request.expected_job_id,
        capability=request.required_capability,
        adapter=request.adapter,
        runtime_input=runtime_input_of(task),
    )


def runtime_input_of(task: TaskRow) -> JsonObject:
    """The runtime input an envelope for this task must carry, derived from the task itself."""
    scope = as_projection_error(task.metadata).get("scope", LEGACY_SCOPE)
    return {
        "goal": task.goal,
        "instructions": task.instructions,
        "success_criteria": as_projection_error(task.success_criteria),
        "constraints": as_projection_error(task.constraints),
        "scope": scope,
        "trace_id": task.task_id,
    }


def projection_expectations(task: TaskRow, job_id: str, execution_digest: str | None) -> JsonObject:
    """The `expected_*` values an owner pins, so that a change meanwhile is refused."""
    return {
        "expected_status": task.status,
        "expected_revision": task.revision,
        "expected_attempt": task.attempt,
        "expected_metadata_sha256": sha256_hex(as_projection_error(task.metadata)),
        "expected_required_capabilities_sha256": sha256_hex(
            as_projection_error(task.required_capabilities)
        ),
        "expected_job_id": job_id,
        "expected_execution_digest": execution_digest,
    }


def decide_projection(
    state: ProjectionState,
    request: ProjectionCommand,
    *,
    now: Timestamp,
    actor: Actor,
    envelope: object,
    authorization_id: str | None,
    source_capture_contract: Mapping[str, object],
) -> Decision[ProjectionAnswer]:
    """Every precondition, in the contract's order; `envelope` is the resolver's answer."""
    require_timestamp(now)
    prepared = prepare_projection(state, request, authorization_id=authorization_id)
    if isinstance(prepared, Replay):
        return prepared
    # Past authorization and replay, the checks run in the contract's order, then the plan.
    asked = request.request
    task = require_task(request.task_id, state.task, error=ProjectionError)
    metadata = _check_untouched_task(task, asked)
    recovery: JsonObject = {}
    if isinstance(asked, SourceCaptureProjectionRecoveryRequest):
        _check_recovery_event_chain(state.events)
        verified_result = _check_source_capture(task, asked, source_capture_contract)
        checked = check_envelope(task, asked, envelope)
        recovery = _check_capture_matches_envelope(verified_result, checked, asked)
    else:
        _check_initial_event_chain(state.events)
        checked = check_envelope(task, asked, envelope)
    return _plan(task, asked, metadata, checked, recovery, now, actor, state.tail)


def _request_digest(task_id: str, request: ProjectionRequest) -> str:
    return request_digest(projection_operation(request), task_id, request.public())


def as_projection_error(read: Any) -> Any:
    """`read()`, its refusal raised as the projection's own error class."""
    try:
        return read()
    except LedgerError as refused:
        raise ProjectionError(refused.code, refused.detail) from None


def _state_text(status: str, revision: int, attempt: int) -> str:
    """A task's state in words: a status as its text, never a Python repr of it."""
    return f"{status} at revision {revision}, attempt {attempt}"


def _check_untouched_task(task: TaskRow, request: ProjectionRequest) -> JsonObject:
    metadata = check_unprojected_task(task)
    observed = (task.status, task.revision, task.attempt)
    expected = (request.expected_status, request.expected_revision, request.expected_attempt)
    if observed != expected:
        raise ProjectionError(
            "REVISION_CONFLICT",
            f"task is {_state_text(*observed)}, the request expects {_state_text(*expected)}",
        )
    capabilities = as_projection_error(task.required_capabilities)
    if sha256_hex(metadata) != request.expected_metadata_sha256:
        raise ProjectionError(
            "METADATA_DIGEST_MISMATCH",
            _drifted("the task's metadata", sha256_hex(metadata), request.expected_metadata_sha256),
        )
    if sha256_hex(capabilities) != request.expected_required_capabilities_sha256:
        raise ProjectionError(
            "REQUIRED_CAPABILITIES_DIGEST_MISMATCH",
            _drifted(
                "the task's required capabilities",
                sha256_hex(capabilities),
                request.expected_required_capabilities_sha256,
            ),
        )
    return metadata


def check_unprojected_task(task: TaskRow) -> JsonObject:
    """The request-free checks of a task a projection may take; answers its metadata."""
    if task.claimed_by is not None:
        raise ProjectionError("TASK_ALREADY_CLAIMED", f"task is claimed by {task.claimed_by!r}")
    if task.lease_token_hash is not None or task.lease_expires_at is not None:
        raise ProjectionError("ACTIVE_LEASE_DENY", "task holds a lease")
    metadata: JsonObject = as_projection_error(task.metadata)
    if "execution" in metadata:
        raise ProjectionError("TASK_EXECUTION_ALREADY_PROJECTED", "task already has an envelope")
    capabilities = as_projection_error(task.required_capabilities)
    if capabilities:
        raise ProjectionError(
            "TASK_INITIAL_CAPABILITIES_MUST_BE_EMPTY", f"task already requires {capabilities}"
        )
    return metadata


def _transitions(events: tuple[EventRow, ...]) -> list[EventRow]:
    """The events that moved the task: a refused attempt must not fail a later projection."""
    return [event for event in events if event.event_type not in REFUSAL_EVENTS]


def _check_initial_event_chain(events: tuple[EventRow, ...]) -> None:
    types = [event.event_type for event in _transitions(events)]
    if types != ["TASK_CREATED"]:
        raise ProjectionError(
            "TASK_INITIAL_EVENT_CHAIN_REQUIRED",
            f"the task's events must be exactly [TASK_CREATED], found {types[:8]}",
        )


def _check_recovery_event_chain(events: tuple[EventRow, ...]) -> None:
    """Created, claimed once, at least one heartbeat, submitted once, verified NEEDS_REWORK."""
    events = tuple(_transitions(events))
    types = [event.event_type for event in events]
    heartbeats = types[2:-2]
    shape_ok = (
        len(types) >= 5
        and types[:2] == ["TASK_CREATED", "TASK_CLAIMED"]
        and types[-2:] == ["RESULT_SUBMITTED", "TASK_VERIFIED"]
        and all(kind == "TASK_HEARTBEAT" for kind in heartbeats)
    )
    # The verification may say more (its reason, the backoff): these two are what it decided.
    verdict = events[-1].payload() if shape_ok else None
    requeued = (
        isinstance(verdict, dict)
        and verdict.get("decision") == "NEEDS_REWORK"
        and verdict.get("next_state") == "QUEUED"
    )
    if not requeued:
        raise ProjectionError(
            "SOURCE_CAPTURE_RECOVERY_EVENT_CHAIN_INVALID",
            "events must be TASK_CREATED, TASK_CLAIMED, TASK_HEARTBEAT+, RESULT_SUBMITTED, "
            f"TASK_VERIFIED(NEEDS_REWORK -> QUEUED); found {types[:12]}",
        )


def _check_source_capture(
    task: TaskRow, request: SourceCaptureProjectionRecoveryRequest, contract: Mapping[str, object]
) -> JsonObject:
    verification = as_projection_error(task.verification)
    if verification is None:
        raise ProjectionError(
            "SOURCE_CAPTURE_NEEDS_REWORK_VERIFICATION_REQUIRED", "the task was never verified"
        )
    if sha256_hex(verification) != request.previous_verification_sha256:
        raise ProjectionError(
            "VERIFICATION_DIGEST_MISMATCH",
            _drifted(
                "the stored verification",
                sha256_hex(verification),
                request.previous_verification_sha256,
            ),
        )
    if not isinstance(verification, dict) or verification.get("decision") != "NEEDS_REWORK":
        raise ProjectionError(
            "SOURCE_CAPTURE_NEEDS_REWORK_VERIFICATION_REQUIRED",
            "the source capture must have been verified NEEDS_REWORK",
        )
    result = as_projection_error(task.result)
    digest = None if result is None else sha256_hex(result)
    stored_digest_ok = task.result_digest is None or task.result_digest == digest
    if digest != request.expected_source_capture_result_sha256 or not stored_digest_ok:
        raise ProjectionError(
            "SOURCE_CAPTURE_RESULT_DIGEST_MISMATCH",
            _drifted(
                "the stored result",
                digest if stored_digest_ok else f"{digest} (stored as {task.result_digest})",
                request.expected_source_capture_result_sha256,
            ),
        )
    require_contract(
        contract, result, code="SOURCE_CAPTURE_RESULT_CONTRACT_INVALID", error=ProjectionError
    )
    assert isinstance(result, dict)  # the contract requires an object
    if result["task_id"] != task.task_id or result["job_id"] != request.expected_job_id:
        raise ProjectionError(
            "SOURCE_CAPTURE_RESULT_CONTRACT_INVALID",
            "$.task_id/$.job_id: the result belongs to another task or job",
        )
    if result["execution_digest"] != request.expected_source_capture_execution_digest:
        raise ProjectionError(
            "SOURCE_CAPTURE_EXECUTION_DIGEST_MISMATCH",
            f"the result's execution_digest is {result['execution_digest']}, the request "
            f"expects {request.expected_source_capture_execution_digest}",
        )
    return result


def check_envelope(task: TaskRow, request: ProjectionRequest, envelope: object) -> JsonObject:
    checked: JsonObject = as_projection_error(lambda: verify_execution_envelope(envelope))
    if checked["task_id"] != task.task_id or checked["job_id"] != request.expected_job_id:
        raise ProjectionError(
            "GOVERNED_BINDING_CONFLICT",
            f"the resolved envelope is bound to task {checked['task_id']!r}, "
            f"job {checked['job_id']!r}",
        )
    if checked["action"] != RUNTIME_ACTION:
        raise ProjectionError(
            "EXECUTION_ACTION_INVALID",
            f"only an {RUNTIME_ACTION} envelope can be projected, got {checked['action']!r}",
        )
    if checked["adapter"] != request.adapter:
        raise ProjectionError("EXECUTION_ADAPTER_MISMATCH", "the envelope runs another adapter")
    scope = checked["capability_scope"]
    assert isinstance(scope, list)
    if scope[0] != request.required_capability:
        raise ProjectionError(
            "EXECUTION_CAPABILITY_MISMATCH", f"envelope grants {scope}, request names another"
        )
    if canonical_json(checked["runtime_input"]) != canonical_json(runtime_input_of(task)):
        raise ProjectionError(
            "EXECUTION_RUNTIME_INPUT_MISMATCH", "the envelope's runtime input is not the task's"
        )
    if checked["execution_digest"] != request.expected_execution_digest:
        raise ProjectionError(
            "EXECUTION_DIGEST_DRIFT",
            f"resolved envelope is {checked['execution_digest']}, "
            f"the request expects {request.expected_execution_digest}",
        )
    return checked


def decide_projection_refusal(
    state: ProjectionState,
    command: ProjectionCommand,
    refused: LedgerError,
    *,
    now: Timestamp,
    actor: Actor,
) -> Decision[RefusalAnswer] | None:
    """Record a projection refused by one of `PROJECTION_REFUSALS` as a sealed event."""
    if refused.code not in PROJECTION_REFUSALS:
        return None
    request = command.request
    attempt = RefusedAttempt(
        operation=projection_operation(request),
        event_type=PROJECTION_REFUSED,
        task_id=command.task_id,
        idempotency_key=request.idempotency_key,
        request_sha256=_request_digest(command.task_id, request),
        code=refused.code,
        message=refused.detail,
        attempted={
            "job_id": request.expected_job_id,
            "execution_digest": request.expected_execution_digest,
            "required_capability": request.required_capability,
            "adapter": request.adapter,
            "reason": request.reason,
            "recovery_from_source_capture": isinstance(
                request, SourceCaptureProjectionRecoveryRequest
            ),
        },
    )
    recorded = RefusalState(
        task=state.task, prior=state.refused, answered=state.prior is not None, tail=state.tail
    )
    return decide_refusal(recorded, attempt, now=now, actor=actor, error=ProjectionError)


_BOUND_RESULT_FIELDS = ("repository", "base_oid", "expected_branch_oid", "target_branch")


def _check_capture_matches_envelope(
    result: JsonObject, envelope: JsonObject, request: SourceCaptureProjectionRecoveryRequest
) -> JsonObject:
    """The capture must have run on the very binding the runtime envelope now carries."""
    binding_fields = envelope["binding"]
    assert isinstance(binding_fields, dict)
    binding = GovernedExecutionBinding.from_mapping(binding_fields)
    drifted = [name for name in _BOUND_RESULT_FIELDS if result[name] != binding_fields[name]]
    if result["generation"] != binding.generation:
        drifted.append("generation")
    if drifted:
        raise ProjectionError(
            "SOURCE_CAPTURE_RESULT_CONTRACT_INVALID",
            f"the capture ran on another binding: {drifted}",
        )
    capture = source_capture_envelope(binding)
    if capture["execution_digest"] != result["execution_digest"]:
        raise ProjectionError(
            "SOURCE_CAPTURE_EXECUTION_DIGEST_MISMATCH",
            f"the result's execution_digest is {result['execution_digest']}, the source "
            f"capture of this binding is {capture['execution_digest']}",
        )
    return {
        "source_capture_execution_digest": result["execution_digest"],
        "source_capture_result_sha256": request.expected_source_capture_result_sha256,
        "previous_verification_sha256": request.previous_verification_sha256,
    }


def _plan(
    task: TaskRow,
    request: ProjectionRequest,
    metadata: JsonObject,
    envelope: JsonObject,
    recovery: JsonObject,
    now: Timestamp,
    actor: Actor,
    tail: LogTail,
) -> WritePlan[ProjectionAnswer]:
    is_recovery = isinstance(request, SourceCaptureProjectionRecoveryRequest)
    governance = envelope["governance"]
    assert isinstance(governance, dict)
    capabilities: list[JsonValue] = [request.required_capability]
    # The envelope passed `verify_execution_envelope`: these fields are text.
    answer: ProjectionAnswer = {
        "task_id": task.task_id,
        "job_id": request.expected_job_id,
        "status": task.status,
        "revision": task.revision + 1,
        "attempt": task.attempt,
        "execution_digest": str(envelope["execution_digest"]),
        "action": str(envelope["action"]),
        "adapter": str(envelope["adapter"]),
        "required_capabilities": [request.required_capability],
        "recovery_from_source_capture": is_recovery,
        "idempotent": False,
    }
    payload: JsonObject = {
        "task_id": task.task_id,
        "job_id": request.expected_job_id,
        **{name: envelope[name] for name in ("execution_digest", "action", "adapter")},
        "capability_scope": envelope["capability_scope"],
        "authorization_id": request.authorization_id,
        "idempotency_key": request.idempotency_key,
        "reason": request.reason,
        "recovery_from_source_capture": is_recovery,
        **{flag: bool(governance[flag]) for flag in GOVERNANCE_FLAGS},
        **recovery,
    }
    projected = task._replace(
        metadata_json=canonical_json({**metadata, "execution": envelope}),
        required_capabilities_json=canonical_json(capabilities),
        revision=task.revision + 1,
        updated_at=now.text,
        awaiting_projection=0,  # a governed task's hold ends here, in the projection's write
    )
    update = guarded_update(Statement.PROJECT_TASK_EXECUTION, projected, request.expected_revision)
    ledger_row = ProjectionLedgerRow(
        idempotency_key=request.idempotency_key,
        task_id=task.task_id,
        job_id=request.expected_job_id,
        request_sha256=_request_digest(task.task_id, request),
        execution_digest=answer["execution_digest"],
        response_json=stored_answer(answer),
        created_at=now.text,
    )
    ledger_table, insert_ledger = (
        (SOURCE_CAPTURE_RECOVERIES, Statement.INSERT_SOURCE_CAPTURE_RECOVERY)
        if is_recovery
        else (INITIAL_PROJECTIONS, Statement.INSERT_INITIAL_PROJECTION)
    )
    ledger = SqlWrite(insert_ledger, ledger_row._asdict())
    event = EventAppend(
        task_id=task.task_id,
        agent_id=None,
        event_type=PROJECTION_EVENT,
        payload=payload,
        created_at=now.text,
        rows=(ledger_row.image(ledger_table),),
        written=projected.written(task),
        actor=actor,
    )
    return sealed_plan((update, ledger), (event,), answer, tail=tail)
