"""Registering a governed binding: write-once per (task, job), idempotent by content."""

from __future__ import annotations

import attrs
from aios_ledger.core.actors import Actor
from aios_ledger.core.digests import canonical_json, sha256_hex
from aios_ledger.core.envelopes import GovernedExecutionBinding, project_execution_envelope
from aios_ledger.core.errors import LedgerError
from aios_ledger.core.jsonvalue import JsonObject, JsonValue
from aios_ledger.core.kinds import ROUTE_IDENTIFIER
from aios_ledger.core.log.plan import Decision, Replay, sealed_plan
from aios_ledger.core.log.tail import EventAppend, LogTail
from aios_ledger.core.projection.answers import BindingAnswer
from aios_ledger.core.projection.records import BindingRow
from aios_ledger.core.statements import SqlWrite, Statement
from aios_ledger.core.timestamps import Timestamp, require_timestamp

BINDING_REGISTERED = "GOVERNED_BINDING_REGISTERED"


@attrs.frozen
class BindingState:
    """The binding stored for the task and job (None: none), and the log's tail."""

    prior: BindingRow | None
    tail: LogTail


def decide_register_binding(
    state: BindingState, request: GovernedExecutionBinding, *, now: Timestamp, actor: Actor
) -> Decision[BindingAnswer]:
    """Store the binding or replay it; another for the task and job is a conflict."""
    require_timestamp(now)
    binding, prior = request, state.prior
    digest = sha256_hex(binding.public())
    answer: BindingAnswer = {
        "task_id": binding.task_id,
        "job_id": binding.job_id,
        "binding_sha256": digest,
        "idempotent": False,
    }
    if prior is not None:
        if prior.binding_sha256 != digest:
            raise LedgerError(
                "GOVERNED_BINDING_CONFLICT",
                f"task {binding.task_id!r} job {binding.job_id!r} is bound differently already",
            )
        return Replay({**answer, "idempotent": True})
    if not ROUTE_IDENTIFIER.fullmatch(binding.job_id):
        # A new binding only: one stored before the rule still replays and reads.
        raise LedgerError(
            "FIELDS_INVALID",
            f"binding.job_id: {binding.job_id[:80]!r} holds '/', which no URL path can "
            "address: use another character (e.g. '-' or ':')",
        )
    row = BindingRow(
        task_id=binding.task_id,
        job_id=binding.job_id,
        binding_json=canonical_json(binding.public()),
        binding_sha256=digest,
        created_at=now.text,
    )
    insert = SqlWrite(Statement.INSERT_BINDING, attrs.asdict(row))
    # A ledger-level event: the task's own chain stays [TASK_CREATED] until it is projected.
    event = EventAppend(
        task_id=None,
        agent_id=None,
        event_type=BINDING_REGISTERED,
        payload={"task_id": binding.task_id, "job_id": binding.job_id, "binding_sha256": digest},
        created_at=now.text,
        rows=(row.image(),),
        actor=actor,
    )
    return sealed_plan((insert,), (event,), answer, tail=state.tail)


def envelope_from_binding(
    binding: GovernedExecutionBinding, *, capability: str, adapter: str, runtime_input: JsonValue
) -> JsonObject:
    """What the built-in resolver answers: the runtime envelope on a registered binding."""
    return project_execution_envelope(
        binding,
        {
            "action": "agent_runtime",
            "adapter": adapter,
            "capability_scope": [capability],
            "runtime_input": runtime_input,
        },
    )


SOURCE_CAPTURE_ACTION: JsonObject = {
    "action": "source_capture",
    "adapter": "source_capture",
    "capability_scope": ["git.read"],
    "runtime_input": None,
}


def source_capture_envelope(binding: GovernedExecutionBinding) -> JsonObject:
    """The source capture a bound task runs before its projection."""
    return project_execution_envelope(binding, SOURCE_CAPTURE_ACTION)
