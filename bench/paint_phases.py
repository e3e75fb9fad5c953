"""Where the console's first paint goes: part 10's ledger and browser, each navigation split
into the phases the Navigation Timing and Resource Timing entries give.

    .venv/bin/python -m bench.paint_phases               # 100,000 tasks, 7 rounds
    .venv/bin/python -m bench.paint_phases --tasks 20000 --reps 9

For the one-line page (the floor), the Tasks page and a task's page, each reached two ways
(from the one-line page on loopback, the console's own site, as part 10 measures; and from a
`data:` page, another site, so a new renderer process), the median over the rounds of: the
response's first byte (`responseStart`) and last (`responseEnd`), the stylesheet ready
(its `responseEnd`; its bytes on the wire: 0 from the cache, ~300 a revalidation's 304), the
document parsed (`domInteractive`) and the first contentful paint, all in ms from the
navigation's start. The rounds alternate which way goes first. Not a part of `python -m bench`:
a profile, printed, never written to `bench/results/`.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
from pathlib import Path
from typing import Any

from .console import FIRST_PAINT, Served, build, one_line_page, signed_in_page
from .harness import format_table, say

DATA_PAGE = "data:text/html,<!doctype html><title>t</title><p>paint</p>"
PHASES = """() => {
  const navigation = performance.getEntriesByType("navigation")[0];
  const sheet = performance.getEntriesByType("resource").find((r) => r.name.includes(".css"));
  return {
    first_byte: navigation.responseStart,
    last_byte: navigation.responseEnd,
    stylesheet: sheet ? sheet.responseEnd : null,
    stylesheet_bytes: sheet ? sheet.transferSize : null,
    parsed: navigation.domInteractive,
  };
}"""
COLUMNS = ("first_byte", "last_byte", "stylesheet", "stylesheet_bytes", "parsed", "paint")


def measured(page: Any, address: str) -> dict[str, float | None]:
    page.goto(address)
    paint = float(page.evaluate(FIRST_PAINT))
    return {**page.evaluate(PHASES), "paint": paint}


def profile(tasks: int, reps: int, scratch: Path) -> list[tuple[str, str, dict[str, float]]]:
    """(way, page, column -> median) for every page reached either way."""
    from playwright.sync_api import sync_playwright

    token, task_id = build(scratch / "console.db", tasks)
    server = Served(scratch / "console.db")
    samples: dict[tuple[str, str], list[dict[str, float | None]]] = {}
    try:
        with (
            one_line_page() as floor,
            sync_playwright() as playwright,
            signed_in_page(playwright, server.url, token) as page,
        ):
            ways = {"same site": floor, "from data:": DATA_PAGE}
            pages = {"/tasks": "/tasks", "/tasks/{id}": f"/tasks/{task_id}"}
            for round_number in range(reps + 1):  # the first round untimed
                order = list(ways.items())
                for way, start in order if round_number % 2 else order[::-1]:
                    floor_sample = measured(page, start)
                    timed = [("one-line page", floor_sample)] + [
                        (name, measured(page, f"{server.url}{path}"))
                        for name, path in pages.items()
                    ]
                    if round_number:
                        for name, sample in timed:
                            samples.setdefault((way, name), []).append(sample)
    finally:
        server.stop()
    return [(way, name, medians(runs)) for (way, name), runs in samples.items()]


def medians(runs: list[dict[str, float | None]]) -> dict[str, float]:
    found: dict[str, float] = {}
    for column in COLUMNS:
        values = [float(value) for run in runs if (value := run[column]) is not None]
        if values:
            found[column] = statistics.median(values)
    return found


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", type=int, default=100_000, help="tasks in the ledger")
    parser.add_argument("--reps", type=int, default=7, help="timed rounds")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="aios-paint-") as scratch:
        rows = profile(args.tasks, args.reps, Path(scratch))
    cells = [
        (way, name, *(f"{found[c]:.0f}" if c in found else "-" for c in COLUMNS))
        for way, name, found in rows
    ]
    say(f"{args.tasks:,} tasks, median of {args.reps} rounds, ms from the navigation's start")
    say(format_table(cells, ("reached", "page", *COLUMNS)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
