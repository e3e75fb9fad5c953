"""Part 3: 1, 2 and 4 processes claiming and submitting from one ledger file (FULL).

Each repetition builds a fresh queue (not timed), then starts the processes together; each
claims and submits until the queue is empty, timing every call. Reported: aggregate calls/s,
its ratio to one process, p50/p99 latency of a call, busy retries (transactions `Database`
retried after SQLITE_BUSY; SQLite's own busy handler waits inside a call are in the latency),
busy errors that reached a caller, and double claims, checked twice: no task id is handed to
two claimers, and every task ends SUBMITTED with attempt 1 (one claim each).

SQLite's write lock is not fair: a waiter sleeps in the busy handler (1, 2, 5 ... 100 ms) while
the process that just committed takes the lock again, so one process does most of the calls and
its page cache stays warm (a handoff costs the new holder a cold cache: measured at about 1.7x
the work of a warm transaction when a flock forced strict turns). The rows say how unfair: the
busiest process's share of the calls and the longest single call. A waiter's last sleep also
delays the end of a round by up to 100 ms, which is why a full run takes 3,000 tasks a round
(about 3 s): at 600 tasks (about 0.5 s) the last three calls of a 4-process round, the
waiters' final claims, were measured to wait 50-100 ms for a free lock, 10-20% of the round.
"""

from __future__ import annotations

import functools
import multiprocessing
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from aios_ledger.core import LedgerError
from aios_ledger.shell import TaskLedger

from .harness import (
    Size,
    figure,
    interleaved_values,
    paired_ratio,
    percentile,
    recorded,
    sized,
    summary,
)

PROCESSES = (1, 2, 4)


def _worker(path: str, start: Any, out: Any) -> None:
    latencies: list[float] = []
    claimed: list[str] = []
    busy_errors = 0
    with TaskLedger(path) as ledger:
        start.wait()
        began = time.perf_counter()
        while True:
            try:
                t0 = time.perf_counter()
                claim = ledger.claim(agent_id="worker", capabilities=[], lease_seconds=300)
                latencies.append(time.perf_counter() - t0)
                if claim is None:
                    break
                claimed.append(claim["task_id"])
                t0 = time.perf_counter()
                ledger.submit_result(
                    claim["task_id"],
                    lease_token=claim["lease_token"],
                    result={"summary": "done"},
                    idempotency_key="submit-" + claim["task_id"],
                )
                latencies.append(time.perf_counter() - t0)
            except LedgerError as error:
                if error.code != "DATABASE_BUSY":
                    raise
                busy_errors += 1
        ended = time.perf_counter()
        retries = ledger.database.busy_retries
    out.put(
        {
            "began": began,
            "ended": ended,
            "latencies": latencies,
            "claimed": claimed,
            "busy_errors": busy_errors,
            "busy_retries": retries,
        }
    )


def _round(path: Path, tasks: int, processes: int) -> dict[str, Any]:
    for suffix in ("", "-wal", "-shm"):
        Path(f"{path}{suffix}").unlink(missing_ok=True)
    with TaskLedger(path) as ledger:
        ledger.create_tasks(
            ({"goal": "g", "instructions": "run", "success_criteria": ["ok"]}, f"c-{n}")
            for n in range(tasks)
        )
    context = multiprocessing.get_context("spawn")
    start, out = context.Event(), context.Queue()
    workers = [
        context.Process(target=_worker, args=(str(path), start, out)) for _ in range(processes)
    ]
    for worker in workers:
        worker.start()
    time.sleep(0.5)  # every worker has opened its connection and waits on the event
    start.set()
    reports = [out.get(timeout=600) for _ in workers]
    for worker in workers:
        worker.join()
    claimed = [task for report in reports for task in report["claimed"]]
    with TaskLedger(path) as ledger:
        final = ledger.list_tasks("SUBMITTED", limit=10_000)
    once = sum(1 for task in final if task["attempt"] == 1)
    calls = sum(len(report["latencies"]) for report in reports)
    seconds = max(r["ended"] for r in reports) - min(r["began"] for r in reports)
    return {
        "rate": calls / seconds,
        "latencies": [x for report in reports for x in report["latencies"]],
        "busy_retries": sum(report["busy_retries"] for report in reports),
        "busy_errors": sum(report["busy_errors"] for report in reports),
        "double_claims": (len(claimed) - len(set(claimed))) + (tasks - once),
        "unclaimed": tasks - len(set(claimed)),
        "busiest_share": max(len(report["latencies"]) for report in reports) / calls,
    }


def run(scratch: Path, *, size: Size, reps: int) -> list[dict[str, Any]]:
    tasks = sized(size, full=3000, quick=600, smoke=40)
    rounds: dict[int, list[dict[str, Any]]] = {n: [] for n in PROCESSES}

    def variant(processes: int) -> Callable[[], float]:
        path = scratch / f"contention-{processes}.db"
        one_round = functools.partial(_round, path, tasks, processes)
        return recorded(one_round, rounds[processes], lambda outcome: float(outcome["rate"]))

    values = interleaved_values({str(n): variant(n) for n in PROCESSES}, reps)
    rows: list[dict[str, Any]] = []
    for n in PROCESSES:
        outcomes = rounds[n]
        p50 = [percentile(o["latencies"], 0.5) * 1000 for o in outcomes]
        p99 = [percentile(o["latencies"], 0.99) * 1000 for o in outcomes]
        retries = [float(o["busy_retries"]) for o in outcomes]
        errors = sum(o["busy_errors"] for o in outcomes)
        doubles = sum(o["double_claims"] for o in outcomes)
        unclaimed = sum(o["unclaimed"] for o in outcomes)
        label = f"{n} process{'es' if n > 1 else ''}"
        rows.append(
            figure(
                "3 contention",
                f"{label} claim+submit",
                summary(values[str(n)]),
                "calls/s",
                note=f"{tasks} tasks, FULL",
            )
        )
        if n > 1:
            ratio = paired_ratio(values[str(n)], values["1"])
            goal_met = ratio["median"] >= 0.9 and errors == 0 and doubles == 0
            rows.append(
                figure(
                    "3 contention",
                    f"{label} / 1 process",
                    ratio,
                    "ratio",
                    target=">= 0.9, 0 busy errors" if n == 4 else "",
                    met=goal_met if n == 4 else None,
                )
            )
        rows.append(figure("3 contention", f"{label} p50", summary(p50), "ms"))
        rows.append(figure("3 contention", f"{label} p99", summary(p99), "ms"))
        if n > 1:
            longest = [max(o["latencies"]) * 1000 for o in outcomes]
            busiest = [o["busiest_share"] for o in outcomes]
            rows.append(figure("3 contention", f"{label} longest call", summary(longest), "ms"))
            rows.append(
                figure("3 contention", f"{label} busiest's share", summary(busiest), "fraction")
            )
        rows.append(figure("3 contention", f"{label} busy retries", summary(retries), "count"))
        rows.append(
            figure(
                "3 contention",
                f"{label} double claims / busy errors",
                summary([float(doubles + errors)] * len(outcomes)),
                "count",
                target="0",
                met=doubles == 0 and errors == 0 and unclaimed == 0,
                note=f"double claims {doubles}, busy errors {errors}, unclaimed {unclaimed}",
            )
        )
    return rows
