"""Part 9: the ledger on PostgreSQL against PgQueuer, Procrastinate and its own raw statements.

Same server, same run: lifecycles per second (create, claim, submit, verify; the peers'
nearest equivalent is enqueue, dequeue, complete) at one call per step and batched, with 1 and 4
processes; a raw psycopg loop of the ledger's own statements (one at a time, and with each
transition's writes in one pipeline, the ledger's shape); and claim latency with 1 thousand and 1
million tasks queued (20 thousand in a quick run). Each figure is the median of the
repetitions, rounds interleaved; every repetition runs in a fresh schema of a database made for
the run (`AIOS_BENCH_POSTGRES_URL`, default the test server) and dropped after it. The processes
of one repetition start together at an agreed moment, so that imports are not timed.
"""

from __future__ import annotations

import functools
import json
import os
import secrets
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import psycopg

from .harness import Size, figure, interleaved_values, paired_ratio, run_worker, sized, summary

DEFAULT_URL = "postgresql://postgres@127.0.0.1:5432/postgres"
LEDGER_SYSTEMS = ("ledger", "ledger-batched", "raw", "raw-pipelined")
# (system, processes): the table's rows, in order.
VARIANTS = (
    ("ledger", 1),
    ("ledger", 4),
    ("ledger-batched", 1),
    ("ledger-batched", 4),
    ("raw", 1),
    ("raw", 4),
    ("raw-pipelined", 1),
    ("procrastinate", 1),
    ("procrastinate-batched", 1),
    ("pgqueuer-psycopg", 1),
    ("pgqueuer-asyncpg", 1),
)
ROOT = Path(__file__).resolve().parent.parent


class Server:
    """A database of the run's own on the benchmark's server, and fresh schemas in it."""

    def __init__(self) -> None:
        base = os.environ.get("AIOS_BENCH_POSTGRES_URL") or DEFAULT_URL
        self.admin_url = base
        self.name = f"aios_bench_{secrets.token_hex(4)}"
        with psycopg.connect(base, autocommit=True) as admin:
            admin.execute(f"CREATE DATABASE {self.name}".encode())
        self.url = urlunsplit(urlsplit(base)._replace(path=f"/{self.name}"))
        self.serial = 0

    def schema(self) -> str:
        self.serial += 1
        name = f"s{self.serial}"
        with psycopg.connect(self.url, autocommit=True) as conn:
            conn.execute(f"CREATE SCHEMA {name}".encode())
        return f"{self.url}?search_path={name}"

    def drop_schema(self, url: str) -> None:
        name = url.rsplit("=", 1)[1]
        with psycopg.connect(self.url, autocommit=True) as conn:
            conn.execute(f"DROP SCHEMA {name} CASCADE".encode())

    def close(self) -> None:
        with psycopg.connect(self.admin_url, autocommit=True) as admin:
            admin.execute(f"DROP DATABASE IF EXISTS {self.name} WITH (FORCE)".encode())


def lifecycles(
    server: Server, system: str, processes: int, jobs: int, *, timed_start: bool = True
) -> float:
    """Jobs per second of one repetition: every process's jobs over the wall time from the
    agreed start to the last process's end. `timed_start=False` (a smoke run): the processes
    start at once, their start-up timed with their jobs."""
    url = server.schema()
    if system in LEDGER_SYSTEMS:
        from aios_ledger.shell import TaskLedger

        TaskLedger(url).close()
    start = time.time() + (1.5 + 0.5 * processes if timed_start else 0.0)
    ends = run_workers(system, url, jobs, start, processes)
    server.drop_schema(url)
    return jobs * processes / (max(ends) - start)


def run_workers(system: str, url: str, jobs: int, start: float, processes: int) -> list[float]:
    """Run `processes` `bench.pg_worker`s of `system` from the agreed `start`; when each ended."""
    workers = [
        subprocess.Popen(
            [sys.executable, "-m", "bench.pg_worker", system, url, str(jobs), str(start), str(n)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            cwd=ROOT,
        )
        for n in range(processes)
    ]
    ends = []
    for worker in workers:
        out, err = worker.communicate(timeout=900)
        if worker.returncode != 0:
            raise RuntimeError(f"{system}: {err[-2000:]}")
        ends.append(float(json.loads(out.strip().splitlines()[-1])["end"]))
    return ends


def run(scratch: Path, *, size: Size, reps: int) -> list[dict[str, Any]]:
    del scratch  # everything lives on the server
    server = Server()
    try:
        return _run(server, size=size, reps=reps)
    finally:
        server.close()


def _label(system: str, processes: int) -> str:
    return f"{system} x{processes}"


def _run(server: Server, *, size: Size, reps: int) -> list[dict[str, Any]]:
    jobs = sized(size, full=600, quick=150, smoke=10)
    variants: dict[str, Callable[[], float]] = {
        _label(system, processes): functools.partial(
            lifecycles,
            server,
            system,
            processes,
            jobs if processes == 1 else jobs // 2,
            timed_start=size != "smoke",
        )
        for system, processes in VARIANTS
    }
    values = interleaved_values(variants, reps)
    rows = [
        figure(
            "9 postgresql",
            f"{_label(system, processes)} lifecycles",
            summary(values[_label(system, processes)]),
            "jobs/s",
            note=f"{jobs if processes == 1 else jobs // 2} jobs per process",
        )
        for system, processes in VARIANTS
    ]
    targets = (
        ("ledger x1", "procrastinate x1", ">= 1"),
        ("ledger-batched x1", "pgqueuer-asyncpg x1", ">= 0.7"),
        ("ledger x4", "ledger x1", ">= 1.8"),
        ("ledger-batched x4", "ledger-batched x1", ""),
        ("ledger-batched x1", "pgqueuer-psycopg x1", ""),
        ("ledger x1", "raw-pipelined x1", ">= 0.7"),
        ("ledger x1", "raw x1", ""),
        ("ledger x4", "raw x4", ""),
    )
    for numerator, denominator, target in targets:
        ratio = paired_ratio(values[numerator], values[denominator])
        bound = float(target.split()[-1]) if target else None
        rows.append(
            figure(
                "9 postgresql",
                f"{numerator} / {denominator}",
                ratio,
                "ratio",
                target=target,
                met=None if bound is None else ratio["median"] >= bound,
            )
        )
    rows += _claim_latency(server, size=size, reps=reps)
    return rows


def _claim_latency(server: Server, *, size: Size, reps: int) -> list[dict[str, Any]]:
    depths = sized(size, full=(1_000, 1_000_000), quick=(1_000, 20_000), smoke=(100, 1_000))
    claims = sized(size, full=1000, quick=200, smoke=20)
    urls = {}
    for depth in depths:
        url = server.schema()
        began = time.perf_counter()
        run_worker("bench.pg_worker", "build", url, str(depth + (reps + 1) * (claims + 1)))
        sys.stdout.write(f"  built {depth:,} queued tasks in {time.perf_counter() - began:.1f} s\n")
        urls[depth] = url
    outcomes: dict[int, list[dict[str, Any]]] = {depth: [] for depth in depths}

    def measure(depth: int) -> float:
        outcome = run_worker("bench.pg_worker", "claims", urls[depth], str(claims))
        outcomes[depth].append(outcome)
        return float(outcome["p99_ms"])

    p99 = interleaved_values({str(d): functools.partial(measure, d) for d in depths}, reps)
    rows = []
    for depth in depths:
        rows.append(
            figure(
                "9 postgresql",
                f"claim p99 {depth:,} queued",
                summary(p99[str(depth)]),
                "ms",
                note=f"p50 {summary([o['p50_ms'] for o in outcomes[depth]])['median']:.2f} ms, "
                f"{claims} claims per repetition",
            )
        )
    ratio = paired_ratio(p99[str(depths[-1])], p99[str(depths[0])])
    rows.append(
        figure(
            "9 postgresql",
            f"claim p99 {depths[-1]:,} / {depths[0]:,}",
            ratio,
            "ratio",
            target="<= 1.5",
            met=ratio["median"] <= 1.5,
        )
    )
    return rows
