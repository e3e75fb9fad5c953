"""The queue benchmark's cells as one Markdown table, the page docs/benchmark-results.md quotes.

    python -m bench.queue_harness.report bench/results/queue-harness/DATE > .../README.md

Each cell folder holds the harness's combined `summary.json` (both adapters) and one
`jobs-<adapter>.json` (count_jobs.py: the rows left once the cell ended, its exit code). The
criteria are the harness's own (its README's sweep table): a chaos cell passes when completions
come back to 90% of the baseline's within the recovery phase (`chaos_recovery_time_s` set); a
pressure cell passes when the run ends on its own before its time limit.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

CHAOS = (
    "chaos_crash_recovery",
    "chaos_repeated_kills",
    "chaos_pg_backend_kill",
    "chaos_pool_exhaustion",
    "chaos_postgres_restart",
)
PRESSURE = (
    "idle_in_tx_saturation",
    "sustained_high_load",
    "active_readers",
    "event_delivery_burst",
)
CELLS = ("baseline", *CHAOS, *PRESSURE)
ADAPTERS = ("aios-ledger", "procrastinate")
# The phase whose figures a cell's row shows: the saturated one for the baseline, the stress
# phase for a pressure cell, the recovery phase (where the chaos aggregates are) for chaos.
STRESS_PHASE = {
    "idle_in_tx_saturation": "idle_1",
    "sustained_high_load": "pressure_1",
    "active_readers": "readers_1",
    "event_delivery_burst": "pressure_1",
}


def number(value: Any, digits: int = 0) -> str:
    return "—" if value is None else f"{float(value):,.{digits}f}"


def load(path: Path) -> dict[str, Any]:
    return json.loads(path.read_text()) if path.exists() else {}


def row(cell: str, adapter: str, phases: dict[str, Any], jobs: dict[str, Any]) -> dict[str, Any]:
    """One adapter's figures in one cell, and whether it met the cell's criterion."""
    phase: dict[str, Any]
    criterion: bool | None
    if cell == "baseline":
        phase = phases.get("clean", {})
        criterion = None
    elif cell in CHAOS:
        phase = next((p for p in phases.values() if "jobs_lost" in p), {})
        recovered = phase.get("chaos_recovery_time_s")
        criterion = recovered is not None
    else:
        phase = phases.get(STRESS_PHASE[cell], {})
        criterion = jobs.get("exit_code") == 0
    completion = phase.get("metrics", {}).get("completion_rate", {})
    states = jobs.get("jobs_by_state", {})
    return {
        "cell": cell,
        "adapter": adapter,
        "throughput": phase.get("median_throughput_per_s"),
        "peak": completion.get("peak"),
        "claim_p99": phase.get("median_claim_p99_ms"),
        "harness_lost": phase.get("jobs_lost"),
        "recovery_s": phase.get("chaos_recovery_time_s"),
        "rows": jobs.get("jobs_total"),
        "unfinished": jobs.get("jobs_unfinished"),
        "failed": sum(n for state, n in states.items() if state.upper() == "FAILED"),
        "twice": jobs.get("jobs_completed_twice"),
        "exit_code": jobs.get("exit_code"),
        "criterion": criterion,
    }


def rows(folder: Path) -> list[dict[str, Any]]:
    found = []
    for cell in CELLS:
        summary = load(folder / cell / "summary.json")
        for adapter in ADAPTERS:
            jobs = load(folder / cell / f"jobs-{adapter}.json")
            phases = summary.get("systems", {}).get(adapter, {}).get("phases", {})
            if jobs or phases:
                found.append(row(cell, adapter, phases, jobs))
    return found


def verdict(entry: dict[str, Any]) -> str:
    if entry["criterion"] is None:
        return "—"
    if entry["cell"] in CHAOS:
        if entry["criterion"]:
            return f"recovered in {number(entry['recovery_s'])} s"
        return "no recovery"
    if entry["criterion"]:
        return "completed"
    return "timed out" if entry["exit_code"] == 137 else f"exit {entry['exit_code']}"


def markdown(found: list[dict[str, Any]]) -> str:
    lines = [
        "| Scenario | Adapter | Throughput (jobs/s, median / peak) | Claim p99 (ms, median)"
        " | Jobs lost (harness estimate) | Jobs left unfinished / failed (rows) | Criterion |",
        "|---|---|---:|---:|---:|---:|---|",
    ]
    for entry in found:
        lines.append(
            f"| {entry['cell']} | {entry['adapter']} | {number(entry['throughput'])} /"
            f" {number(entry['peak'])} | {number(entry['claim_p99'])}"
            f" | {number(entry['harness_lost'])} | {number(entry['unfinished'])} /"
            f" {number(entry['failed'])} | {verdict(entry)} |"
        )
    lines.append("")
    for adapter in ADAPTERS:
        mine = [e for e in found if e["adapter"] == adapter]
        chaos = [e for e in mine if e["cell"] in CHAOS]
        pressure = [e for e in mine if e["cell"] in PRESSURE]
        twice = sum(e["twice"] or 0 for e in mine)
        lines.append(
            f"- {adapter}: chaos recovery {sum(bool(e['criterion']) for e in chaos)}/{len(chaos)},"
            f" pressure cells {sum(bool(e['criterion']) for e in pressure)}/{len(pressure)},"
            f" failed jobs {sum(e['failed'] for e in mine)}"
            + (f", tasks completed twice {twice}" if adapter == "aios-ledger" else "")
        )
    return "\n".join(lines) + "\n"


def main(argv: list[str]) -> int:
    sys.stdout.write(markdown(rows(Path(argv[1]))))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv))
