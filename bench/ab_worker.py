"""One measurement of `bench.ab`, in a fresh process, through the public API only.

    python -m bench.ab_worker FIGURE SIZE PATH     # prints one JSON line

The same worker runs against two builds of the ledger (whichever `aios_ledger` its PYTHONPATH
finds first), so it names nothing but what both builds export from `aios_ledger.shell` and
`aios_ledger.core`. Every figure is at synchronous FULL (but one), on a fresh file, timing
only the work:
- `transitions`: part 1's ledger side, each task through create, claim, heartbeat, submit and
  verify, one transaction each (transitions/s);
- `transitions-memory`: the same on an in-memory database, in the process's CPU time: no
  fsync and no other process's share of the machine in it, the ledger's own Python path alone
  (the figure a change of the shell's hot path moves);
- `lifecycles`, `lifecycles-batched`: part 2's ledger sides (`bench.peers`), jobs/s;
  `lifecycles-batched-normal` the batched one at synchronous NORMAL (issue 27's seal target);
- `aux`: part 5's ledger side, spawn and wait of trivial auxiliary runs, runs/s;
- `run-appends`: a worker's evidence, appended to its claimed attempt's run under the claim's
  lease, one small event per transaction (appends/s); `run-appends-normal` the same at
  synchronous NORMAL (no fsync per commit), where what an append computes and writes shows;
- `api-http`: part 8's HTTP round, 32 agents doing whole lifecycles through a real `serve`
  (`bench.api_agents`), lifecycles/s; the server is the build's, as this process's PYTHONPATH
  finds it first.
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


def transitions(
    size: int, path: Path | None, clock: Callable[[], float] = time.perf_counter
) -> float:
    from aios_ledger.shell import TaskLedger

    with TaskLedger(path, synchronous="FULL") as store:
        start = clock()
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
        return size * TRANSITIONS_PER_TASK / (clock() - start)


def transitions_memory(size: int, path: Path) -> float:
    return transitions(size, None, time.process_time)


def lifecycles(size: int, path: Path) -> float:
    outcome = ledger("FULL", size, path)
    return float(outcome["jobs"] / outcome["seconds"])


def lifecycles_batched(size: int, path: Path, synchronous: str = "FULL") -> float:
    outcome = ledger_batched(synchronous, size, path)
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


def run_appends(size: int, path: Path, synchronous: str = "FULL") -> float:
    from aios_ledger.shell import RunStore, TaskLedger

    with TaskLedger(path, synchronous=synchronous) as store:
        store.create_task(TASK_FIELDS, idempotency_key="create-0")
        claim = store.claim(agent_id="agent-1", capabilities=[], lease_seconds=3600)
        assert claim is not None
        run_id, token = f"{claim['task_id']}@{claim['attempt']}", str(claim["lease_token"])
        runs = RunStore(database=store.database)
        start = time.perf_counter()
        for n in range(size):
            runs.append_event(run_id, "stderr", {"line": f"step {n} done"}, lease_token=token)
        return size / (time.perf_counter() - start)


def api_http(size: int, path: Path) -> float:
    from .api import AGENTS
    from .api_agents import _http

    outcome = _http(str(path), AGENTS, size)
    return float(outcome["lifecycles"] / outcome["seconds"])


FIGURES: dict[str, Callable[[int, Path], float]] = {
    "transitions": transitions,
    "transitions-memory": transitions_memory,
    "lifecycles": lifecycles,
    "lifecycles-batched": lifecycles_batched,
    "lifecycles-batched-normal": lambda size, path: lifecycles_batched(size, path, "NORMAL"),
    "aux": aux,
    "run-appends": run_appends,
    "run-appends-normal": lambda size, path: run_appends(size, path, "NORMAL"),
    "api-http": api_http,
}
UNITS = {
    "transitions": "trans/s",
    "transitions-memory": "trans/CPU s",
    "lifecycles": "jobs/s",
    "lifecycles-batched": "jobs/s",
    "lifecycles-batched-normal": "jobs/s",
    "aux": "runs/s",
    "run-appends": "appends/s",
    "run-appends-normal": "appends/s",
    "api-http": "lifecycles/s",
}


def main(argv: list[str]) -> int:
    import aios_ledger.core

    name, size, path = argv[0], int(argv[1]), Path(argv[2])
    value = FIGURES[name](size, path)
    print(json.dumps({"value": value, "core": aios_ledger.core.__file__}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
