"""Part 5: auxiliary runs, spawn and wait, against the raw transaction limit (FULL).

A run needs three guarded transitions (PENDING with its spawn event, RUNNING, COMPLETED), so
its limit is the raw apsw transaction rate (part 1's transaction shape, same file settings,
measured interleaved with the runs) divided by three. The executor returns a constant; every
run is spawned, driven and awaited one after the other on one `AuxiliaryRunService`.
"""

from __future__ import annotations

import asyncio
import functools
import itertools
import time
from pathlib import Path
from typing import Any

from aios_ledger.core.auxiliary import AuxiliaryRunSpec, ExecutionFrame
from aios_ledger.core.runs import EvidenceReadRequest, EvidenceSnapshot, ExecutionTarget
from aios_ledger.shell.auxiliary.service import AuxiliaryRunContext, AuxiliaryRunService
from aios_ledger.shell.runs.store import RunEvidenceReader, RunStore

from .harness import Size, figure, interleaved_values, paired_ratio, sized, summary
from .transitions import TRANSITIONS_PER_TASK, RawLoop, transitions_per_second

TRANSITIONS_PER_RUN = 3


class Trivial:
    async def execute(self, context: AuxiliaryRunContext) -> Any:
        return {"ok": True}


def _evidence(path: Path) -> EvidenceSnapshot:
    with RunStore(path) as runs:
        created = runs.create_run("session-bench", "prompt", run_id="run-bench")
        return RunEvidenceReader(runs).read(
            EvidenceReadRequest(ExecutionTarget("session-bench", created.run_id))
        )


class AuxLoop:
    def __init__(self, path: Path) -> None:
        self.path = path
        self.evidence = _evidence(path)
        self.serial = itertools.count()

    def runs_per_second(self, runs: int) -> float:
        async def scenario() -> float:
            service = AuxiliaryRunService(Trivial(), self.path, synchronous="FULL")
            try:
                start = time.perf_counter()
                for _ in range(runs):
                    spec = AuxiliaryRunSpec(
                        ExecutionFrame.root(self.evidence.target),
                        "bench",
                        "inspect bounded evidence",
                        self.evidence.snapshot_digest,
                    ).with_id(f"aux-{next(self.serial)}")
                    handle = await service.spawn(spec, self.evidence)
                    await handle.wait()
                return runs / (time.perf_counter() - start)
            finally:
                await service.aclose()

        return asyncio.run(scenario())


def run(scratch: Path, *, size: Size, reps: int) -> list[dict[str, Any]]:
    runs = sized(size, full=500, quick=150, smoke=10)
    aux = AuxLoop(scratch / "aux.db")
    raw = RawLoop(scratch / "aux-raw.db", "FULL")
    raw_tasks = max(1, runs * TRANSITIONS_PER_RUN // TRANSITIONS_PER_TASK)
    try:
        values = interleaved_values(
            {
                "aux": functools.partial(aux.runs_per_second, runs),
                "raw": functools.partial(transitions_per_second, raw, raw_tasks),
            },
            reps,
            warmup=True,
        )
    finally:
        raw.close()
    limit = [value / TRANSITIONS_PER_RUN for value in values["raw"]]
    ratio = paired_ratio(values["aux"], limit)
    return [
        figure(
            "5 aux runs",
            "spawn+wait FULL",
            summary(values["aux"]),
            "runs/s",
            note=f"{runs} runs per repetition",
        ),
        figure("5 aux runs", "raw limit (raw tx/s / 3)", summary(limit), "runs/s"),
        figure(
            "5 aux runs",
            "aux / raw limit",
            ratio,
            "ratio",
            target=">= 0.5",
            met=ratio["median"] >= 0.5,
        ),
    ]
