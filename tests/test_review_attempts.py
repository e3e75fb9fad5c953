"""`aios-ledger review` as real processes: a failed review is a failed review attempt, redone
by the next round as a new auxiliary run, up to a bound; failures do not hold up other tasks;
a round with any failure exits 1; the evidence holds a long run's failure event."""

from __future__ import annotations

import asyncio
import json
import os
import sys
from pathlib import Path
from typing import Any

import pytest
from aios_ledger.core.auxiliary import AuxiliaryCapabilityProfile, AuxiliaryRunSpec, ExecutionFrame
from aios_ledger.core.runs import EvidenceReadRequest, ExecutionTarget
from aios_ledger.core.work import REVIEW_EVIDENCE_TAIL, REVIEW_OUTPUT_SCHEMA, review_id
from aios_ledger.shell import AuxiliaryRunService, RunEvidenceReader, RunStore, TaskLedger
from aios_ledger.shell.auxiliary.service import AuxiliaryRunContext
from test_worker_e2e import cli, create, task

ACCEPT = """echo '{"decision": "SUCCEEDED", "reason": "looks right"}'"""
CRASH = "echo the reviewer fell over >&2; exit 7"


def submit(db: Path, task_id: str, result: dict[str, Any] | None = None) -> None:
    create(db, task_id)
    ledger = TaskLedger(db)
    try:
        claimed = ledger.claim(agent_id="agent", capabilities=[], lease_seconds=60, task_id=task_id)
        assert claimed is not None and claimed["task_id"] == task_id
        ledger.submit_result(
            task_id,
            lease_token=claimed["lease_token"],
            result=result or {"status": "SUCCEEDED"},
            idempotency_key=f"s-{task_id}",
        )
    finally:
        ledger.close()


def review(db: Path, *argv: str, **kwargs: Any) -> tuple[int, dict[str, Any], str]:
    answer = cli(db, "review", "--as", "reviewer-1", *argv, **kwargs)
    return answer.returncode, json.loads(answer.stdout), answer.stderr


def aux_runs(db: Path, task_id: str) -> list[dict[str, Any]]:
    listed = cli(db, "aux", "list", "--session", f"task:{task_id}", "--json")
    assert listed.returncode == 0, listed.stderr
    runs: list[dict[str, Any]] = json.loads(listed.stdout)
    return runs


def only(summary: dict[str, Any], task_id: str) -> dict[str, Any]:
    records: list[dict[str, Any]] = [r for r in summary["reviews"] if r["task_id"] == task_id]
    (record,) = records
    return record


def test_crash_hang_nonsense_then_success_each_a_new_review_attempt(tmp_path: Path) -> None:
    db = tmp_path / "ledger.db"
    submit(db, "task-r")
    rounds = [
        (["--exec", CRASH], "EXECUTOR"),
        # A shorter --timeout than the next rounds: a new attempt, never a SPEC_CONFLICT.
        (["--exec", "sleep 60", "--timeout", "1"], "TIMEOUT"),
        (["--exec", "echo this is not a decision"], "OUTPUT_INVALID"),
    ]
    for number, (argv, code) in enumerate(rounds, start=1):
        exit_code, summary, err = review(db, *argv, "--max-attempts", "4")
        assert exit_code == 1, err
        record = only(summary, "task-r")
        assert (record["outcome"], record["error_code"]) == ("review_failed", code)
        assert record["aux_id"] == review_id("task-r", 1, number)
        assert summary["counts"]["review_failed"] == 1 and summary["exit"] == 1
        assert f"review_failed ({code}" in err  # the log says why, too
        assert task(db, "task-r")["status"] == "SUBMITTED"
    assert "SPEC_CONFLICT" not in json.dumps(aux_runs(db, "task-r"))

    exit_code, summary, err = review(db, "--exec", ACCEPT, "--max-attempts", "4")
    assert exit_code == 0, err
    record = only(summary, "task-r")
    assert (record["outcome"], record["decision"], record["status"]) == (
        "verified",
        "SUCCEEDED",
        "SUCCEEDED",
    )
    assert record["aux_id"] == review_id("task-r", 1, 4)
    assert task(db, "task-r")["status"] == "SUCCEEDED"
    # Every attempt stays visible, each as it ended.
    runs = aux_runs(db, "task-r")
    assert [(run["id"], run["state"], run["error_code"]) for run in runs] == [
        (review_id("task-r", 1, 1), "FAILED", "EXECUTOR"),
        (review_id("task-r", 1, 2), "FAILED", "TIMEOUT"),
        (review_id("task-r", 1, 3), "FAILED", "OUTPUT_INVALID"),
        (review_id("task-r", 1, 4), "COMPLETED", None),
    ]
    # A verified task is not reviewed again.
    exit_code, summary, _ = review(db, "--exec", CRASH)
    assert (exit_code, summary["reviews"]) == (0, [])
    assert len(aux_runs(db, "task-r")) == 4


def test_exhausted_reviews_leave_the_task_submitted_and_exit_1(tmp_path: Path) -> None:
    db = tmp_path / "ledger.db"
    submit(db, "task-x")
    for _ in range(3):  # the default bound
        exit_code, summary, _ = review(db, "--exec", CRASH)
        assert exit_code == 1 and only(summary, "task-x")["outcome"] == "review_failed"
    for _ in range(2):  # and it stays exhausted: no new run, however often review runs
        exit_code, summary, err = review(db, "--exec", ACCEPT)
        assert exit_code == 1, err
        record = only(summary, "task-x")
        assert record["outcome"] == "exhausted" and record["failed_reviews"] == 3
        assert (record["aux_id"], record["error_code"]) == (review_id("task-x", 1, 3), "EXECUTOR")
        assert "a person or the task's owner decides" in record["detail"]
        assert summary["counts"]["exhausted"] == 1
    assert task(db, "task-x")["status"] == "SUBMITTED"
    assert len(aux_runs(db, "task-x")) == 3
    # A larger bound (here from the config file) lets the next round review it again.
    config = tmp_path / "aios-ledger.toml"
    config.write_text("[review]\nmax_attempts = 4\n")
    with_config = {**os.environ, "AIOS_LEDGER_CONFIG": str(config)}
    exit_code, summary, err = review(db, "--exec", ACCEPT, env=with_config)
    assert exit_code == 0, err
    assert only(summary, "task-x")["aux_id"] == review_id("task-x", 1, 4)
    assert task(db, "task-x")["status"] == "SUCCEEDED"


# Fails the review of task-a, accepts any other: the instruction names the task.
PICKY = (
    f'{sys.executable} -c "import json, sys; r = json.load(sys.stdin); '
    "sys.exit(5) if 'task-a' in r['instruction'] else "
    "json.dump({'decision': 'SUCCEEDED', 'reason': 'fine'}, sys.stdout)\""
)


def test_a_task_whose_reviews_fail_does_not_hold_up_the_others(tmp_path: Path) -> None:
    db = tmp_path / "ledger.db"
    submit(db, "task-a")  # first in claim order
    submit(db, "task-b")
    submit(db, "task-c")
    # One round: task-a's review fails, task-b's is still done, and the round exits 1.
    exit_code, summary, err = review(db, "--exec", PICKY, "--limit", "2")
    assert exit_code == 1, err
    outcomes = [(r["task_id"], r["outcome"]) for r in summary["reviews"]]
    assert outcomes == [("task-a", "review_failed"), ("task-b", "verified")]
    assert summary["counts"] == {
        "verified": 1,
        "in_progress": 0,
        "review_failed": 1,
        "verify_failed": 0,
        "exhausted": 0,
    }
    # The next round puts task-a, with a failed review, after task-c, with none.
    exit_code, summary, err = review(db, "--exec", PICKY, "--limit", "1")
    assert exit_code == 0, err
    assert [(r["task_id"], r["outcome"]) for r in summary["reviews"]] == [("task-c", "verified")]
    assert task(db, "task-a")["status"] == "SUBMITTED"


class _Accepting:
    async def execute(self, context: AuxiliaryRunContext) -> Any:
        return {"decision": "NEEDS_REWORK", "reason": "the first reviewer's decision"}


def test_a_completed_review_is_recorded_never_run_again(tmp_path: Path) -> None:
    """A review that completed but whose decision was never recorded (the process died before
    `verify`): the next round records that decision and spawns nothing."""
    db = tmp_path / "ledger.db"
    submit(db, "task-done")
    target = ExecutionTarget("task:task-done", "task-done@1")

    async def complete_a_review() -> None:
        with RunStore(db) as runs:  # the attempt's run, as its claim created it
            evidence = RunEvidenceReader(runs).read(EvidenceReadRequest(target))
        spec = (
            AuxiliaryRunSpec(
                ExecutionFrame.root(target), "review", "judge", evidence.snapshot_digest
            )
            .with_id(review_id("task-done", 1, 1))
            .with_capabilities(AuxiliaryCapabilityProfile.tool_free())
            .with_output_schema(REVIEW_OUTPUT_SCHEMA)
        )
        async with AuxiliaryRunService(_Accepting(), db) as service:
            await (await service.spawn(spec, evidence)).wait()

    asyncio.run(complete_a_review())
    exit_code, summary, err = review(db, "--exec", CRASH)
    assert exit_code == 0, err
    record = only(summary, "task-done")
    assert (record["outcome"], record["decision"], record["aux_id"]) == (
        "verified",
        "NEEDS_REWORK",
        review_id("task-done", 1, 1),
    )
    assert task(db, "task-done")["status"] == "QUEUED"
    assert [run["id"] for run in aux_runs(db, "task-done")] == [review_id("task-done", 1, 1)]


def test_the_reviewer_reads_the_failure_of_a_long_run(tmp_path: Path) -> None:
    """300 lines of stderr put the worker's `failure` event far past the evidence window; the
    reviewer still gets it, as the last event of a bounded, digest-pinned snapshot."""
    db = tmp_path / "ledger.db"
    create(db, "task-long")
    noisy = "i=0; while [ $i -lt 300 ]; do echo line $i >&2; i=$((i+1)); done; exit 3"
    worked = cli(db, "worker", "--agent-id", "w", "--exec", noisy, "--once")
    assert worked.returncode == 0, worked.stderr
    seen = tmp_path / "seen.json"
    keep = f'tee {seen} >/dev/null; echo \'{{"decision": "FAILED", "reason": "exit 3"}}\''
    exit_code, summary, err = review(db, "--exec", keep)
    assert exit_code == 0, err
    evidence = json.loads(seen.read_text())["evidence"]
    events = evidence["events"]
    assert evidence["truncated"] is True
    assert len(events) <= evidence["limits"]["max_events"] == 256
    assert evidence["limits"]["tail_events"] == REVIEW_EVIDENCE_TAIL
    failure = events[-1]
    with RunStore(db) as runs:
        last_seq = runs.get_run("task-long@1").event_count
    assert failure["kind"] == "failure" and failure["seq"] == last_seq > 300
    assert failure["payload"]["exit_status"] == 3
    assert failure["payload"]["stderr_tail"][-1] == "line 299"
    assert events[0]["payload"]["line"] == "line 0"  # the head is still the run's start
    shown = cli(db, "aux", "show", only(summary, "task-long")["aux_id"])
    assert json.loads(shown.stdout)["evidence_digest"] == evidence["snapshot_digest"]
    assert task(db, "task-long")["status"] == "FAILED"


def test_the_library_checks_review_settings_like_the_file(tmp_path: Path) -> None:
    from aios_ledger.core import LedgerError
    from aios_ledger.shell import review_submitted

    db = tmp_path / "ledger.db"
    submit(db, "task-lib")
    for bad in ({"max_attempts": 0}, {"limit": 0}, {"timeout": float("inf")}):
        with pytest.raises(LedgerError, match="FIELDS_INVALID"):
            review_submitted(db, ACCEPT, reviewer="reviewer-1", **bad)
    assert task(db, "task-lib")["status"] == "SUBMITTED"
    assert review_submitted(db, ACCEPT, reviewer="reviewer-1", max_attempts=1)["exit"] == 0
