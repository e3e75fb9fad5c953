"""One measurement of `bench.ab`, in a fresh process, through the public API only.

    python -m bench.ab_worker FIGURE SIZE PATH     # prints one JSON line

The same worker runs against two builds of the ledger (whichever `aios_ledger` its PYTHONPATH
finds first), so it names nothing but what both builds export from `aios_ledger.shell` and
`aios_ledger.core`. Every figure is at synchronous FULL, on a fresh file, timing only the work:
- `transitions`: part 1's ledger side, each task through create, claim, heartbeat, submit and
  verify, one transaction each (transitions/s);
- `lifecycles`, `lifecycles-batched`: part 2's ledger sides (`bench.peers`), jobs/s;
- `aux`: part 5's ledger side, spawn and wait of trivial auxiliary runs, runs/s.
"""

from __future__ import annotations

import asyncio
import json
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from .peers import ledger, ledger_batched

TASK_FIELDS = {"goal": "g", "instructions": "do it", "success_criteria": ["ok"]}
TRANSITIONS_PER_TASK = 5


def transitions(size: int, path: Path) -> float:
    from aios_ledger.shell import TaskLedger

    with TaskLedger(path, synchronous="FULL") as store:
        start = time.perf_counter()
        for n in range(size):
            store.create_task(TASK_FIELDS, idempotency_key=f"create-{n}")
            claim = store.claim(agent_id="agent-1", capabilities=[], lease_seconds=60)
            assert claim is not None
            task_id, token = claim["task_id"], claim["lease_token"]
            store.heartbeat(task_id, lease_token=token, lease_seconds=60)
            store.submit_result(
                task_id, lease_token=token, result={"summary": "done"}, idempotency_key=f"s-{n}"
            )
            store.verify(task_id, decision="SUCCEEDED", reason="fine", idempotency_key=f"v-{n}")
        return size * TRANSITIONS_PER_TASK / (time.perf_counter() - start)


def lifecycles(size: int, path: Path) -> float:
    outcome = ledger("FULL", size, path)
    return float(outcome["jobs"] / outcome["seconds"])


def lifecycles_batched(size: int, path: Path) -> float:
    outcome = ledger_batched("FULL", size, path)
    return float(outcome["jobs"] / outcome["seconds"])


def aux(size: int, path: Path) -> float:
    from aios_ledger.core.auxiliary import AuxiliaryRunSpec, ExecutionFrame
    from aios_ledger.core.runs import EvidenceReadRequest, ExecutionTarget
    from aios_ledger.shell import AuxiliaryRunService, RunEvidenceReader, RunStore

    with RunStore(path) as runs:
        created = runs.create_run("session-bench", "prompt", run_id="run-bench")
        evidence = RunEvidenceReader(runs).read(
            EvidenceReadRequest(ExecutionTarget("session-bench", created.run_id))
        )

    class Trivial:
        async def execute(self, context: Any) -> Any:
            return {"ok": True}

    async def scenario() -> float:
        service = AuxiliaryRunService(Trivial(), path, synchronous="FULL")
        try:
            start = time.perf_counter()
            for n in range(size):
                spec = AuxiliaryRunSpec(
                    ExecutionFrame.root(evidence.target),
                    "bench",
                    "inspect bounded evidence",
                    evidence.snapshot_digest,
                ).with_id(f"aux-{n}")
                handle = await service.spawn(spec, evidence)
                await handle.wait()
            return size / (time.perf_counter() - start)
        finally:
            await service.aclose()

    return asyncio.run(scenario())


FIGURES: dict[str, Callable[[int, Path], float]] = {
    "transitions": transitions,
    "lifecycles": lifecycles,
    "lifecycles-batched": lifecycles_batched,
    "aux": aux,
}
UNITS = {
    "transitions": "trans/s",
    "lifecycles": "jobs/s",
    "lifecycles-batched": "jobs/s",
    "aux": "runs/s",
}


def main(argv: list[str]) -> int:
    import aios_ledger.core

    name, size, path = argv[0], int(argv[1]), Path(argv[2])
    value = FIGURES[name](size, path)
    print(json.dumps({"value": value, "core": aios_ledger.core.__file__}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
