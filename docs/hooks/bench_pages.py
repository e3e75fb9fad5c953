"""MkDocs hook: the benchmark-results page, rendered from the newest `bench/results/*.json`.

`make bench` writes one JSON file per run: `figures` (rows of `bench/harness.py`'s `figure`:
part, figure, unit, median, min, max, reps, target, met, note), `machine` (the harness's facts)
and, from the run that records them, `meta` (date, commit, machine, mode, python). The page
`docs/benchmark-results.md` holds `MARKER`; this hook puts the newest run's table and a bar
chart of its ratios there. Result files are not committed, so a tree without one gets a page
that says how to make one rather than a failed build.
"""

from __future__ import annotations

import html
import json
import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

MARKER = "<!-- bench-results -->"
NO_RESULTS = "No benchmark results in this tree; run `make bench` (or `make bench-quick`)."

# The chart's geometry, in SVG user units.
LABEL_WIDTH = 330
BAR_AREA = 360
VALUE_WIDTH = 150
ROW_HEIGHT = 22
COLOURS = {True: "#2e7d32", False: "#c62828", None: "#546e7a"}


def on_page_markdown(markdown: str, page: Any, config: Mapping[str, Any], files: Any) -> str:
    """MkDocs' hook: replace the marker, on the one page that holds it."""
    if MARKER not in markdown:
        return markdown
    root = Path(str(config["config_file_path"])).resolve().parent
    return markdown.replace(MARKER, render_results(root / "bench" / "results"))


def render_results(results_dir: Path) -> str:
    """The page's body: the newest run in `results_dir`, or the sentence saying there is none."""
    newest = newest_result(results_dir)
    if newest is None:
        return NO_RESULTS + "\n"
    payload = json.loads(newest.read_text())
    return render_run(payload, newest.name)


def newest_result(results_dir: Path) -> Path | None:
    """The result file of the latest run: by the date it records, else by modification time."""
    candidates = sorted(results_dir.glob("*.json")) if results_dir.is_dir() else []
    if not candidates:
        return None

    def recorded_at(path: Path) -> tuple[str, float]:
        try:
            date = str(json.loads(path.read_text()).get("meta", {}).get("date") or "")
        except (OSError, ValueError, AttributeError):
            date = ""
        return (date, path.stat().st_mtime)

    return max(candidates, key=recorded_at)


def render_run(payload: Mapping[str, Any], source: str) -> str:
    meta: Mapping[str, Any] = payload.get("meta") or {}
    machine: Mapping[str, Any] = meta.get("machine") or payload.get("machine") or {}
    rows: Sequence[Mapping[str, Any]] = payload.get("figures") or []
    facts = [
        ("date", meta.get("date") or "not recorded"),
        ("commit", meta.get("commit") or "not recorded"),
        ("mode", meta.get("mode") or machine.get("mode") or "not recorded"),
        ("python", meta.get("python") or machine.get("python") or "not recorded"),
        ("source", f"`bench/results/{source}`"),
    ]
    lines = ["## The run", "", "| fact | value |", "| --- | --- |"]
    lines += [f"| {name} | {cell(value)} |" for name, value in facts]
    lines += ["", "## The machine", "", "| fact | value |", "| --- | --- |"]
    lines += [f"| {name} | {cell(value)} |" for name, value in sorted(machine.items())]
    lines += ["", "## Ratios against their targets", ""]
    ratios = [row for row in rows if row.get("unit") == "ratio"]
    if ratios:
        lines += [
            "Each bar is a ratio's median, the thin line its min to max over the repetitions; "
            "green: target met, red: missed, grey: no target.",
            "",
            bar_chart_svg(ratios),
        ]
    else:
        lines.append("This run has no ratio figures.")
    lines += ["", "## Every figure", ""]
    lines += [
        "| part | figure | median | min | max | unit | n | target | |",
        "| --- | --- | ---: | ---: | ---: | --- | ---: | --- | --- |",
    ]
    lines += [
        "| {} | {} | {} | {} | {} | {} | {} | {} | {} |".format(
            cell(row.get("part")),
            cell(row.get("figure")),
            number(row.get("median")),
            number(row.get("min")),
            number(row.get("max")),
            cell(row.get("unit")),
            cell(row.get("reps")),
            cell(row.get("target")),
            verdict(row.get("met")),
        )
        for row in rows
    ]
    if not rows:
        lines.append("| | this run recorded no figures | | | | | | | |")
    return "\n".join(lines) + "\n"


def bar_chart_svg(rows: Sequence[Mapping[str, Any]]) -> str:
    """A horizontal bar chart of `rows` on one linear scale from 0, as one inline SVG block
    (wrapped in a `div`, which Markdown passes through untouched)."""
    values = [float(row.get(key) or 0) for row in rows for key in ("median", "max")]
    finite = [value for value in values if math.isfinite(value)]
    scale_max = max([*finite, 1e-9])
    height = ROW_HEIGHT * len(rows) + 10
    width = LABEL_WIDTH + BAR_AREA + VALUE_WIDTH
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {width} {height}" '
        f'width="100%" role="img" aria-label="ratios of the benchmark run" '
        f'font-family="sans-serif" font-size="11">'
    ]
    for index, row in enumerate(rows):
        top = 5 + index * ROW_HEIGHT
        middle = top + ROW_HEIGHT / 2
        median = bounded(row.get("median"), scale_max)
        low = bounded(row.get("min"), scale_max)
        high = bounded(row.get("max"), scale_max)
        label = html.escape(f"{row.get('part', '')}: {row.get('figure', '')}")
        colour = COLOURS.get(row.get("met"), COLOURS[None])
        parts += [
            f'<text x="{LABEL_WIDTH - 6}" y="{middle + 4:.1f}" text-anchor="end">{label}</text>',
            f'<rect x="{LABEL_WIDTH}" y="{top + 4}" width="{BAR_AREA * median / scale_max:.1f}" '
            f'height="{ROW_HEIGHT - 8}" fill="{colour}"/>',
            f'<line x1="{LABEL_WIDTH + BAR_AREA * low / scale_max:.1f}" y1="{middle:.1f}" '
            f'x2="{LABEL_WIDTH + BAR_AREA * high / scale_max:.1f}" y2="{middle:.1f}" '
            'stroke="#212121" stroke-width="1.5"/>',
            f'<text x="{LABEL_WIDTH + BAR_AREA + 6}" y="{middle + 4:.1f}">'
            f"{html.escape(number(row.get('median')))} {html.escape(str(row.get('target') or ''))}"
            "</text>",
        ]
    parts.append("</svg>")
    return '<div class="bench-chart">' + "".join(parts) + "</div>"


def verdict(met: object) -> str:
    """The table's last column, as `bench/harness.py` prints it."""
    return "met" if met is True else "MISSED" if met is False else ""


def bounded(value: object, scale_max: float) -> float:
    """A value placed on the chart: missing or infinite values at the edges, never outside."""
    number_value = float(value) if isinstance(value, int | float) else 0.0
    if math.isnan(number_value):
        return 0.0
    return min(max(number_value, 0.0), scale_max)


def number(value: object) -> str:
    """A figure as `bench/harness.py` prints it: thousands separated, three significant-ish."""
    if not isinstance(value, int | float) or isinstance(value, bool):
        return cell(value)
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


def cell(value: object) -> str:
    """Text safe inside a Markdown table cell."""
    text = "" if value is None else str(value)
    return html.escape(text).replace("|", "\\|").replace("\n", " ")
