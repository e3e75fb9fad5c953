"""Registering a governed binding: write-once per (task, job), idempotent by content."""

from __future__ import annotations

from aios_ledger.core.digests import canonical_json, sha256_hex
from aios_ledger.core.errors import LedgerError
from aios_ledger.core.jsonvalue import JsonObject, JsonValue
from aios_ledger.core.log.tail import EventAppend, LogTail
from aios_ledger.core.plan import Replay, WritePlan, sealed_plan
from aios_ledger.core.projection.envelopes import (
    GovernedExecutionBinding,
    project_execution_envelope,
)
from aios_ledger.core.projection.records import BindingRow
from aios_ledger.core.statements import SqlWrite, Statement

BINDING_REGISTERED = "GOVERNED_BINDING_REGISTERED"


def decide_register_binding(
    binding: GovernedExecutionBinding,
    prior: BindingRow | None,
    *,
    now: str,
    tail: LogTail,
) -> Replay | WritePlan:
    digest = sha256_hex(binding.public())
    response: JsonObject = {
        "task_id": binding.task_id,
        "job_id": binding.job_id,
        "binding_sha256": digest,
    }
    if prior is not None:
        if prior.binding_sha256 != digest:
            raise LedgerError(
                "GOVERNED_BINDING_CONFLICT",
                f"task {binding.task_id!r} job {binding.job_id!r} is bound differently already",
            )
        return Replay({**response, "idempotent": True})
    insert = SqlWrite(
        Statement.INSERT_BINDING,
        {
            "task_id": binding.task_id,
            "job_id": binding.job_id,
            "binding_json": canonical_json(binding.public()),
            "binding_sha256": digest,
            "created_at": now,
        },
    )
    # A ledger-level event: the task's own chain stays [TASK_CREATED] until it is projected.
    event = EventAppend(
        task_id=None,
        agent_id=None,
        event_type=BINDING_REGISTERED,
        payload=dict(response),
        created_at=now,
    )
    return sealed_plan((insert,), (event,), {**response, "idempotent": False}, tail=tail)


def envelope_from_binding(
    binding: GovernedExecutionBinding,
    *,
    capability: str,
    adapter: str,
    runtime_input: JsonValue,
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
