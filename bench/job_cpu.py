"""CPU a lifecycle costs the ledger's own process on PostgreSQL, for comparing builds.

    python -m bench.job_cpu URL JOBS [--blocks B] [--profile FILE]  # prints one JSON line
    python -m bench.job_cpu URL JOBS --blocks B --compare PYTHON_A PYTHON_B [--rounds R]

Runs JOBS lifecycles (create_task, claim, submit_result, verify, as `pg_worker.ledger`) in a
fresh schema of URL's database and reports `time.process_time()` per lifecycle in ms: CPU time,
not wall time, because the machine is shared and a wall-clock figure there measures the others.
`--compare` runs the same measurement with each interpreter (each checkout's virtual
environment, from this checkout's folder), alternating, and prints each build's median [min, max]
over every block of every round.
"""

from __future__ import annotations

import argparse
import json
import secrets
import statistics
import subprocess
import time
from pathlib import Path
from typing import Any

import psycopg

from .pg_worker import lifecycle

DEFAULT_URL = "postgresql://127.0.0.1:5432/test"
WARMUP = 20
ROOT = Path(__file__).resolve().parent.parent


def fresh_schema(url: str) -> tuple[str, str]:
    name = f"perf_{secrets.token_hex(4)}"
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(f"CREATE SCHEMA {name}".encode())
    return name, f"{url}?search_path={name}"


def drop_schema(url: str, name: str) -> None:
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(f"DROP SCHEMA {name} CASCADE".encode())


def lifecycles(store: object, first: int, count: int) -> None:
    for n in range(first, first + count):
        lifecycle(store, n, "cpu")


def measure(url: str, jobs: int, blocks: int, profile: str | None) -> dict[str, Any]:
    """CPU ms per lifecycle in each of `blocks` blocks of JOBS / blocks lifecycles: the least
    disturbed blocks show the build, the others the machine's load."""
    from aios_ledger.shell import TaskLedger

    name, schema_url = fresh_schema(url)
    size = max(1, jobs // blocks)
    figures: list[float] = []
    try:
        with TaskLedger(schema_url) as store:
            lifecycles(store, 0, WARMUP)  # first-call costs: statements prepared, caches filled
            for block in range(blocks):
                first = WARMUP + block * size
                cpu = time.process_time()
                if profile:
                    import cProfile

                    # CPU time, so that waits for the server do not drown the process's work.
                    profiler = cProfile.Profile(time.process_time)
                    profiler.runcall(lifecycles, store, first, size)
                    profiler.dump_stats(f"{profile}.{block}")
                else:
                    lifecycles(store, first, size)
                figures.append(1000 * (time.process_time() - cpu) / size)
    finally:
        drop_schema(url, name)
    return {"cpu_ms": figures}


def compare(pythons: list[str], url: str, jobs: int, blocks: int, rounds: int) -> None:
    figures: dict[str, list[float]] = {python: [] for python in pythons}
    for _ in range(rounds):
        for python in pythons:
            out = subprocess.run(
                [python, "-m", "bench.job_cpu", url, str(jobs), "--blocks", str(blocks)],
                check=True,
                capture_output=True,
                text=True,
                cwd=ROOT,
            ).stdout
            figures[python].extend(json.loads(out)["cpu_ms"])
    for python, values in figures.items():
        print(
            f"{python}: median {statistics.median(values):.3f} ms"
            f" [{min(values):.3f}, {max(values):.3f}] over {len(values)} blocks"
        )


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("url", nargs="?", default=DEFAULT_URL)
    parser.add_argument("jobs", nargs="?", type=int, default=300)
    parser.add_argument("--profile")
    parser.add_argument("--compare", nargs="+")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--blocks", type=int, default=1)
    args = parser.parse_args()
    if args.compare:
        compare(args.compare, args.url, args.jobs, args.blocks, args.rounds)
    else:
        print(json.dumps(measure(args.url, args.jobs, args.blocks, args.profile)))


if __name__ == "__main__":
    main()
