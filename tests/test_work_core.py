"""The worker's pure rules for a failure: what evidence is kept, and the result that carries it."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from aios_ledger.core.work import (
    MAX_CONTRACT_SUMMARY,
    MAX_OUTPUT_EVIDENCE,
    MAX_TAIL_LINE,
    STDERR_TAIL_LINES,
    FailureEvidence,
    failure_result,
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
