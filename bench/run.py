"""The benchmark's one entry point: every part, one table, and the same as JSON.

    .venv/bin/python -m bench            # the full run (6 to 9 minutes on 2 cores)
    .venv/bin/python -m bench --quick    # a short run (about 1 minute)
    .venv/bin/python -m bench --smoke    # every part at tiny sizes, one repetition: does it run?
    .venv/bin/python -m bench --only 1,3 # some parts

Each figure is the median of at least five interleaved repetitions, with min and max; every ratio
compares figures measured in the same run, round by round. A smoke run measures once, at sizes
too small to mean anything: it checks that every part still runs and produces its figures.

Every run checks its figures (each part produced some, each is a finite number, a rate or a
ratio is positive) and exits 1 when a part failed or a figure is missing, after writing what it
has. A part that cannot run (a peer of the `bench` extra not installed, PostgreSQL unreachable)
is a failure, never a skip.

Each run writes `latest.json` and a dated copy, `YYYY-MM-DD-<commit>.json` (a quick or smoke
run adds `-quick` or `-smoke`: only full runs are published), to `bench/results/` (`--results`):

    {
      "meta": {
        "date": "2026-12-01T10:15:00Z",          # when the run started, UTC
        "commit": "<40 hex>[-dirty]",            # the tree measured; -dirty: uncommitted changes
        "mode": "full" | "quick" | "smoke",
        "python": "3.11.2",
        "repetitions": 5,                        # per figure (1 in a smoke run)
        "synchronous": "...",                    # the SQLite synchronous levels of the parts
        "seconds": {"total": 412.3, "1": 40.2, ...},   # wall time, in all and per part
        "machine": {"sqlite_version", "apsw_version", "python", "cpu_count", "platform",
                    "fdatasync_ms", "tmpdir"}
      },
      "figures": [                               # one per row of the table, in part order
        {"part": "1 transitions", "figure": "ledger NORMAL", "unit": "trans/s",
         "median": 1234.5, "min": 1200.1, "max": 1250.0, "reps": 5,
         "target": "" | ">= 1", "met": null | true | false, "note": "..."}
      ],
      "failures": {"2": "RuntimeError: ..."},    # part -> why it failed; {} when none did
      "problems": ["part 3: ..."],               # figures missing or not finite; [] when none
      "table": "part  figure  median ..."        # the table as printed
    }
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
import traceback
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import apsw

from . import (
    api,
    aux,
    console,
    contention,
    integration,
    layers,
    lifecycles,
    postgres,
    scale,
    serves,
    transitions,
    verify,
)
from .harness import RESULTS, Size, figure_problems, figures_table, machine_facts, say

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
    "10": ("the web console's pages at 100,000 tasks", console.run),
    "11": ("PostgreSQL: 1 and 4 processes, the Merkle integrator beside", integration.run),
    "12": ("PostgreSQL: one `serve` against two, the same HTTP load", serves.run),
}
ROOT = Path(__file__).resolve().parent.parent
MIN_REPS = 5


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sizes = parser.add_mutually_exclusive_group()
    sizes.add_argument("--quick", action="store_true", help="a short run (smaller sizes)")
    sizes.add_argument(
        "--smoke", action="store_true", help="every part at tiny sizes, once: that it runs"
    )
    parser.add_argument("--reps", type=int, default=MIN_REPS, help="repetitions per figure (>= 5)")
    parser.add_argument("--only", default="", help="comma-separated part numbers")
    parser.add_argument("--results", type=Path, default=RESULTS, help="the results folder")
    args = parser.parse_args(argv)
    size: Size = "smoke" if args.smoke else "quick" if args.quick else "full"
    reps = 1 if size == "smoke" else max(MIN_REPS, args.reps)
    chosen = [part for part in args.only.split(",") if part] or list(PARTS)
    unknown = [part for part in chosen if part not in PARTS]
    if unknown:
        parser.error(f"no part {', '.join(unknown)}: the parts are {', '.join(PARTS)}")
    started_at = datetime.now(UTC)
    machine = machine_facts()
    meta: dict[str, Any] = {
        "date": started_at.strftime("%Y-%m-%dT%H:%M:%SZ"),
        "commit": tree_commit(),
        "mode": size,
        "python": machine["python"],
        "repetitions": reps,
        "synchronous": "NORMAL and FULL (part 1, 2); FULL (3, 5); NORMAL (4, 6)",
        "machine": machine,
    }
    say(
        f"SQLite {machine['sqlite_version']} (apsw {machine['apsw_version']}), Python "
        f"{machine['python']}, {machine['cpu_count']} CPUs, fdatasync {machine['fdatasync_ms']} "
        f"ms (median of 4 KiB write+fdatasync in {machine['tmpdir']}), {size} run of "
        f"{meta['commit']}"
    )
    rows: list[dict[str, Any]] = []
    failures: dict[str, str] = {}
    problems: list[str] = []
    timings: dict[str, float] = {}
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="aios-bench-") as scratch:
        for key in chosen:
            title, run = PARTS[key]
            say(f"part {key}: {title} ...")
            part_start = time.perf_counter()
            part_dir = Path(scratch) / f"part{key}"
            part_dir.mkdir()
            try:
                produced = run(part_dir, size=size, reps=reps)
            except Exception as exc:  # one part's failure is reported; the others still run
                failures[key] = f"{type(exc).__name__}: {exc}"[-4000:]
                sys.stderr.write(f"\nPART {key} FAILED ({title}):\n{traceback.format_exc()}\n")
                problems.append(f"part {key} failed, so its figures are missing: {exc!r:.500}")
                produced = []
            else:
                problems += [f"part {key}: {problem}" for problem in figure_problems(produced)]
            rows += produced
            timings[key] = round(time.perf_counter() - part_start, 1)
            say(f"part {key}: {timings[key]} s")
    meta["seconds"] = {"total": round(time.perf_counter() - started, 1), **timings}
    table = figures_table(rows)
    say()
    say(_facts_line(meta))
    say(table)
    payload = {
        "meta": meta,
        "figures": rows,
        "failures": failures,
        "problems": problems,
        "table": table,
    }
    for output in result_files(args.results, started_at, meta["commit"], size):
        output.parent.mkdir(parents=True, exist_ok=True)
        output.write_text(json.dumps(payload, indent=2, sort_keys=True) + "\n")
        say(f"written to {output}")
    if problems:
        say(f"\nTHE {size.upper()} RUN FAILED: {len(problems)} problem(s)")
        for problem in problems:
            say(f"  {problem}")
        return 1
    return 0


def tree_commit() -> str:
    """The commit the measured tree is at, `-dirty` if it has changes not committed (a file
    changed, added or untracked), or "unknown" outside a git checkout."""
    try:
        head = subprocess.run(
            ["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True, text=True, check=True
        ).stdout.strip()
        status = subprocess.run(
            ["git", "status", "--porcelain"], cwd=ROOT, capture_output=True, text=True, check=True
        ).stdout
    except (OSError, subprocess.CalledProcessError):
        return "unknown"
    return f"{head}-dirty" if status.strip() else head


def result_files(folder: Path, started_at: datetime, commit: str, size: Size) -> list[Path]:
    """latest.json, and the run's dated copy."""
    short = commit[:10] if commit != "unknown" else commit
    dirty = "-dirty" if commit.endswith("-dirty") else ""
    mode = "" if size == "full" else f"-{size}"
    dated = f"{started_at:%Y-%m-%d}-{short}{dirty}{mode}.json"
    return [folder / "latest.json", folder / dated]


def _facts_line(meta: dict[str, Any]) -> str:
    machine = meta["machine"]
    return (
        f"SQLite {machine['sqlite_version']} | synchronous: {meta['synchronous']} | "
        f"CPUs: {machine['cpu_count']} | fdatasync: {machine['fdatasync_ms']} ms | "
        f"{meta['repetitions']} interleaved reps, median [min, max] | {meta['mode']} run, "
        f"{meta['seconds']['total']} s | apsw {apsw.apsw_version()} | {meta['commit']}"
    )
