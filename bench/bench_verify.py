"""Benchmark (not a test): `verify` against a plain read-and-hash loop over the same rows.

    .venv/bin/python bench/bench_verify.py              # 1,000,000 events
    .venv/bin/python bench/bench_verify.py --events 20000

Builds the log once in a temporary directory (or reuses `--db PATH` if it already holds at least
the asked number of events) through the real write path: each event sealed onto the log's tail
in a plan and applied as a decision's plan is, inside a few large `BEGIN IMMEDIATE`
transactions. Then, in the same run and over the same rows, times the plain loop (read every
event with its seal and sha256 it) and `verify_log`.
"""

from __future__ import annotations

import argparse
import hashlib
import sys
import tempfile
import time
from pathlib import Path

import apsw
from aios_ledger.core import chain_of
from aios_ledger.core.actors import Actor
from aios_ledger.core.log import EventAppend
from aios_ledger.core.log.plan import sealed_plan
from aios_ledger.shell import Database, verify_log
from aios_ledger.shell.db.apply import PlanExecutor
from aios_ledger.shell.db.connection import fetch_value
from aios_ledger.shell.db.run import Connection
from aios_ledger.shell.db.statements import sql

# Who the decisions here act as.
ACTOR = Actor("tester", "library")

BATCH = 50_000
EVENTS_PER_TASK = 10
TYPES = ("TASK_CREATED", "TASK_CLAIMED", "TASK_HEARTBEAT", "RESULT_SUBMITTED", "TASK_VERIFIED")


def build(db: Database, events: int) -> None:
    present = int(db.read(lambda conn: fetch_value(conn, "log_max_event_id")))
    start = time.perf_counter()
    while present < events:
        count = min(BATCH, events - present)
        first = present

        def write(conn: Connection, first: int = first, count: int = count) -> None:
            plans = PlanExecutor(conn)
            for number in range(first, first + count):
                task = None if number % 97 == 0 else f"task-{number // EVENTS_PER_TASK:07d}"
                event = EventAppend(
                    task_id=task,
                    agent_id=f"agent-{number % 13}",
                    event_type=TYPES[number % len(TYPES)],
                    payload={"n": number, "note": "bench", "attempt": number % 3},
                    created_at="2026-08-20T00:00:00Z",
                    actor=ACTOR,
                )
                plans.apply(sealed_plan((), (event,), {}, tail=plans.tail(chain_of(task))))

        db.write(write)
        present += count
        sys.stderr.write(f"\rbuilt {present}/{events} events")
    sys.stderr.write(f"\nbuild: {time.perf_counter() - start:.1f} s\n")


def plain_read_and_hash(db: Database) -> tuple[int, float]:
    """Every row the verifier reads, hashed with sha256, and nothing else."""

    def work(conn: Connection) -> int:
        assert isinstance(conn, apsw.Connection)
        rows = 0
        for row in conn.execute(sql("log_verify_rows")):
            hashlib.sha256("\0".join(map(str, row)).encode()).digest()
            rows += 1
        return rows

    start = time.perf_counter()
    rows = db.read(work)
    return rows, time.perf_counter() - start


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=1_000_000)
    parser.add_argument("--db", help="reuse (and grow) this database instead of a temp one")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as scratch:
        path = Path(args.db) if args.db else Path(scratch) / "bench.db"
        with Database(path, synchronous="NORMAL") as db:
            build(db, args.events)
            rows, plain = plain_read_and_hash(db)
            start = time.perf_counter()
            report = verify_log(db)
            verify = time.perf_counter() - start
        if not report.intact:
            sys.stderr.write(f"the benchmark log is not intact: {report.finding_counts}\n")
            return 1
        plain_rate, verify_rate = rows / plain, report.events / verify
        print(f"events:            {report.events}")
        print(f"plain read+hash:   {plain:8.2f} s  {plain_rate:12,.0f} events/s")
        print(f"verify:            {verify:8.2f} s  {verify_rate:12,.0f} events/s")
        print(f"verify / plain:    {verify_rate / plain_rate:8.3f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
