"""`python -m bench`: its results files and their `meta`, a part that cannot run failing the run
(never skipped), and the smoke run's checks of what each figure is."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import httpx
import pytest

from bench.console import FLOOR_PAGE, one_line_page
from bench.harness import figure, figure_problems, summary

ROOT = Path(__file__).resolve().parents[1]


def bench(results: Path, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "bench", "--results", str(results), *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, **env},
    )


def written(results: Path) -> tuple[dict[str, Any], list[Path]]:
    latest = json.loads((results / "latest.json").read_text())
    dated = sorted(path for path in results.iterdir() if path.name != "latest.json")
    return latest, dated


def test_a_smoke_run_writes_latest_and_a_dated_copy_with_its_meta(tmp_path: Path) -> None:
    done = bench(tmp_path, "--smoke", "--only", "6")
    assert done.returncode == 0, done.stdout + done.stderr
    latest, dated = written(tmp_path)
    meta = latest["meta"]
    assert meta["mode"] == "smoke" and meta["repetitions"] == 1
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", meta["date"])
    head = subprocess.run(
        ["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout.strip()
    assert re.fullmatch(rf"{head}(-dirty)?", meta["commit"])
    assert meta["python"] == meta["machine"]["python"] == sys.version.split()[0]
    assert {"sqlite_version", "cpu_count", "platform", "fdatasync_ms"} <= set(meta["machine"])
    assert set(meta["seconds"]) == {"total", "6"}
    assert latest["failures"] == {} and latest["problems"] == []
    assert {row["part"] for row in latest["figures"]} == {"6 verify"}
    assert all(row["reps"] == 1 for row in latest["figures"])
    # The dated copy: the same content, named by the day, the commit and the mode.
    dirty = "-dirty" if meta["commit"].endswith("-dirty") else ""
    assert [path.name for path in dated] == [f"{meta['date'][:10]}-{head[:10]}{dirty}-smoke.json"]
    assert json.loads(dated[0].read_text()) == latest


def test_a_part_that_cannot_run_fails_the_run_loudly_and_is_recorded(tmp_path: Path) -> None:
    unreachable = "postgresql://postgres@127.0.0.1:1/postgres"
    done = bench(tmp_path, "--smoke", "--only", "6,9", AIOS_BENCH_POSTGRES_URL=unreachable)
    assert done.returncode == 1
    assert "PART 9 FAILED" in done.stderr
    assert "THE SMOKE RUN FAILED" in done.stdout
    latest, _ = written(tmp_path)
    assert set(latest["failures"]) == {"9"} and "127.0.0.1" in latest["failures"]["9"]
    assert [problem.split(" failed")[0] for problem in latest["problems"]] == ["part 9"]
    # The parts that ran still report their figures.
    assert {row["part"] for row in latest["figures"]} == {"6 verify"}


def test_an_unknown_part_is_refused_before_anything_runs(tmp_path: Path) -> None:
    done = bench(tmp_path, "--only", "1,99")
    assert done.returncode == 2
    assert "no part 99: the parts are 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12" in done.stderr
    assert not tmp_path.joinpath("latest.json").exists()


def test_figures_that_are_missing_not_finite_or_not_positive_rates_are_problems() -> None:
    fine = figure("1 transitions", "ledger NORMAL", summary([10.0]), "trans/s")
    latency = figure("4 scale", "claim p99", summary([0.0]), "ms")
    assert figure_problems([fine, latency]) == []
    assert figure_problems([]) == ["it produced no figures"]
    not_finite = figure("1 transitions", "raw", summary([float("nan")]), "trans/s")
    assert figure_problems([not_finite]) == [
        "'raw' (trans/s) is not a finite number: [nan, nan, nan]"
    ]
    stalled = figure("3 contention", "4 processes", summary([0.0]), "calls/s")
    assert figure_problems([stalled]) == [
        "'4 processes' (calls/s) is a rate or a ratio but not positive: [0.0, 0.0, 0.0]"
    ]
    ratio = figure("1 transitions", "ledger/raw", summary([float("inf")]), "ratio")
    assert figure_problems([ratio]) == [
        "'ledger/raw' (ratio) is not a finite number: [inf, inf, inf]"
    ]


def test_the_first_paints_floor_is_a_one_line_page_on_the_consoles_site() -> None:
    """Part 10's baseline is served on loopback, 127.0.0.1 as the console is (the same site: a
    navigation between it and a console page stays in one renderer process, as one between two
    console pages does), never cached; a `data:` page was another site, a new process."""
    with one_line_page() as address:
        assert address.startswith("http://127.0.0.1:")
        answer = httpx.get(address)
        assert answer.status_code == 200 and answer.content == FLOOR_PAGE
        assert answer.headers["cache-control"] == "no-store"
    with pytest.raises(httpx.TransportError):  # the floor's server ends with its run
        httpx.get(address, timeout=2.0)
