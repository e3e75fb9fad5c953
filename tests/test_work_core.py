"""The worker's and the reviewer's pure rules: what evidence a failure keeps, the result that
carries it, when a task attempt is reviewed again, and how a review round ends."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from aios_ledger.core.auxiliary import AuxiliaryRunRow
from aios_ledger.core.work import (
    FAILURE_KINDS,
    MAX_CONTRACT_SUMMARY,
    MAX_OUTPUT_EVIDENCE,
    MAX_TAIL_LINE,
    STDERR_TAIL_LINES,
    FailureEvidence,
    ReviewStep,
    failure_result,
    next_review,
    review_id,
    review_summary,
)
from jsonschema import Draft202012Validator

ROOT = Path(__file__).resolve().parents[1]
CONTRACT = json.loads((ROOT / "core/contracts/agent_runtime_result.v1.json").read_text())
GOVERNED_CLAIM: dict[str, Any] = {
    "task_id": "t1",
    "envelope": {
        "action": "agent_runtime",
        "job_id": "job-1",
        "execution_digest": "sha256:" + "a" * 64,
    },
}


def largest() -> FailureEvidence:
    return FailureEvidence.bounded(
        exit_status=-9,
        stderr_lines=["é" * 5000] * 100,
        output=b"\xff" * (10 * MAX_OUTPUT_EVIDENCE),
    )


def test_evidence_keeps_the_last_lines_and_the_head_of_the_output() -> None:
    lines = [f"line {n}" for n in range(50)]
    evidence = FailureEvidence.bounded(exit_status=3, stderr_lines=lines, output=b"ok\n")
    assert evidence.stderr_tail == tuple(lines[-STDERR_TAIL_LINES:])
    assert (evidence.output_head, evidence.output_truncated) == ("ok\n", False)
    assert evidence.public() == {
        "exit_status": 3,
        "stderr_tail": lines[-STDERR_TAIL_LINES:],
        "output_head": "ok\n",
        "output_truncated": False,
    }


def test_evidence_is_bounded_whatever_the_run_printed() -> None:
    evidence = largest()
    assert len(evidence.stderr_tail) == STDERR_TAIL_LINES
    assert all(len(line) == MAX_TAIL_LINE for line in evidence.stderr_tail)
    # Bytes that are not UTF-8 are shown replaced, one character each.
    assert evidence.output_head == "\ufffd" * MAX_OUTPUT_EVIDENCE
    assert evidence.output_truncated
    # A character cut at the bound is shown replaced too.
    cut = FailureEvidence.bounded(exit_status=0, stderr_lines=[], output=b"a" + "é".encode() * 4000)
    assert cut.output_head == "a" + "é" * 2047 + "\ufffd"


@pytest.mark.parametrize("kind", FAILURE_KINDS)
def test_every_failure_the_worker_reports_is_a_kind_it_may_submit(kind: str) -> None:
    # The worker's own calls name these kinds; one missing here raised instead of failing the
    # task (`workspace_failed`, a workspace that could not be made).
    evidence = FailureEvidence.bounded(exit_status=None, stderr_lines=[], output=b"")
    assert (
        failure_result({"task_id": "t1"}, kind=kind, detail="d", evidence=evidence)["failure"]
        == kind
    )


def test_the_worker_names_only_failure_kinds_there_are() -> None:
    source = (Path(__file__).resolve().parent.parent / "shell" / "work" / "worker.py").read_text()
    named = set(re.findall(r'_fail\(\s*"([a-z_]+)"', source))
    assert named and named <= set(FAILURE_KINDS), named - set(FAILURE_KINDS)


def test_a_plain_failure_holds_the_evidence() -> None:
    evidence = FailureEvidence.bounded(exit_status=None, stderr_lines=[], output=b"")
    result = failure_result(
        {"task_id": "t1"}, kind="spawn_failed", detail="no sh", evidence=evidence
    )
    assert result == {
        "status": "FAILED",
        "failure": "spawn_failed",
        "summary": "spawn_failed: no sh",
        "evidence": {
            "exit_status": None,
            "stderr_tail": [],
            "output_head": "",
            "output_truncated": False,
        },
    }


def test_a_governed_failure_tells_the_evidence_in_its_summary_and_meets_the_contract() -> None:
    evidence = FailureEvidence.bounded(
        exit_status=2, stderr_lines=["Traceback", "KeyError: 'x'"], output=b"half an answer"
    )
    result = failure_result(
        GOVERNED_CLAIM, kind="exit_status", detail="exit status 2", evidence=evidence
    )
    assert result["summary"] == (
        "exit_status: exit status 2\n\n"
        "exit status: 2\n"
        "last lines of stderr:\nTraceback\nKeyError: 'x'\n"
        "output not submitted:\nhalf an answer"
    )
    Draft202012Validator(CONTRACT).validate(result)


def test_the_largest_governed_failure_still_meets_the_contract() -> None:
    result = failure_result(GOVERNED_CLAIM, kind="timeout", detail="x" * 10**6, evidence=largest())
    Draft202012Validator(CONTRACT).validate(result)
    summary = result["summary"]
    assert isinstance(summary, str) and len(summary) <= MAX_CONTRACT_SUMMARY
    assert f"first {MAX_OUTPUT_EVIDENCE} bytes" in summary


def test_an_unknown_failure_kind_is_a_programming_error() -> None:
    evidence = FailureEvidence.bounded(exit_status=0, stderr_lines=[], output=b"")
    with pytest.raises(ValueError, match="unknown failure kind"):
        failure_result({"task_id": "t1"}, kind="bad_luck", detail="", evidence=evidence)


def review_row(number: int, state: str, kind: str = "review") -> AuxiliaryRunRow:
    failed = state in {"FAILED", "CANCELLED"}
    return AuxiliaryRunRow(
        aux_id=review_id("t1", 1, number),
        session_id="task:t1",
        run_id="t1@1",
        parent_json="null",
        kind=kind,
        mode="tool_free",
        state=state,
        spec_json="{}",
        spec_digest="sha256:" + "0" * 64,
        evidence_digest="sha256:" + "1" * 64,
        owner="host:1:x",
        revision=2,
        created_at_ms=number,
        updated_at_ms=number,
        output_json='{"decision": "SUCCEEDED", "reason": "ok"}' if state == "COMPLETED" else None,
        output_digest=None,
        error_code="EXECUTOR" if failed else None,
        error="it crashed" if failed else None,
    )


def test_the_first_review_of_an_attempt_is_number_one() -> None:
    step = next_review([], max_attempts=3)
    assert (step.step, step.review_attempt, step.failed) == (ReviewStep.SPAWN, 1, ())
    assert review_id("t1", 2, 1) == "review:t1:2:1"


def test_a_failed_review_is_followed_by_a_new_one_until_the_bound() -> None:
    crashed, cancelled = review_row(1, "FAILED"), review_row(2, "CANCELLED")
    step = next_review([crashed, cancelled], max_attempts=3)
    assert (step.step, step.review_attempt, step.failed) == (
        ReviewStep.SPAWN,
        3,
        (crashed, cancelled),
    )
    exhausted = next_review([crashed, cancelled], max_attempts=2)
    assert (exhausted.step, exhausted.run) == (ReviewStep.EXHAUSTED, cancelled)
    # Runs of other kinds on the same evidence are not reviews.
    other = review_row(3, "FAILED", kind="summary")
    assert next_review([crashed, other], max_attempts=2).step is ReviewStep.SPAWN


def test_a_completed_review_is_reused_and_a_running_one_waited_for() -> None:
    done = review_row(2, "COMPLETED")
    step = next_review([review_row(1, "FAILED"), done], max_attempts=1)
    assert (step.step, step.run, step.review_attempt) == (ReviewStep.REUSE, done, 2)
    running = review_row(2, "RUNNING")
    step = next_review([review_row(1, "FAILED"), running], max_attempts=3)
    assert (step.step, step.run) == (ReviewStep.IN_PROGRESS, running)
    with pytest.raises(ValueError, match="max_attempts"):
        next_review([], max_attempts=0)


def test_a_round_exits_1_when_any_review_failed() -> None:
    verified = {"task_id": "a", "outcome": "verified"}
    assert review_summary([verified])["exit"] == 0
    assert review_summary([])["exit"] == 0
    assert review_summary([{"task_id": "b", "outcome": "in_progress"}, verified])["exit"] == 0
    for failing in ("review_failed", "verify_failed", "exhausted"):
        summary = review_summary([verified, {"task_id": "b", "outcome": failing}])
        assert summary["exit"] == 1
        assert summary["counts"] == {
            "verified": 1,
            "in_progress": 0,
            "review_failed": int(failing == "review_failed"),
            "verify_failed": int(failing == "verify_failed"),
            "exhausted": int(failing == "exhausted"),
        }
    with pytest.raises(ValueError, match="unknown"):
        review_summary([{"task_id": "a", "outcome": "maybe"}])
