"""`project TASK --pin`: the initial projection request pinned to exactly what the shell read, so
that a change before the write is refused by the projection itself."""

from __future__ import annotations

import attrs
from aios_ledger.core.digests import sha256_hex
from aios_ledger.core.envelopes import ACTIONS, verify_execution_envelope
from aios_ledger.core.errors import InitialExecutionProjectionError as ProjectionError
from aios_ledger.core.jsonvalue import JsonObject
from aios_ledger.core.kinds import IDENTIFIER
from aios_ledger.core.projection.decisions import (
    RUNTIME_ACTION,
    InitialExecutionProjectionRequest,
    ResolverCall,
    as_projection_error,
    check_envelope,
    check_unprojected_task,
    projection_expectations,
    require_authorization,
    runtime_input_of,
)
from aios_ledger.core.projection.records import BindingRow
from aios_ledger.core.tasks.records import TaskRow, require_task

DEFAULT_PIN_REASON = "projected with `project --pin`, pinned to the task and envelope as read"
PIN_KEY_PREFIX = "pin-"
# What the owner reads of the binding before a pinned projection is applied.
_AUTHORIZED_BINDING = ("repository", "base_oid", "target_branch", "branch_mode", "generation")


@attrs.frozen
class PinRead:
    """The task and at most two of its bindings (a second makes the job ambiguous)."""

    task_id: str
    task: TaskRow | None
    bindings: tuple[BindingRow, ...]


@attrs.frozen
class PinCommand:
    """What the owner says; the default key derives from everything pinned."""

    adapter: str
    authorization_id: str | None
    job_id: str | None = None
    reason: str | None = None
    idempotency_key: str | None = None


@attrs.frozen
class PinnedProjection:
    """The request to apply and what it authorizes, for the owner to read before it is applied."""

    request: InitialExecutionProjectionRequest
    authorized: JsonObject


def prepare_pin(read: PinRead, command: PinCommand) -> ResolverCall:
    """Before resolving: the authorization, the task, the job and the envelope's capability."""
    require_authorization(command.authorization_id)
    task = require_task(read.task_id, read.task, error=ProjectionError)
    check_unprojected_task(task)
    adapter = _identifier("adapter", command.adapter)
    job_id = _job(read, command.job_id)
    capability = ACTIONS[RUNTIME_ACTION].required_capability.format(adapter=adapter)
    return ResolverCall(
        task_id=read.task_id,
        job_id=job_id,
        capability=capability,
        adapter=adapter,
        runtime_input=runtime_input_of(task),
    )


def pin_projection(
    read: PinRead, command: PinCommand, call: ResolverCall, envelope: object
) -> PinnedProjection:
    """The request pinned to what was read and resolved, checked as the projection will."""
    authorization_id = require_authorization(command.authorization_id)
    task = require_task(read.task_id, read.task, error=ProjectionError)
    check_unprojected_task(task)
    verified: JsonObject = as_projection_error(lambda: verify_execution_envelope(envelope))
    fields: JsonObject = {
        **projection_expectations(task, call.job_id, str(verified["execution_digest"])),
        "required_capability": call.capability,
        "adapter": call.adapter,
        "authorization_id": authorization_id,
        "reason": command.reason if command.reason is not None else DEFAULT_PIN_REASON,
    }
    key = (
        command.idempotency_key
        or PIN_KEY_PREFIX + sha256_hex({"task_id": read.task_id, **fields})[:40]
    )
    request = InitialExecutionProjectionRequest.from_mapping({**fields, "idempotency_key": key})
    check_envelope(task, request, verified)
    binding = verified["binding"]
    assert isinstance(binding, dict)  # a verified envelope carries its binding
    authorized: JsonObject = {
        **{name: getattr(task, name) for name in ("task_id", "status", "revision", "attempt")},
        "job_id": request.expected_job_id,
        **{name: binding[name] for name in _AUTHORIZED_BINDING},
        "capability": request.required_capability,
        "capability_scope": verified["capability_scope"],
        "adapter": request.adapter,
        "execution_digest": request.expected_execution_digest,
        "authorization_id": request.authorization_id,
        "idempotency_key": request.idempotency_key,
    }
    return PinnedProjection(request=request, authorized=authorized)


def _job(read: PinRead, named: str | None) -> str:
    if named is not None:
        return _identifier("job_id", named)
    jobs = [row.job_id for row in read.bindings]
    if not jobs:
        raise ProjectionError(
            "GOVERNED_BINDING_NOT_FOUND",
            f"no binding is registered for task {read.task_id!r}: register one first "
            "(`binding put`), or name the job whose binding the resolver answers",
        )
    if len(jobs) > 1:
        raise ProjectionError(
            "GOVERNED_BINDING_AMBIGUOUS",
            f"task {read.task_id!r} has bindings for several jobs ({', '.join(jobs)}, ...): "
            "name the job to project",
        )
    return jobs[0]


def _identifier(name: str, value: str) -> str:
    if not IDENTIFIER.fullmatch(value):
        raise ProjectionError(
            "FIELDS_INVALID",
            f"{name}: {value[:80]!r} is not an identifier (1-200 of A-Z a-z 0-9 . _ : / @ + = -, "
            "starting with a letter or digit)",
        )
    return value
