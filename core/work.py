"""Pure rules of the worker and the reviewer: what a failed run submits, how evidence is named,
how the worker paces itself, and what a reviewer may answer.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from aios_ledger.core.jsonvalue import JsonObject

FAILURE_KINDS = ("exit_status", "timeout", "invalid_output", "result_refused", "spawn_failed")
MAX_SUMMARY = 2000
REVIEW_DECISIONS = ("SUCCEEDED", "NEEDS_REWORK", "FAILED")
REVIEW_OUTPUT_SCHEMA: JsonObject = {
    "type": "object",
    "additionalProperties": False,
    "required": ["decision", "reason"],
    "properties": {
        "decision": {"enum": list(REVIEW_DECISIONS)},
        "reason": {"type": "string", "minLength": 1, "maxLength": 2000},
    },
}


def evidence_session(task_id: str) -> str:
    """Every attempt of a task is a run in the task's session."""
    return f"task:{task_id}"


def evidence_run(task_id: str, attempt: int) -> str:
    return f"{task_id}@{attempt}"


def heartbeat_interval(lease_seconds: int) -> float:
    """A third of the lease, so that two heartbeats can be lost before the lease is."""
    return max(lease_seconds / 3.0, 0.05)


def next_poll_delay(current: float, *, minimum: float, maximum: float) -> float:
    """Exponential backoff while the queue stays empty; the caller resets it after a claim."""
    return min(max(current * 2.0, minimum), maximum)


def failure_result(claim: Mapping[str, Any], *, kind: str, detail: str) -> JsonObject:
    """The result a worker submits when the command did not produce one.

    For a task with an execution envelope it meets the agent_runtime contract (echoing the
    envelope's digest, claiming no governed write); otherwise it is a plain failure record.
    """
    if kind not in FAILURE_KINDS:
        raise ValueError(f"unknown failure kind {kind!r}")
    summary = f"{kind}: {detail}"[:MAX_SUMMARY]
    envelope = claim.get("envelope")
    if isinstance(envelope, Mapping) and envelope.get("action") == "agent_runtime":
        return {
            "task_id": str(claim["task_id"]),
            "job_id": str(envelope["job_id"]),
            "execution_digest": str(envelope["execution_digest"]),
            "execution_mode": "agent_runtime",
            "status": "FAILED",
            "summary": summary,
            "changed_files": [],
            "direct_main_write": False,
            "production_write": False,
            "force_push": False,
            "protected_ref_bypass": False,
            "secret_material_exposed": False,
        }
    return {"status": "FAILED", "failure": kind, "summary": summary}


def review_instruction(task: Mapping[str, Any]) -> str:
    """What the reviewer is told: the task's goal and criteria, never more than the evidence."""
    criteria = task.get("success_criteria")
    return (
        f"Review attempt {task.get('attempt')} of task {task.get('task_id')}. "
        f"Goal: {task.get('goal')}. Success criteria: {criteria}. "
        "Answer {decision: SUCCEEDED | NEEDS_REWORK | FAILED, reason} from the evidence."
    )[:8000]
