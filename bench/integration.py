"""Part 11: the Merkle log off PostgreSQL's write path: lifecycles per second with 1 and 4
processes on one PostgreSQL while an integrator process (as `aios-ledger integrate --follow`
runs) appends what they commit, and the integration lag it measured at that peak.

A lifecycle is create, claim, submit, verify, one call each (part 9's `ledger` system). The lag
of a pass is how long the oldest event it appended had waited since it was written; every event
of the pass waited no longer, so the p99 over events, each counted at its pass's lag, is an
upper bound. Rounds interleaved, a fresh schema each (part 9's server and workers).

    python -m bench.integration integrate URL STOP_FILE   # the integrator worker
"""

from __future__ import annotations

import functools
import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import psycopg

from .harness import Size, figure, interleaved_values, paired_ratio, percentile, sized, summary
from .postgres import ROOT, Server, run_workers

PROCESSES = (1, 4)
# The integrator's pause when a pass caught up (serve's default).
INTEGRATE_SECONDS = 0.05


def integrate(url: str, stop_file: str) -> dict[str, Any]:
    """Passes until `stop_file` exists and a pass caught up: each pass's appended count and
    lag, then the tree's size and the events' count."""
    from aios_ledger.shell import Database
    from aios_ledger.shell.clock import read_clock, system_clock
    from aios_ledger.shell.db.merkle import Integrator, current_tree_head

    passes: list[tuple[int, float]] = []
    with Database(url) as db:
        integrator = Integrator(db)
        while True:
            stopping = Path(stop_file).exists()
            done = integrator.run_pass(read_clock(system_clock))
            if done.appended and done.lag_seconds is not None:
                passes.append((done.appended, done.lag_seconds))
            if not done.more:
                if stopping:
                    break
                time.sleep(INTEGRATE_SECONDS)
        size = current_tree_head(db).size
    with psycopg.connect(url.split("?", maxsplit=1)[0], autocommit=True) as raw:
        schema = url.rsplit("=", 1)[1]
        events = raw.execute(f"SELECT count(*) FROM {schema}.events".encode()).fetchone()
    return {"passes": passes, "tree_size": size, "events": events and int(events[0])}


def lifecycles(server: Server, processes: int, jobs: int, lags: list[float]) -> float:
    """Jobs per second of one repetition (every process's jobs over the wall time from the
    agreed start to the last one's end); each event's lag is added to `lags`."""
    url = server.schema()
    from aios_ledger.shell import TaskLedger

    TaskLedger(url).close()
    stop_file = Path(f"/tmp/aios-bench-integrate-{time.time_ns()}")
    integrator = subprocess.Popen(
        [sys.executable, "-m", "bench.integration", "integrate", url, str(stop_file)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=ROOT,
    )
    start = time.time() + 1.5 + 0.5 * processes
    ends = run_workers("ledger", url, jobs, start, processes)
    stop_file.touch()
    out, err = integrator.communicate(timeout=900)
    stop_file.unlink()
    if integrator.returncode != 0:
        raise RuntimeError(f"integrator: {err[-2000:]}")
    outcome = json.loads(out.strip().splitlines()[-1])
    if outcome["tree_size"] != outcome["events"]:
        raise RuntimeError(f"the tree covers {outcome['tree_size']} of {outcome['events']}")
    for appended, lag in outcome["passes"]:
        lags.extend([float(lag)] * int(appended))
    server.drop_schema(url)
    return jobs * processes / (max(ends) - start)


def run(scratch: Path, *, size: Size, reps: int) -> list[dict[str, Any]]:
    del scratch  # everything lives on the server
    server = Server()
    try:
        return _run(server, size=size, reps=reps)
    finally:
        server.close()


def _run(server: Server, *, size: Size, reps: int) -> list[dict[str, Any]]:
    jobs = sized(size, full=600, quick=150, smoke=10)
    lags: dict[int, list[float]] = {n: [] for n in PROCESSES}
    per_process = {n: jobs if n == 1 else jobs // 2 for n in PROCESSES}
    values = interleaved_values(
        {
            f"x{n}": functools.partial(lifecycles, server, n, per_process[n], lags[n])
            for n in PROCESSES
        },
        reps,
    )
    part = "11 integrator"
    rows = [
        figure(
            part,
            f"ledger x{n} lifecycles, integrator beside",
            summary(values[f"x{n}"]),
            "jobs/s",
            note=f"{per_process[n]} jobs per process",
        )
        for n in PROCESSES
    ]
    ratio = paired_ratio(values["x4"], values["x1"])
    rows.append(
        figure(
            part,
            "ledger x4 / ledger x1",
            ratio,
            "ratio",
            target=">= 1.5",
            met=ratio["median"] >= 1.5,
        )
    )
    for n in PROCESSES:
        rows.append(
            lag_figure(part, f"x{n}", lags[n], reps, peak=n == max(PROCESSES), note="events")
        )
    return rows


def lag_figure(
    part: str, variant: str, lags: list[float], reps: int, *, peak: bool, note: str
) -> dict[str, Any]:
    """The integration lag's p99 over every event of a variant's repetitions (min and max over
    events); the target (at most 1 s) is the peak's."""
    p99 = percentile(lags, 0.99) if lags else 0.0
    return figure(
        part,
        f"integration lag p99, {variant}",
        {"median": p99, "min": min(lags, default=0.0), "max": max(lags, default=0.0), "reps": reps},
        "s",
        target="<= 1" if peak else "",
        met=p99 <= 1.0 if peak else None,
        note=f"{len(lags)} {note}; min and max over events",
    )


def main(argv: list[str]) -> int:
    if argv[0] == "integrate":
        sys.stdout.write(json.dumps(integrate(argv[1], argv[2])) + "\n")
        return 0
    raise SystemExit(f"unknown command {argv[0]}")


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
