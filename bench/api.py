"""Part 8: the ledger through its HTTP API (`aios-ledger serve`, group commit, FULL).

Each repetition, interleaved, in fresh processes on fresh files (`bench.api_agents`):

- http: 32 agents (threads, each a `LedgerClient` with its own token) each doing whole
  lifecycles at one call per step (create, claim, heartbeat, submit, verify) through the server;
  lifecycles/s over the wall time of the run, every heartbeat's latency as the agent saw it, and
  the requests per commit from the server's batch-size histogram;
- in-process: the same five calls on one TaskLedger, one after another (the ledger at one call
  per step, no network);
- wake-up: 4 agents long-poll a claim; a task is created; the time from the create's answer to
  the claim's answer.

Targets (issue 18): lifecycles/s through HTTP >= 0.5x in-process, >= 4 requests per commit,
heartbeat p99 <= 20 ms, long-poll wake-up p99 <= 50 ms. The agents and the server share the
machine's cores: where there are two or more, the server is pinned to the first and the agents
to the others (`taskset`, `bench.api_agents`; the figure's note says which), so that on 2 cores
the 32 agents' own Python no longer competes with the server's for one core.
"""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Any

from .harness import (
    Size,
    figure,
    interleaved_values,
    paired_ratio,
    percentile,
    run_worker,
    sized,
    summary,
)

AGENTS = 32
WAITERS = 4


def _round(mode: str, scratch: Path, serial: list[int], *numbers: int) -> dict[str, Any]:
    serial[0] += 1
    path = scratch / f"{mode}-{serial[0]}.db"
    return run_worker("bench.api_agents", mode, str(path), *map(str, numbers))


def run(scratch: Path, *, size: Size, reps: int) -> list[dict[str, Any]]:
    per_agent = sized(size, full=10, quick=4, smoke=1)
    local_count = sized(size, full=300, quick=100, smoke=10)
    samples = sized(size, full=50, quick=20, smoke=3)
    serial = [0]
    outcomes: dict[str, list[dict[str, Any]]] = {"http": [], "local": [], "wakeup": []}

    def measured(mode: str, *numbers: int) -> float:
        outcome = _round(mode, scratch, serial, *numbers)
        outcomes[mode].append(outcome)
        if mode == "wakeup":
            return percentile(outcome["wakeup_ms"], 0.99)
        return float(outcome["lifecycles"] / outcome["seconds"])

    variants = {
        "http": functools.partial(measured, "http", AGENTS, per_agent),
        "local": functools.partial(measured, "local", local_count),
        "wakeup": functools.partial(measured, "wakeup", WAITERS, samples),
    }
    values = interleaved_values(variants, reps)
    ratio = paired_ratio(values["http"], values["local"])
    per_commit = [float(o["requests_per_commit"]) for o in outcomes["http"]]
    beat_p99 = [percentile(o["heartbeat_ms"], 0.99) for o in outcomes["http"]]
    beat_p50 = [percentile(o["heartbeat_ms"], 0.50) for o in outcomes["http"]]
    wake_p50 = [percentile(o["wakeup_ms"], 0.50) for o in outcomes["wakeup"]]
    pinned = all(o.get("pinned") for o in outcomes["http"])
    placement = "server on CPU 0, agents on the rest" if pinned else "server and agents unpinned"
    part = "8 HTTP API"
    return [
        figure(
            part,
            f"{AGENTS} HTTP agents FULL",
            summary(values["http"]),
            "lifecycles/s",
            note=f"{per_agent} lifecycles per agent, 5 calls each; {placement}",
        ),
        figure(
            part,
            "in-process ledger FULL",
            summary(values["local"]),
            "lifecycles/s",
            note=f"{local_count} lifecycles, one call per step",
        ),
        figure(
            part,
            "HTTP agents / in-process",
            ratio,
            "ratio",
            target=">= 0.5",
            met=ratio["median"] >= 0.5,
        ),
        figure(
            part,
            "requests per commit",
            summary(per_commit),
            "requests",
            target=">= 4",
            met=summary(per_commit)["median"] >= 4,
            note="group commit: batch-size histogram of the server",
        ),
        figure(
            part,
            "heartbeat p99 (32 agents)",
            summary(beat_p99),
            "ms",
            target="<= 20",
            met=summary(beat_p99)["median"] <= 20,
            note=f"p50 {summary(beat_p50)['median']:.1f} ms",
        ),
        figure(
            part,
            "long-poll wake-up p99",
            summary(values["wakeup"]),
            "ms",
            target="<= 50",
            met=summary(values["wakeup"])["median"] <= 50,
            note=f"{WAITERS} waiting agents, {samples} tasks; p50 "
            f"{summary(wake_p50)['median']:.1f} ms",
        ),
    ]
