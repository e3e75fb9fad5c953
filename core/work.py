"""Pure rules of the worker and the reviewer: what a failed run submits, how evidence is named,
how the worker paces itself, and what a reviewer may answer.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import attrs
from aios_ledger.core.jsonvalue import JsonObject, JsonValue

FAILURE_KINDS = ("exit_status", "timeout", "invalid_output", "result_refused", "spawn_failed")
MAX_SUMMARY = 2000
# What a failure keeps of the run: enough to tell why at a glance, small enough for any result.
MAX_OUTPUT_EVIDENCE = 4096  # bytes of the output the worker did not submit
STDERR_TAIL_LINES = 20
MAX_TAIL_LINE = 400  # characters of each of those lines
# The agent_runtime contract's bound on `summary`, where a governed task's failure evidence goes.
MAX_CONTRACT_SUMMARY = 20000
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


@attrs.frozen
class FailureEvidence:
    """Why a run failed, bounded: how the command ended (its exit status, negative for the
    signal that ended it, None when it never started), the last lines of its stderr, and the
    head of the output the worker did not submit."""

    exit_status: int | None
    stderr_tail: tuple[str, ...]
    output_head: str
    output_truncated: bool

    @classmethod
    def bounded(
        cls, *, exit_status: int | None, stderr_lines: Sequence[str], output: bytes
    ) -> FailureEvidence:
        """The evidence of a run from everything it left: the last `STDERR_TAIL_LINES` lines of
        `MAX_TAIL_LINE` characters each, and the first `MAX_OUTPUT_EVIDENCE` bytes of `output`
        as text (bytes that are not UTF-8 are replaced, so any output can be shown)."""
        return cls(
            exit_status=exit_status,
            stderr_tail=tuple(line[:MAX_TAIL_LINE] for line in stderr_lines[-STDERR_TAIL_LINES:]),
            output_head=output[:MAX_OUTPUT_EVIDENCE].decode("utf-8", "replace"),
            output_truncated=len(output) > MAX_OUTPUT_EVIDENCE,
        )

    def public(self) -> JsonObject:
        return {
            "exit_status": self.exit_status,
            "stderr_tail": list[JsonValue](self.stderr_tail),
            "output_head": self.output_head,
            "output_truncated": self.output_truncated,
        }

    def text(self) -> str:
        """The same evidence as readable text, for a result whose contract has no field for it."""
        status = "none (not started)" if self.exit_status is None else str(self.exit_status)
        parts = [f"exit status: {status}"]
        if self.stderr_tail:
            parts.append("last lines of stderr:\n" + "\n".join(self.stderr_tail))
        if self.output_head:
            cut = f", first {MAX_OUTPUT_EVIDENCE} bytes" if self.output_truncated else ""
            parts.append(f"output not submitted{cut}:\n{self.output_head}")
        return "\n".join(parts)


def failure_result(
    claim: Mapping[str, Any], *, kind: str, detail: str, evidence: FailureEvidence
) -> JsonObject:
    """The result a worker submits when the command did not produce one, with the evidence of
    why.

    For a task with an execution envelope it meets the agent_runtime contract (echoing the
    envelope's digest, claiming no governed write), which has no field for evidence: the
    evidence follows the reason in `summary`, as text. Otherwise it is a plain failure record
    with the evidence as `evidence`.
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
            "summary": f"{summary}\n\n{evidence.text()}"[:MAX_CONTRACT_SUMMARY],
            "changed_files": [],
            "direct_main_write": False,
            "production_write": False,
            "force_push": False,
            "protected_ref_bypass": False,
            "secret_material_exposed": False,
        }
    return {
        "status": "FAILED",
        "failure": kind,
        "summary": summary,
        "evidence": evidence.public(),
    }


def review_instruction(task: Mapping[str, Any]) -> str:
    """What the reviewer is told: the task's goal and criteria, never more than the evidence."""
    criteria = task.get("success_criteria")
    return (
        f"Review attempt {task.get('attempt')} of task {task.get('task_id')}. "
        f"Goal: {task.get('goal')}. Success criteria: {criteria}. "
        "Answer {decision: SUCCEEDED | NEEDS_REWORK | FAILED, reason} from the evidence."
    )[:8000]
