"""Shared helpers of the task lifecycle tests: a settable clock, database dumps, the seed's
governed task, and the worker function the multi-process test spawns (it must be importable)."""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from aios_ledger.core import (
    GovernedExecutionBinding,
    JsonObject,
    LedgerError,
    project_execution_envelope,
)

START = datetime(2026, 8, 20, tzinfo=UTC)
AGENT_WORK_SECONDS = 0.002

# The seed's task (initial_execution_projection_tests.py).
SEED_TASK_ID = "task-initial-projection-a"
SEED_JOB_ID = "job-initial-projection-a"
SEED_BASE = "a" * 40
SEED_BRANCH = "agent/task-initial-projection-a"
SEED_CAPABILITY = "agent.runtime.openclaw"
SEED_AUTHORIZATION = "owner-initial-execution-projection-recovery-20260820"


class Clock:
    """An injected clock that only moves when a test moves it."""

    def __init__(self, start: datetime = START) -> None:
        self.now = start

    def __call__(self) -> datetime:
        return self.now

    def advance(self, seconds: int) -> None:
        self.now += timedelta(seconds=seconds)


def file_bytes(path: Path) -> dict[str, bytes]:
    """The database file and its WAL, byte for byte."""
    found = {}
    for suffix in ("", "-wal"):
        candidate = Path(f"{path}{suffix}")
        if candidate.exists():
            found[suffix or "db"] = candidate.read_bytes()
    return found


def canon(value: Any) -> str:
    """The seed's digest: sha256 over sorted, compact JSON."""
    return hashlib.sha256(
        json.dumps(value, sort_keys=True, separators=(",", ":")).encode()
    ).hexdigest()


def seed_task(**overrides: Any) -> dict[str, Any]:
    task: dict[str, Any] = {
        "task_id": SEED_TASK_ID,
        "goal": "Supervise release preparation",
        "instructions": "Observe and resume only the same lineage.",
        "success_criteria": [{"id": "heartbeat", "description": "Heartbeat observed"}],
        "required_capabilities": [],
        "constraints": {"production_write": False},
        "metadata": {},
        "deadline": None,
        "priority": 100,
        "max_attempts": 20,
    }
    task.update(overrides)
    return task


def seed_runtime_input() -> JsonObject:
    return {
        "goal": "Supervise release preparation",
        "instructions": "Observe and resume only the same lineage.",
        "success_criteria": [{"id": "heartbeat", "description": "Heartbeat observed"}],
        "constraints": {"production_write": False},
        "scope": {"scope_type": "legacy", "tenant_id": None, "project_id": None},
        "trace_id": SEED_TASK_ID,
    }


def seed_binding() -> GovernedExecutionBinding:
    return GovernedExecutionBinding.from_mapping(
        {
            "task_id": SEED_TASK_ID,
            "job_id": SEED_JOB_ID,
            "repository": "aios/aios",
            "base_oid": SEED_BASE,
            "expected_branch_oid": SEED_BASE,
            "target_branch": SEED_BRANCH,
            "branch_mode": "CREATE_NEW",
            "generation": 1,
            "idempotency_key": "task-initial-projection-binding-v1",
        }
    )


def seed_envelope(action: str = "agent_runtime") -> JsonObject:
    runtime = action == "agent_runtime"
    return project_execution_envelope(
        seed_binding(),
        {
            "action": action,
            "adapter": "openclaw" if runtime else "source_capture",
            "capability_scope": [SEED_CAPABILITY if runtime else "git.read"],
            "runtime_input": seed_runtime_input() if runtime else None,
        },
    )


def seed_resolver(
    _task_id: str, _job_id: str, _capability: str, _adapter: str, runtime_input: Any
) -> JsonObject:
    assert runtime_input == seed_runtime_input()
    return seed_envelope()


def source_capture_result() -> JsonObject:
    return {
        "task_id": SEED_TASK_ID,
        "job_id": SEED_JOB_ID,
        "repository": "aios/aios",
        "base_oid": SEED_BASE,
        "expected_branch_oid": SEED_BASE,
        "target_branch": SEED_BRANCH,
        "generation": 1,
        "status": "SUCCEEDED",
        "classification": "NEEDS_REWORK_SOURCE_CAPTURE",
        "execution_mode": "source_capture",
        "execution_digest": seed_envelope("source_capture")["execution_digest"],
        "changed_files": [],
        "writer_lease": "NONE",
        "verification_state": "NEEDS_REWORK",
        "direct_main_write": False,
        "production_write": False,
        "force_push": False,
        "protected_ref_bypass": False,
        "secret_material_exposed": False,
        "source_snapshot": {"schema": "test.snapshot.v1", "payload_sha256": "d" * 64},
    }


def runtime_result(**overrides: Any) -> JsonObject:
    result: JsonObject = {
        "task_id": SEED_TASK_ID,
        "job_id": SEED_JOB_ID,
        "execution_digest": seed_envelope()["execution_digest"],
        "execution_mode": "agent_runtime",
        "status": "SUCCEEDED",
        "summary": "release preparation observed",
        "changed_files": ["docs/release.md"],
        "repository": "aios/aios",
        "target_branch": SEED_BRANCH,
        "direct_main_write": False,
        "production_write": False,
        "force_push": False,
        "protected_ref_bypass": False,
        "secret_material_exposed": False,
    }
    result.update(overrides)
    return result


def refusal(work: Callable[[], object]) -> str:
    """The code of the LedgerError `work` raises (fails the test when it does not raise one)."""
    try:
        work()
    except LedgerError as refused:
        return refused.code
    raise AssertionError("expected a LedgerError")


def worker(path: str, agent_id: str, rework_ids: list[str], start: Any, reports: Any) -> None:
    """One process of the concurrency test: claim, heartbeat, submit, verify until nothing is
    left. Tasks in `rework_ids` are sent back once (NEEDS_REWORK on their first attempt).
    `start` is a barrier all workers pass together; the report goes onto the `reports` queue.

    Between its claim and its heartbeat a worker works for AGENT_WORK_SECONDS, outside any
    transaction, as an agent does. Without it the first worker through the barrier could take
    every task in one burst: SQLite's write lock is not fair, and the others slept in its busy
    handler the whole time (bench part 3 measures the same starvation; this test failed 2 of 6
    runs so on an idle machine)."""
    from aios_ledger.shell import TaskLedger

    claims: list[tuple[str, int]] = []
    acknowledged: list[tuple[str, str, int]] = []
    errors: list[str] = []
    with TaskLedger(path) as ledger:
        start.wait()
        while True:
            try:
                claim = ledger.claim(agent_id=agent_id, capabilities=["cap.x"], lease_seconds=600)
            except Exception as exc:
                errors.append(f"claim: {exc!r}")
                if len(errors) > 20:
                    break
                continue
            if claim is None:
                # Whoever requeues a task for rework claims again, so nothing is left behind.
                if not ledger.list_tasks("QUEUED", limit=1):
                    break
                continue
            task_id, attempt, token = claim["task_id"], claim["attempt"], claim["lease_token"]
            claims.append((task_id, attempt))
            time.sleep(AGENT_WORK_SECONDS)
            try:
                ledger.heartbeat(task_id, lease_token=token, lease_seconds=600)
                acknowledged.append((task_id, "heartbeat", attempt))
                ledger.submit_result(
                    task_id,
                    lease_token=token,
                    result={"by": agent_id, "attempt": attempt},
                    idempotency_key=f"submit-{task_id}-{attempt}",
                )
                acknowledged.append((task_id, "submit", attempt))
                decision = "NEEDS_REWORK" if task_id in rework_ids and attempt == 1 else "SUCCEEDED"
                ledger.verify(
                    task_id,
                    decision=decision,
                    reason=f"checked by {agent_id}",
                    idempotency_key=f"verify-{task_id}-{attempt}",
                )
                acknowledged.append((task_id, "verify", attempt))
            except Exception as exc:
                errors.append(f"{task_id}: {exc!r}")
    reports.put(
        {"agent_id": agent_id, "claims": claims, "acknowledged": acknowledged, "errors": errors}
    )
