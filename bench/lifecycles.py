"""Part 2: whole lifecycles per second against Huey (SqliteHuey) and DBOS Transact on SQLite.

Every repetition runs each system once, interleaved, each in a fresh process on a fresh file
(`bench.peers`), at the same synchronous level in WAL mode. Reported per job (jobs/s) and per
write transaction (transactions/s and transactions per job).
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from pathlib import Path
from typing import Any

from .harness import (
    Size,
    figure,
    interleaved_values,
    paired_ratio,
    recorded,
    run_worker,
    sized,
    summary,
)
from .peers import LEDGER_BATCH
from .transitions import RawLoop, transitions_per_second

SYSTEMS = ("ledger", "ledger-batched", "huey", "dbos")
NAMES = {
    "ledger": "ledger",
    "ledger-batched": f"ledger batched x{LEDGER_BATCH}",
    "huey": "Huey SqliteHuey",
    "dbos": "DBOS Transact",
}


def _one(system: str, level: str, jobs: int, scratch: Path, serial: list[int]) -> dict[str, Any]:
    serial[0] += 1
    path = scratch / f"{system}-{level}-{serial[0]}.db"
    outcome = run_worker("bench.peers", system, level, str(jobs), str(path))
    for suffix in ("", "-wal", "-shm"):
        Path(f"{path}{suffix}").unlink(missing_ok=True)
    return outcome


def _jobs_per_second(outcome: dict[str, Any]) -> float:
    return float(outcome["jobs"] / outcome["seconds"])


def _raw_jobs(raw: RawLoop, tasks: int) -> float:
    return transitions_per_second(raw, tasks) / 3


def run(scratch: Path, *, size: Size, reps: int) -> list[dict[str, Any]]:
    jobs = sized(
        size,
        full={"ledger": 400, "ledger-batched": 1000, "huey": 400, "dbos": 80},
        quick={"ledger": 150, "ledger-batched": 300, "huey": 150, "dbos": 40},
        smoke={"ledger": 10, "ledger-batched": 20, "huey": 10, "dbos": 5},
    )
    raw_tasks = sized(size, full=100, quick=100, smoke=5)
    levels = ("NORMAL", "FULL") if size == "full" else ("FULL",)
    rows: list[dict[str, Any]] = []
    serial = [0]
    for level in levels:
        outcomes: dict[str, list[dict[str, Any]]] = {system: [] for system in SYSTEMS}

        raw = RawLoop(scratch / f"lifecycles-raw-{level}.db", level)
        variants: dict[str, Callable[[], float]] = {
            system: recorded(
                functools.partial(_one, system, level, jobs[system], scratch, serial),
                outcomes[system],
                _jobs_per_second,
            )
            for system in SYSTEMS
        }
        # The ceiling for the ledger's shape: part 1's raw transactions, three per job.
        variants["raw"] = functools.partial(_raw_jobs, raw, raw_tasks)
        try:
            values = interleaved_values(variants, reps)
        finally:
            raw.close()
        rows.append(
            figure(
                "2 lifecycles",
                f"raw apsw limit {level} (3 tx/job)",
                summary(values["raw"]),
                "jobs/s",
                note="part 1's raw transaction rate / 3, the ledger's ceiling",
            )
        )
        for system in SYSTEMS:
            name = NAMES[system]
            per_job = [
                float(o.get("write_transactions", o.get("transactions", 0)) / o["jobs"])
                for o in outcomes[system]
            ]
            tx_rate = [rate * tx for rate, tx in zip(values[system], per_job, strict=True)]
            kind = "transactions (reads too)" if system == "dbos" else "write transactions"
            rows.append(
                figure(
                    "2 lifecycles",
                    f"{name} {level}",
                    summary(values[system]),
                    "jobs/s",
                    note=f"{jobs[system]} jobs per repetition, {summary(per_job)['median']:.2f} "
                    f"{kind} per job",
                )
            )
            rows.append(
                figure(
                    "2 lifecycles",
                    f"{name} {level} transactions",
                    summary(tx_rate),
                    "tx/s",
                    note=f"{kind}: {summary(per_job)['median']:.2f} per job",
                )
            )
        for ledger in ("ledger", "ledger-batched"):
            huey = paired_ratio(values[ledger], values["huey"])
            dbos = paired_ratio(values[ledger], values["dbos"])
            rows.append(
                figure(
                    "2 lifecycles",
                    f"{NAMES[ledger]}/Huey {level}",
                    huey,
                    "ratio",
                    target=">= 1",
                    met=huey["median"] >= 1,
                )
            )
            rows.append(
                figure(
                    "2 lifecycles",
                    f"{NAMES[ledger]}/DBOS {level}",
                    dbos,
                    "ratio",
                    target=">= 10",
                    met=dbos["median"] >= 10,
                )
            )
    return rows
