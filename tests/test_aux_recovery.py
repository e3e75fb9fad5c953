"""Auxiliary runs across processes: restart recovery and a second process reading the result."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest
from aios_ledger.core import AuxiliaryRunError, JsonValue
from aios_ledger.core.auxiliary import AuxiliaryRunSpec, AuxiliaryRunState, ExecutionFrame
from aios_ledger.core.runs import EvidenceReadRequest, EvidenceSnapshot, ExecutionTarget
from aios_ledger.shell.auxiliary.service import (
    AuxiliaryRunContext,
    AuxiliaryRunService,
    owner_is_dead,
)
from aios_ledger.shell.runs.store import RunEvidenceReader, RunStore

# Seconds a test waits for a run or a token before it fails instead of hanging: a bound on
# the wait, never an assertion on how long the run took.
PATIENCE = 60.0

PRELUDE = """
import asyncio, json, sys
from aios_ledger.core import *
from aios_ledger.core.auxiliary import *
from aios_ledger.core.runs import *
from aios_ledger.shell import *
path = sys.argv[1]
runs = RunStore(path)
evidence = RunEvidenceReader(runs).read(EvidenceReadRequest(ExecutionTarget("s-1", "r-1")))
"""


def _evidence(path: Path) -> EvidenceSnapshot:
    with RunStore(path) as runs:
        runs.create_run("s-1", "prompt", run_id="r-1")
        runs.append_event("r-1", "note", {"text": "something happened"})
        return RunEvidenceReader(runs).read(EvidenceReadRequest(ExecutionTarget("s-1", "r-1")))


def _spec(evidence: EvidenceSnapshot, aux_id: str) -> AuxiliaryRunSpec:
    return AuxiliaryRunSpec(
        ExecutionFrame.root(evidence.target), "reviewer", "review", evidence.snapshot_digest
    ).with_id(aux_id)


class Blocking:
    async def execute(self, context: AuxiliaryRunContext) -> JsonValue:
        await context.cancellation.cancelled()
        raise AuxiliaryRunError("CANCELLED", "stopped")


class Answer:
    async def execute(self, context: AuxiliaryRunContext) -> JsonValue:
        return {"verdict": "fine", "events": len(context.evidence.events)}


async def running(service: AuxiliaryRunService, aux_id: str) -> None:
    """Until the run's own task has recorded it RUNNING, polling (a bound on the wait only)."""

    async def poll() -> None:
        while (await service.get(aux_id)).state != AuxiliaryRunState.RUNNING:
            await asyncio.sleep(0.01)

    await asyncio.wait_for(poll(), timeout=PATIENCE)


def _python(code: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code), *args],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def test_runs_left_running_by_a_closed_service_are_failed_as_interrupted(tmp_path: Path) -> None:
    path = tmp_path / "ledger.db"
    evidence = _evidence(path)

    async def first() -> None:
        service = AuxiliaryRunService(Blocking(), path)
        await service.spawn(_spec(evidence, "aux-left"), evidence)
        await running(service, "aux-left")
        service.close()  # the process "dies": nobody records an end

    asyncio.run(first())

    async def second() -> None:
        service = AuxiliaryRunService(Answer(), path)
        assert service.recovered == ("aux-left",)
        snapshot = await service.get("aux-left")
        assert snapshot.state == AuxiliaryRunState.FAILED
        assert snapshot.error_code == "INTERRUPTED"
        snapshot.validate()
        handle = await service.spawn(_spec(evidence, "aux-left"), evidence)
        with pytest.raises(AuxiliaryRunError) as refused:
            await asyncio.wait_for(handle.wait(), timeout=PATIENCE)
        assert refused.value.code == "INTERRUPTED"
        service.close()
        again = AuxiliaryRunService(Answer(), path)
        assert again.recovered == ()
        again.close()

    asyncio.run(second())


def test_a_run_whose_process_was_killed_is_failed_on_the_next_open(tmp_path: Path) -> None:
    path = tmp_path / "ledger.db"
    _evidence(path)
    child = _python(
        PRELUDE
        + """
class Blocking:
    async def execute(self, context):
        await asyncio.sleep(3600)

async def main():
    service = AuxiliaryRunService(Blocking(), path)
    spec = AuxiliaryRunSpec(
        ExecutionFrame.root(evidence.target), "reviewer", "review", evidence.snapshot_digest
    ).with_id("aux-killed")
    await service.spawn(spec, evidence)
    await asyncio.sleep(0.05)
    print((await service.get("aux-killed")).state, flush=True)
    import os
    os._exit(9)

asyncio.run(main())
""",
        str(path),
    )
    assert child.stdout.strip() == "RUNNING", child.stderr
    assert child.returncode == 9

    async def reopen() -> None:
        service = AuxiliaryRunService(Answer(), path)
        assert service.recovered == ("aux-killed",)
        snapshot = await service.get("aux-killed")
        assert (snapshot.state, snapshot.error_code) == (AuxiliaryRunState.FAILED, "INTERRUPTED")
        service.close()

    asyncio.run(reopen())


def test_runs_of_live_or_foreign_owners_are_left_alone(tmp_path: Path) -> None:
    path = tmp_path / "ledger.db"
    evidence = _evidence(path)

    async def scenario() -> None:
        live = AuxiliaryRunService(Blocking(), path)
        await live.spawn(_spec(evidence, "aux-live"), evidence)
        await running(live, "aux-live")
        other = AuxiliaryRunService(Answer(), path)
        assert other.recovered == ()
        assert (await other.get("aux-live")).state == AuxiliaryRunState.RUNNING
        other.close()
        await live.aclose()
        assert (await AuxiliaryRunService(Answer(), path).get("aux-live")).state == (
            AuxiliaryRunState.CANCELLED
        )

    asyncio.run(scenario())
    assert owner_is_dead("not-a-tag")
    assert not owner_is_dead("some-other-host.invalid:1:abc")


def test_a_second_process_reads_a_finished_runs_snapshot(tmp_path: Path) -> None:
    path = tmp_path / "ledger.db"
    evidence = _evidence(path)

    async def finish() -> dict[str, Any]:
        service = AuxiliaryRunService(Answer(), path)
        handle = await service.spawn(_spec(evidence, "aux-done"), evidence)
        output = await handle.wait()
        snapshot = await handle.snapshot()
        service.close()
        return {"snapshot": snapshot.public(), "digest": output.digest, "value": output.value}

    here = asyncio.run(finish())
    child = _python(
        PRELUDE
        + """
class Never:
    async def execute(self, context):
        raise AssertionError("a reader never executes")

async def main():
    service = AuxiliaryRunService(Never(), path)
    handle = await service.handle("aux-done")
    output = await handle.wait()
    snapshot = await service.get("aux-done")
    snapshot.validate()
    print(json.dumps({"snapshot": snapshot.public(), "digest": output.digest,
                      "value": output.value}))
    service.close()

asyncio.run(main())
""",
        str(path),
    )
    assert child.returncode == 0, child.stderr
    there = json.loads(child.stdout)
    assert there == here
    assert there["snapshot"]["state"] == "COMPLETED"
    assert there["value"] == {"verdict": "fine", "events": 1}


def test_a_waiter_in_another_service_sees_the_end_by_polling(tmp_path: Path) -> None:
    path = tmp_path / "ledger.db"
    evidence = _evidence(path)

    async def scenario() -> None:
        runner = AuxiliaryRunService(Blocking(), path)
        watcher = AuxiliaryRunService(Answer(), path, poll_seconds=0.01)
        handle = await runner.spawn(_spec(evidence, "aux-watched"), evidence)
        remote = await watcher.handle("aux-watched")
        waiting = asyncio.create_task(remote.wait())
        await running(runner, "aux-watched")  # and the waiter has begun polling
        await handle.cancel()
        with pytest.raises(AuxiliaryRunError, match="CANCELLED"):
            await asyncio.wait_for(waiting, timeout=PATIENCE)
        runner.close()
        watcher.close()

    asyncio.run(scenario())
