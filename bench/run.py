"""The benchmark's one entry point: every part, one table, and the same as JSON.

    .venv/bin/python -m bench            # the full run (6 to 9 minutes on 2 cores)
    .venv/bin/python -m bench --quick    # a short run (about 1 minute)
    .venv/bin/python -m bench --only 1,3 # some parts

Each figure is the median of at least five interleaved repetitions, with min and max; every ratio
compares figures measured in the same run, round by round.
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import apsw

from . import api, aux, contention, layers, lifecycles, postgres, scale, transitions, verify
from .harness import RESULTS, figures_table, machine_facts, say

Part = Callable[..., list[dict[str, Any]]]
PARTS: dict[str, tuple[str, Part]] = {
    "1": ("transitions vs raw apsw", transitions.run),
    "2": ("lifecycles vs Huey and DBOS", lifecycles.run),
    "3": ("contention", contention.run),
    "4": ("claim latency at depth", scale.run),
    "5": ("auxiliary runs", aux.run),
    "6": ("event log verify", verify.run),
    "7": ("the layers' cost on a heartbeat", layers.run),
    "8": ("the HTTP API: 32 agents, group commit, long polls", api.run),
    "9": ("PostgreSQL vs PgQueuer, Procrastinate and raw psycopg", postgres.run),
}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="a short run (smaller sizes)")
    parser.add_argument("--reps", type=int, default=5, help="repetitions per figure (>= 5)")
    parser.add_argument("--only", default="", help="comma-separated part numbers")
    parser.add_argument("--output", default=str(RESULTS / "latest.json"))
    args = parser.parse_args(argv)
    reps = max(5, args.reps)
    chosen = [part for part in args.only.split(",") if part] or list(PARTS)
    facts = machine_facts()
    facts["synchronous"] = "NORMAL and FULL (part 1, 2); FULL (3, 5); NORMAL (4, 6)"
    facts["mode"] = "quick" if args.quick else "full"
    facts["repetitions"] = reps
    say(
        f"SQLite {facts['sqlite_version']} (apsw {facts['apsw_version']}), Python "
        f"{facts['python']}, {facts['cpu_count']} CPUs, fdatasync {facts['fdatasync_ms']} ms "
        f"(median of 4 KiB write+fdatasync in {facts['tmpdir']}), {facts['mode']} run"
    )
    rows: list[dict[str, Any]] = []
    timings: dict[str, float] = {}
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="aios-bench-") as scratch:
        for key in chosen:
            title, run = PARTS[key]
            say(f"part {key}: {title} ...")
            part_start = time.perf_counter()
            part_dir = Path(scratch) / f"part{key}"
            part_dir.mkdir()
            rows += run(part_dir, quick=args.quick, reps=reps)
            timings[key] = round(time.perf_counter() - part_start, 1)
            say(f"part {key}: {timings[key]} s")
    facts["seconds"] = {"total": round(time.perf_counter() - started, 1), **timings}
    table = figures_table(rows)
    say()
    say(_facts_line(facts))
    say(table)
    payload = {"machine": facts, "figures": rows, "table": table}
    output = Path(args.output)
    output.parent.mkdir(parents=True, exist_ok=True)
    output.write_text(json.dumps(payload, indent=2, sort_keys=True) + "\n")
    say(f"\nwritten to {output}")
    return 0


def _facts_line(facts: dict[str, Any]) -> str:
    return (
        f"SQLite {facts['sqlite_version']} | synchronous: {facts['synchronous']} | "
        f"CPUs: {facts['cpu_count']} | fdatasync: {facts['fdatasync_ms']} ms | "
        f"{facts['repetitions']} interleaved reps, median [min, max] | {facts['mode']} run, "
        f"{facts['seconds']['total']} s | apsw {apsw.apsw_version()}"
    )
