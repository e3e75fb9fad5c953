"""Pure rules of the worker and the reviewer: what a failed run submits, how evidence is named, how
the worker paces itself, what a reviewer may answer, and when an attempt is reviewed again."""

from __future__ import annotations

import enum
import json
import shlex
from collections.abc import Collection, Mapping, Sequence
from typing import Any

import attrs
from aios_ledger.core.auxiliary.records import AuxiliaryRunRow
from aios_ledger.core.auxiliary.states import AuxiliaryRunState
from aios_ledger.core.jsonvalue import JsonObject, JsonValue
from aios_ledger.core.tasks.attempts import REVIEW_PREFIX

# `wall_time_exceeded`: the worker stopped the command at its task's budget (`wall_seconds`).
FAILURE_KINDS = (
    "exit_status",
    "timeout",
    "wall_time_exceeded",
    "invalid_output",
    "result_refused",
    "spawn_failed",
    # The task's workspace could not be made: the command never ran.
    "workspace_failed",
)
MAX_SUMMARY = 2000
# What a failure keeps of the run: enough to tell why at a glance, small enough for any result.
MAX_OUTPUT_EVIDENCE = 4096  # bytes of the output the worker did not submit
STDERR_TAIL_LINES = 20
MAX_TAIL_LINE = 400  # characters of each of those lines
# The agent_runtime contract's bound on `summary`, where a governed task's failure evidence goes.
MAX_CONTRACT_SUMMARY = 20000
REVIEW_DECISIONS = ("SUCCEEDED", "NEEDS_REWORK", "FAILED")
REVIEW_KIND = "review"
# Of a longer run, the reviewer also reads the last events, which say how it failed.
REVIEW_EVIDENCE_TAIL = 8
REVIEW_OUTPUT_SCHEMA: JsonObject = {
    "type": "object",
    "additionalProperties": False,
    "required": ["decision", "reason"],
    "properties": {
        "decision": {"enum": list(REVIEW_DECISIONS)},
        "reason": {"type": "string", "minLength": 1, "maxLength": 2000},
    },
}


# What `sh -c` runs without looking a program up: its keywords and builtins.
SHELL_WORDS = frozenset(
    [
        "!",
        ".",
        ":",
        "[",
        "{",
        "alias",
        "break",
        "case",
        "cd",
        "command",
        "continue",
        "eval",
        "exec",
        "exit",
        "export",
        "false",
        "for",
        "getopts",
        "if",
        "kill",
        "local",
        "printf",
        "pwd",
        "read",
        "readonly",
        "return",
        "set",
        "shift",
        "source",
        "test",
        "time",
        "trap",
        "true",
        "type",
        "ulimit",
        "umask",
        "unalias",
        "unset",
        "until",
        "wait",
        "while",
        "echo",
    ]
)
# A first word holding any of these is shell syntax, whose program only the shell can tell.
SHELL_SYNTAX = frozenset("$`()[]{};&|<>*?~!#")


def exec_program(command: str) -> str | None:
    """The program `sh -c command` starts, None when the shell decides it or it is relative."""
    try:
        words = shlex.split(command, comments=True)
    except ValueError:
        return None
    for word in words:
        name, assigned, _value = word.partition("=")
        if assigned and name.isidentifier():
            continue
        if word in SHELL_WORDS or not SHELL_SYNTAX.isdisjoint(word):
            return None
        if "/" in word and not word.startswith("/"):
            return None
        return word
    return None


def heartbeat_interval(lease_seconds: int) -> float:
    """A third of the lease, so that two heartbeats can be lost before the lease is."""
    return max(lease_seconds / 3.0, 0.05)


def next_poll_delay(current: float, *, minimum: float, maximum: float) -> float:
    """Exponential backoff while the queue stays empty; the caller resets it after a claim."""
    return min(max(current * 2.0, minimum), maximum)


@attrs.frozen
class IdleReason:
    """Why a worker found nothing to claim: ungranted, lacking, or not yet due."""

    queued: int
    lacking: int
    missing: tuple[str, ...]
    not_due: int
    due_from: str | None
    ungranted: int = 0
    ungranted_capabilities: tuple[str, ...] = ()

    def text(self) -> str:
        if self.queued == 0:
            return "no queued task"
        parts = []
        if self.ungranted:
            parts.append(
                f"{_tasks(self.ungranted, 'needs', 'need')} capabilities your token is not "
                f"granted: {', '.join(self.ungranted_capabilities)} (offering them is refused "
                "CAPABILITY_NOT_GRANTED: the ledger's owner issues a token granted them)"
            )
        if self.lacking:
            parts.append(
                f"{_tasks(self.lacking, 'needs', 'need')} capabilities you do not offer: "
                + ", ".join(self.missing)
            )
        if self.not_due:
            parts.append(f"{_tasks(self.not_due, 'is', 'are')} not due before {self.due_from}")
        others = self.queued - self.ungranted - self.lacking - self.not_due
        if others:
            parts.append(f"{_tasks(others, 'was', 'were')} taken by another worker meanwhile")
        return "; ".join(parts)

    @classmethod
    def from_public(cls, shown: Mapping[str, Any]) -> IdleReason:
        """The reason `public()` showed (an older server omits ungranted counts)."""
        due_from = shown["due_from"]
        return cls(
            queued=int(shown["queued"]),
            lacking=int(shown["lacking_capabilities"]),
            missing=tuple(str(name) for name in shown["missing_capabilities"]),
            not_due=int(shown["not_due"]),
            due_from=None if due_from is None else str(due_from),
            ungranted=int(shown.get("ungranted", 0)),
            ungranted_capabilities=tuple(
                str(name) for name in shown.get("ungranted_capabilities", ())
            ),
        )

    def public(self) -> JsonObject:
        return {
            "queued": self.queued,
            "ungranted": self.ungranted,
            "ungranted_capabilities": list[JsonValue](self.ungranted_capabilities),
            "lacking_capabilities": self.lacking,
            "missing_capabilities": list[JsonValue](self.missing),
            "not_due": self.not_due,
            "due_from": self.due_from,
            "reason": self.text(),
        }


def _tasks(count: int, verb: str, plural_verb: str) -> str:
    """`1 queued task needs`, `2 queued tasks need`."""
    return f"{count} queued task {verb}" if count == 1 else f"{count} queued tasks {plural_verb}"


def idle_reason(
    groups: Sequence[Mapping[str, Any]],
    capabilities: Sequence[str],
    grant: Collection[str] | None = None,
) -> IdleReason:
    """The reason from the queue's groups; ungranted is the owner's to change, lacking the
    worker's."""
    offered = set(capabilities)
    granted = None if grant is None else set(grant)
    queued = lacking = not_due = ungranted = 0
    missing: set[str] = set()
    beyond: set[str] = set()
    due_from: str | None = None
    for group in groups:
        count = int(group["tasks"])
        queued += count
        required = {str(name) for name in json.loads(str(group["required_capabilities_json"]))}
        needed = required - offered
        outside = set() if granted is None else needed - granted
        if outside:
            ungranted += count
            beyond |= outside
        elif needed:
            lacking += count
            missing |= needed
        elif group["not_due"]:
            not_due += count
            earliest = group["earliest"]
            if earliest is not None and (due_from is None or str(earliest) < due_from):
                due_from = str(earliest)
    return IdleReason(
        queued, lacking, tuple(sorted(missing)), not_due, due_from, ungranted, tuple(sorted(beyond))
    )


@attrs.frozen
class FailureEvidence:
    """Why a run failed, bounded: exit status, stderr's tail, unsubmitted output's head."""

    exit_status: int | None
    stderr_tail: tuple[str, ...]
    output_head: str
    output_truncated: bool

    @classmethod
    def bounded(
        cls, *, exit_status: int | None, stderr_lines: Sequence[str], output: bytes
    ) -> FailureEvidence:
        """The evidence cut to its bounds, non-UTF-8 replaced so any output can be shown."""
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
    claim: Mapping[str, Any],
    *,
    kind: str,
    detail: str,
    evidence: FailureEvidence,
    proposed_files: Sequence[str] = (),
) -> JsonObject:
    """The result a worker submits when the command produced none, with the evidence."""
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
            "changed_files": list[JsonValue](sorted(proposed_files)),
            "direct_main_write": False,
            "production_write": False,
            "force_push": False,
            "protected_ref_bypass": False,
            "secret_material_exposed": False,
        }
    return {"status": "FAILED", "failure": kind, "summary": summary, "evidence": evidence.public()}


def review_instruction(task: Mapping[str, Any]) -> str:
    """What the reviewer is told: the task's goal and criteria, never more than the evidence."""
    criteria = task.get("success_criteria")
    return (
        f"Review attempt {task.get('attempt')} of task {task.get('task_id')}. "
        f"Goal: {task.get('goal')}. Success criteria: {criteria}. "
        "Answer {decision: SUCCEEDED | NEEDS_REWORK | FAILED, reason} from the evidence."
    )[:8000]


def review_id(task_id: str, attempt: int, review_attempt: int) -> str:
    """`review:TASK:ATTEMPT:N`: each review a run of its own."""
    return f"{REVIEW_PREFIX}{task_id}:{attempt}:{review_attempt}"


class ReviewStep(enum.StrEnum):
    SPAWN = "spawn"  # a new review run, number `review_attempt`
    REUSE = "reuse"  # a review completed: record its decision (again: verify is idempotent)
    IN_PROGRESS = "in_progress"  # another reviewer is running one now
    EXHAUSTED = "exhausted"  # every review allowed failed: a person or the owner decides


@attrs.frozen
class NextReview:
    """The step, the review attempt it is about, and the attempt's failed reviews, oldest first."""

    step: ReviewStep
    review_attempt: int
    failed: tuple[AuxiliaryRunRow, ...]
    run: AuxiliaryRunRow | None = None


def next_review(runs: Sequence[AuxiliaryRunRow], *, max_attempts: int) -> NextReview:
    """The next step for an attempt: a completed review is never redone, failed ones retried."""
    if max_attempts < 1:
        raise ValueError("max_attempts must be at least 1")
    reviews = [run for run in runs if run.kind == REVIEW_KIND]
    failed = tuple(run for run in reviews if _failed(run))
    for run in reversed(reviews):
        if run.run_state is AuxiliaryRunState.COMPLETED:
            return NextReview(ReviewStep.REUSE, reviews.index(run) + 1, failed, run)
    for run in reviews:
        if not run.run_state.is_terminal:
            return NextReview(ReviewStep.IN_PROGRESS, reviews.index(run) + 1, failed, run)
    if len(failed) >= max_attempts:
        return NextReview(ReviewStep.EXHAUSTED, len(reviews), failed, failed[-1])
    return NextReview(ReviewStep.SPAWN, len(reviews) + 1, failed)


def _failed(run: AuxiliaryRunRow) -> bool:
    state = run.run_state
    return state.is_terminal and state is not AuxiliaryRunState.COMPLETED


# Outcomes of one task in a review round; any of these makes the round exit 1.
REVIEW_OUTCOMES = ("verified", "in_progress", "review_failed", "verify_failed", "exhausted")
FAILED_REVIEW_OUTCOMES = frozenset({"review_failed", "verify_failed", "exhausted"})


def review_summary(reviews: Sequence[Mapping[str, Any]]) -> JsonObject:
    """A round's answer: each task, the count of each outcome, and the exit status."""
    outcomes = [str(review["outcome"]) for review in reviews]
    unknown = set(outcomes) - set(REVIEW_OUTCOMES)
    if unknown:
        raise ValueError(f"unknown review outcomes {sorted(unknown)}")
    counts: JsonObject = {outcome: outcomes.count(outcome) for outcome in REVIEW_OUTCOMES}
    failing = not FAILED_REVIEW_OUTCOMES.isdisjoint(outcomes)
    return {
        "reviews": [dict(review) for review in reviews],
        "counts": counts,
        "exit": 1 if failing else 0,
    }
