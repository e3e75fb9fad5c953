"""Shared benchmark machinery: interleaved repetitions, medians, the machine's facts, output.

A figure is the median of at least five repetitions, with min and max; the variants of one
comparison are interleaved (A B A B ...) so that a noisy neighbour hurts both alike, and every
ratio compares numbers measured in the same run.
"""

from __future__ import annotations

import json
import math
import os
import platform
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, Literal, TypeVar

import apsw
import httpx
from aios_ledger.core.statements import Statement

RESULTS = Path(__file__).resolve().parent / "results"
# How big a run is: `full` (the published figures), `quick` (smaller sizes), `smoke` (tiny
# sizes, one repetition: that every part still runs and produces its figures, not their values).
Size = Literal["full", "quick", "smoke"]
_T = TypeVar("_T")
# The writes a plan can name, by name: what each declares it binds.
_REGISTRY = {member.value: member for member in Statement}


def fdatasync_latency_ms(samples: int = 50) -> float:
    """Median time of one 4 KiB write + fdatasync in the temp dir the benchmarks use."""
    timings = []
    with tempfile.NamedTemporaryFile(dir=tempfile.gettempdir()) as handle:
        block = b"\0" * 4096
        for _ in range(samples):
            start = time.perf_counter()
            os.pwrite(handle.fileno(), block, 0)
            os.fdatasync(handle.fileno())
            timings.append(time.perf_counter() - start)
    return statistics.median(timings) * 1000


def machine_facts() -> dict[str, Any]:
    return {
        "sqlite_version": apsw.sqlite_lib_version(),
        "apsw_version": apsw.apsw_version(),
        "python": platform.python_version(),
        "cpu_count": os.cpu_count(),
        "platform": platform.platform(),
        "fdatasync_ms": round(fdatasync_latency_ms(), 3),
        "tmpdir": tempfile.gettempdir(),
    }


def sized(size: Size, *, full: _T, quick: _T, smoke: _T) -> _T:
    """The figure's size (a count, depths, a mapping of them) for a run of `size`."""
    return {"full": full, "quick": quick, "smoke": smoke}[size]


def summary(values: Sequence[float]) -> dict[str, float]:
    return {
        "median": statistics.median(values),
        "min": min(values),
        "max": max(values),
        "reps": len(values),
    }


def interleaved_values(
    variants: Mapping[str, Callable[[], float]], repetitions: int, *, warmup: bool = False
) -> dict[str, list[float]]:
    """Run each variant once per round, rounds in turn; each call returns one measurement.

    `warmup`: one unrecorded round first (caches, statement preparation, imports)."""
    measured: dict[str, list[float]] = {name: [] for name in variants}
    if warmup:
        for run in variants.values():
            run()
    for _ in range(repetitions):
        for name, run in variants.items():
            measured[name].append(run())
    return measured


def paired_ratio(numerators: Sequence[float], denominators: Sequence[float]) -> dict[str, float]:
    """Round-by-round ratios of two interleaved variants, summarised like any figure."""
    return summary([a / b for a, b in zip(numerators, denominators, strict=True) if b])


def recorded(
    produce: Callable[[], dict[str, Any]],
    outcomes: list[dict[str, Any]],
    value: Callable[[dict[str, Any]], float],
) -> Callable[[], float]:
    """A measurement for `interleaved_values` that also keeps each repetition's whole outcome
    (latencies, counts) in `outcomes`, for the figures derived from it."""

    def measure() -> float:
        outcome = produce()
        outcomes.append(outcome)
        return value(outcome)

    return measure


def run_worker(module: str, *args: str) -> dict[str, Any]:
    """`python -m <module> <args>` from the project root, in a fresh process; its answer is the
    JSON object on the last line it prints."""
    done = subprocess.run(
        [sys.executable, "-m", module, *args],
        capture_output=True,
        text=True,
        check=False,
        cwd=Path(__file__).resolve().parent.parent,
    )
    if done.returncode != 0:
        raise RuntimeError(f"{module} {args} failed:\n{done.stderr[-2000:]}")
    lines = done.stdout.strip().splitlines()
    return dict(json.loads(lines[-1])) if lines else {}


def check_parameters(name: str, params: Mapping[str, object]) -> None:
    """A raw baseline's write binds exactly the parameters the ledger's statement registry
    declares for `name`; anything else means the baseline has drifted from the ledger."""
    declared = _REGISTRY[name].parameters
    bound = set(params)
    if bound != declared:
        raise RuntimeError(
            f"the raw baseline's {name} drifted from core/statements.py: it lacks "
            f"{sorted(declared - bound)} and binds {sorted(bound - declared)} besides; "
            "bind what the registry declares"
        )


def percentile(values: Sequence[float], fraction: float) -> float:
    """Nearest-rank percentile (fraction in 0..1) of a non-empty sample."""
    ordered = sorted(values)
    rank = max(0, min(len(ordered) - 1, round(fraction * len(ordered) + 0.5) - 1))
    return ordered[rank]


def figure(
    part: str,
    name: str,
    values: Mapping[str, float],
    unit: str,
    *,
    target: str = "",
    met: bool | None = None,
    note: str = "",
) -> dict[str, Any]:
    """One row of the table: a summary (median, min, max, reps) and, if any, its target."""
    return {
        "part": part,
        "figure": name,
        "unit": unit,
        "median": values["median"],
        "min": values["min"],
        "max": values["max"],
        "reps": int(values["reps"]),
        "target": target,
        "met": met,
        "note": note,
    }


def figure_problems(rows: Sequence[Mapping[str, Any]]) -> list[str]:
    """What is wrong with a part's figures, if anything: none at all, or one whose median, min
    or max is not a finite number (a rate or a ratio must also be positive), or measured by no
    repetition. About what was produced, never about how good it is."""
    if not rows:
        return ["it produced no figures"]
    problems = []
    for row in rows:
        name = f"{row.get('figure')!r} ({row.get('unit')})"
        found = [row.get(key) for key in ("median", "min", "max")]
        values = [float(value) for value in found if isinstance(value, int | float)]
        if len(values) != len(found) or not all(math.isfinite(value) for value in values):
            problems.append(f"{name} is not a finite number: {found}")
        elif _positive(str(row.get("unit"))) and not all(value > 0 for value in values):
            problems.append(f"{name} is a rate or a ratio but not positive: {found}")
        if not isinstance(row.get("reps"), int) or row["reps"] < 1:
            problems.append(f"{name} was measured by no repetition")
    return problems


def _positive(unit: str) -> bool:
    return unit == "ratio" or unit.endswith("/s")


def number(value: float) -> str:
    if not math.isfinite(value):
        return str(value)
    magnitude = abs(value)
    if magnitude >= 1000:
        return f"{value:,.0f}"
    if magnitude >= 10:
        return f"{value:.1f}"
    if magnitude >= 1:
        return f"{value:.2f}"
    return f"{value:.3f}"


def figures_table(rows: Sequence[Mapping[str, Any]]) -> str:
    header = ("part", "figure", "median", "min", "max", "unit", "n", "target", "")
    cells = [
        (
            str(row["part"]),
            str(row["figure"]),
            number(row["median"]),
            number(row["min"]),
            number(row["max"]),
            str(row["unit"]),
            str(row["reps"]),
            str(row["target"]),
            {True: "met", False: "MISSED", None: ""}[row["met"]],
        )
        for row in rows
    ]
    return format_table(cells, header)


def rate(operations: int, seconds: float) -> float:
    return operations / seconds if seconds > 0 else float("inf")


def format_table(rows: Sequence[Sequence[str]], header: Sequence[str]) -> str:
    widths = [max(len(str(cell)) for cell in column) for column in zip(header, *rows, strict=False)]
    lines = ["  ".join(h.ljust(w) for h, w in zip(header, widths, strict=True))]
    lines.append("  ".join("-" * w for w in widths))
    lines += ["  ".join(str(c).ljust(w) for c, w in zip(row, widths, strict=True)) for row in rows]
    return "\n".join(lines)


def say(text: str = "") -> None:
    sys.stdout.write(text + "\n")
    sys.stdout.flush()


START_PATIENCE = 60.0  # seconds; a bound on waiting for a server, never a figure


def free_port() -> int:
    """A loopback port no one listens on now."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def wait_healthy(
    url: str, process: subprocess.Popen[Any], why: Callable[[], str] = lambda: ""
) -> None:
    """Until the server at `url` answers its health check; RuntimeError (with `why()`) once
    `process` has ended or START_PATIENCE has passed."""
    deadline = time.monotonic() + START_PATIENCE
    while True:
        try:
            if httpx.get(f"{url}/v1/health", timeout=1.0).status_code == 200:
                return
        except httpx.TransportError:
            pass
        if time.monotonic() > deadline or process.poll() is not None:
            raise RuntimeError(f"the server did not start{why()}")
        time.sleep(0.05)
