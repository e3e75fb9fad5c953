"""Several processes claiming, heartbeating, submitting and verifying from one database file.

Every task is claimed exactly once per attempt, no acknowledged write is lost, no busy error
reaches a caller (the shell retries inside `Database.write`), and each task's revision and
event count agree with what happened to it.
"""

from __future__ import annotations

import multiprocessing
import os
from collections import Counter
from pathlib import Path

import pytest
from aios_ledger.shell import TaskLedger
from test_tasks_support import worker

PROCESSES = 4
TASKS = 200 if os.environ.get("AIOS_SOAK") == "1" else 60


@pytest.mark.slow
def test_processes_claim_each_task_once_per_attempt(tmp_path: Path) -> None:
    path = tmp_path / "shared.sqlite3"
    ids = [f"task-{i:03d}" for i in range(TASKS)]
    rework = ids[::3]
    with TaskLedger(path) as ledger:
        ledger.create_tasks(
            [
                (
                    {
                        "task_id": task_id,
                        "goal": "g",
                        "instructions": "i",
                        "required_capabilities": ["cap.x"],
                        "priority": i % 5,
                    },
                    f"create-{task_id}",
                )
                for i, task_id in enumerate(ids)
            ]
        )
    context = multiprocessing.get_context("spawn")
    start = context.Barrier(PROCESSES)
    queue = context.Queue()
    processes = [
        context.Process(target=worker, args=(str(path), f"agent-{n}", rework, start, queue))
        for n in range(PROCESSES)
    ]
    for process in processes:
        process.start()
    reports = [queue.get(timeout=240) for _ in processes]
    for process in processes:
        process.join(timeout=60)
        assert process.exitcode == 0

    # They start together at a barrier; that several took part shows real contention (all
    # four nearly always do, but a loaded machine may starve one, so that is not asserted).
    assert sum(1 for report in reports if report["claims"]) >= 2
    errors = [error for report in reports for error in report["errors"]]
    assert errors == []
    claims = Counter(claim for report in reports for claim in report["claims"])
    # Exactly once per attempt: rework tasks twice (attempts 1 and 2), the others once.
    expected = {(task_id, 1) for task_id in ids} | {(task_id, 2) for task_id in rework}
    assert set(claims) == expected
    assert all(count == 1 for count in claims.values())
    acknowledged = [ack for report in reports for ack in report["acknowledged"]]
    assert len(acknowledged) == 3 * len(expected)
    with TaskLedger(path) as ledger:
        for task_id in ids:
            task = ledger.get(task_id)
            attempts = 2 if task_id in rework else 1
            assert task["status"] == "SUCCEEDED"
            assert task["attempt"] == attempts
            # create + (claim, heartbeat, submit, verify) per attempt
            assert task["revision"] == 1 + 4 * attempts
            events = ledger.events(task_id)
            assert len(events) == task["revision"]
            kinds = Counter(event["event_type"] for event in events)
            assert kinds["TASK_CLAIMED"] == attempts
            assert kinds["RESULT_SUBMITTED"] == attempts
            assert kinds["TASK_VERIFIED"] == attempts
            # Every acknowledged submit is in the ledger: the last one is the stored result.
            last = [a for a in acknowledged if a[0] == task_id and a[1] == "submit"]
            assert task["result"]["attempt"] == max(attempt for _, _, attempt in last)
