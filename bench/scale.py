"""Part 4: claim latency with 1 thousand, 100 thousand and 1 million queued tasks (NORMAL).

Each queue is built once, not timed, through `create_tasks` in transactions of 10,000 tasks
(the same core `decide_create` and sealed events as any create), with enough extra tasks that
the queue never falls below its nominal depth. Each repetition is a fresh process that opens
the ledger, claims once untimed, then times `CLAIMS` claims and reports p50, p99 and its peak
resident memory (VmHWM); the depths are interleaved round by round. A full run times 2,000
claims a repetition: at NORMAL the write-ahead log starts over about every 120 claims, and the
commit that closes a cycle is the slowest of them, so a p99 over fewer claims would depend on
how many cycles the window happened to close (with 500, two to four).

    python -m bench.scale build PATH TASKS      # the worker's two commands
    python -m bench.scale claim PATH CLAIMS
"""

from __future__ import annotations

import functools
import json
import resource
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from .harness import (
    Size,
    figure,
    interleaved_values,
    paired_ratio,
    percentile,
    recorded,
    run_worker,
    sized,
    summary,
)

BUILD_BATCH = 10_000


def build(path: Path, tasks: int) -> None:
    from aios_ledger.shell import TaskLedger

    with TaskLedger(path, synchronous="NORMAL") as ledger:
        for first in range(0, tasks, BUILD_BATCH):
            count = min(BUILD_BATCH, tasks - first)
            ledger.create_tasks(
                (
                    {
                        "goal": f"goal {n}",
                        "instructions": "run",
                        "success_criteria": ["ok"],
                        "priority": n % 3,
                    },
                    f"create-{n}",
                )
                for n in range(first, first + count)
            )


def claim(path: Path, claims: int) -> dict[str, Any]:
    from aios_ledger.shell import TaskLedger

    latencies = []
    with TaskLedger(path, synchronous="NORMAL") as ledger:
        ledger.claim(agent_id="warm", capabilities=[], lease_seconds=600)
        for _ in range(claims):
            start = time.perf_counter()
            got = ledger.claim(agent_id="worker", capabilities=[], lease_seconds=600)
            latencies.append(time.perf_counter() - start)
            if got is None:
                raise RuntimeError("the queue ran dry")
    return {
        "p50_ms": percentile(latencies, 0.5) * 1000,
        "p99_ms": percentile(latencies, 0.99) * 1000,
        # Not in the table (2,000 claims make p99.9 the second longest claim); for longer runs
        # by hand, e.g. `python -m bench.scale claim PATH 8000`.
        "p999_ms": percentile(latencies, 0.999) * 1000,
        "max_ms": max(latencies) * 1000,
        "claims_per_s": len(latencies) / sum(latencies),
        "maxrss_mb": peak_resident_mib(),
    }


def peak_resident_mib() -> float:
    """This process image's own peak resident set. Not `ru_maxrss`: Linux carries the peak of
    the process that forked over exec, so a worker started from a 200 MiB parent reports 211
    MiB against its own 11 (measured), and the runner's size hid the claimer's."""
    try:
        with open("/proc/self/status", encoding="ascii") as status:
            for line in status:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # elsewhere: best known


def run(scratch: Path, *, size: Size, reps: int) -> list[dict[str, Any]]:
    depths = sized(
        size, full=(1_000, 100_000, 1_000_000), quick=(1_000, 20_000), smoke=(100, 1_000)
    )
    claims = sized(size, full=2000, quick=200, smoke=20)
    paths = {}
    for depth in depths:
        path = scratch / f"scale-{depth}.db"
        start = time.perf_counter()
        run_worker("bench.scale", "build", str(path), str(depth + (reps + 1) * (claims + 1)))
        sys.stdout.write(f"  built {depth:,} queued tasks in {time.perf_counter() - start:.1f} s\n")
        paths[depth] = path
    outcomes: dict[int, list[dict[str, Any]]] = {depth: [] for depth in depths}

    def variant(depth: int) -> Callable[[], float]:
        args = ("claim", str(paths[depth]), str(claims))
        claim = functools.partial(run_worker, "bench.scale", *args)
        return recorded(claim, outcomes[depth], lambda outcome: float(outcome["p99_ms"]))

    p99 = interleaved_values({str(d): variant(d) for d in depths}, reps)
    rows: list[dict[str, Any]] = []
    for depth in depths:
        label = f"{depth:,} queued"
        rows.append(
            figure(
                "4 scale",
                f"claim p50 {label}",
                summary([o["p50_ms"] for o in outcomes[depth]]),
                "ms",
                note=f"{claims} claims per repetition, NORMAL",
            )
        )
        rows.append(figure("4 scale", f"claim p99 {label}", summary(p99[str(depth)]), "ms"))
        rows.append(
            figure(
                "4 scale",
                f"peak memory {label}",
                summary([o["maxrss_mb"] for o in outcomes[depth]]),
                "MiB",
            )
        )
    deepest, shallowest = str(depths[-1]), str(depths[0])
    ratio = paired_ratio(p99[deepest], p99[shallowest])
    rows.append(
        figure(
            "4 scale",
            f"claim p99 {depths[-1]:,} / {depths[0]:,}",
            ratio,
            "ratio",
            target="<= 1.5",
            met=ratio["median"] <= 1.5,
        )
    )
    memory = paired_ratio(
        [o["maxrss_mb"] for o in outcomes[depths[-1]]],
        [o["maxrss_mb"] for o in outcomes[depths[0]]],
    )
    rows.append(
        figure(
            "4 scale",
            f"peak memory {depths[-1]:,} / {depths[0]:,}",
            memory,
            "ratio",
            target="~1 (flat)",
            met=memory["median"] <= 1.1,
        )
    )
    return rows


def main(argv: list[str]) -> int:
    command, path, count = argv
    if command == "build":
        build(Path(path), int(count))
        return 0
    sys.stdout.write(json.dumps(claim(Path(path), int(count))) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
