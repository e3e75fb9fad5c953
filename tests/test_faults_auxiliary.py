"""I/O faults under an auxiliary run, from `spawn` through to its terminal state.

An auxiliary run is several transactions (spawn PENDING, RUNNING, COMPLETED); a fault may stop
it between two of them. What must hold: every step is all or nothing (the row's state and
revision agree with its sealed events), the caller gets the output or a LedgerError, the
database is intact and its log verifies, and a service opened afterwards (a new process) ends
every run the faulty one left unfinished, so that no run stays PENDING or RUNNING for ever.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from functools import partial
from pathlib import Path
from typing import Any

import pytest
from aios_ledger.core.auxiliary import AuxiliaryRunOutput, AuxiliaryRunSpec, ExecutionFrame
from aios_ledger.core.runs import EvidenceReadRequest, EvidenceSnapshot, ExecutionTarget
from aios_ledger.shell.auxiliary.service import (
    AuxiliaryRunContext,
    AuxiliaryRunService,
    auxiliary_run_events,
    read_auxiliary_run,
)
from aios_ledger.shell.db.connection import Database
from aios_ledger.shell.runs.store import RunEvidenceReader, RunStore
from faults import OPERATIONS, FaultPlan, FaultVFS
from faults_support import (
    MODES,
    STORAGE_CODES,
    Tally,
    copy_database,
    faulted,
    integrity,
    log_intact,
    measured,
    positions,
    report,
)
from legacy_fixtures import dump
from test_tasks_support import Clock

AUX = "aux-fault-1"
OUTPUT = {"decision": "ok", "notes": ["fine"]}


class Answer:
    async def execute(self, context: AuxiliaryRunContext) -> Any:
        await asyncio.sleep(0)
        return OUTPUT


def _evidence(path: Path) -> EvidenceSnapshot:
    with RunStore(path, clock=Clock()) as runs:
        runs.create_run("session-1", "a prompt", run_id="run-1")
        return RunEvidenceReader(runs).read(
            EvidenceReadRequest(ExecutionTarget("session-1", "run-1"))
        )


def _spec(evidence: EvidenceSnapshot) -> AuxiliaryRunSpec:
    return AuxiliaryRunSpec(
        ExecutionFrame.root(evidence.target),
        "fixture",
        "inspect the evidence",
        evidence.snapshot_digest,
    ).with_id(AUX)


def _spawn_to_the_end(
    path: Path, vfs: str | None, spec: AuxiliaryRunSpec, evidence: EvidenceSnapshot
) -> AuxiliaryRunOutput:
    async def scenario() -> AuxiliaryRunOutput:
        service = AuxiliaryRunService(Answer(), path, clock_ms=lambda: 1_790_000_000_000, vfs=vfs)
        try:
            handle = await service.spawn(spec, evidence)
            return await handle.wait()
        finally:
            await service.aclose()

    return asyncio.run(scenario())


def _trail_agrees(path: Path) -> str | None:
    """The run's state, after checking that its row and its sealed events agree."""
    with Database(path) as db:
        events = auxiliary_run_events(db, AUX)
        try:
            row = read_auxiliary_run(db, AUX)
        except Exception:
            assert events == []
            return None
    assert len(events) == row.revision, (row, events)
    last = events[-1]["payload"]
    assert last.get("to", last.get("state")) == row.state
    return row.state


@pytest.fixture(scope="module")
def fault_vfs() -> Iterator[tuple[FaultVFS, FaultPlan]]:
    plan = FaultPlan()
    vfs = FaultVFS("aios-fault-auxiliary", plan)
    Tally.reset()
    yield vfs, plan
    print("\n" + report("auxiliary fault sweep"))
    vfs.unregister()


@pytest.fixture(scope="module")
def template(
    tmp_path_factory: pytest.TempPathFactory, fault_vfs: tuple[FaultVFS, FaultPlan]
) -> tuple[Path, EvidenceSnapshot, dict[str, int], list[str]]:
    vfs, plan = fault_vfs
    folder = tmp_path_factory.mktemp("aux")
    path = folder / "template.db"
    evidence = _evidence(path)
    reference = copy_database(path, folder / "reference.db")
    counts = measured(
        plan, partial(_spawn_to_the_end, reference, vfs.vfs_name, _spec(evidence), evidence)
    )
    assert _trail_agrees(reference) == "COMPLETED"
    return path, evidence, counts, dump(path)


@pytest.mark.parametrize("operation", OPERATIONS)
@pytest.mark.parametrize("mode", MODES, ids=[mode[0] for mode in MODES])
def test_auxiliary_run_under_faults_ends_cleanly(
    tmp_path: Path,
    fault_vfs: tuple[FaultVFS, FaultPlan],
    template: tuple[Path, EvidenceSnapshot, dict[str, int], list[str]],
    operation: str,
    mode: tuple[str, bool, bool],
) -> None:
    vfs, plan = fault_vfs
    _, persistent, full = mode
    source, evidence, counts, before = template
    spec = _spec(evidence)
    outcomes: dict[int, str] = {}
    for nth in positions(counts.get(operation, 0)):
        path = copy_database(source, tmp_path / f"{nth}.db")
        outcome = faulted(
            plan,
            operation,
            nth,
            persistent,
            full,
            partial(_spawn_to_the_end, path, vfs.vfs_name, spec, evidence),
        )
        outcomes[nth] = outcome
        assert outcome == "completed" or outcome in STORAGE_CODES, (nth, outcome)
        assert integrity(path) == "ok"
        assert log_intact(path)
        state = _trail_agrees(path)
        if outcome == "completed":
            assert state == "COMPLETED"
        if state is None:
            assert dump(path) == before
        # A new service (a new process) ends what the faulty one left unfinished.
        AuxiliaryRunService(Answer(), path).close()
        assert _trail_agrees(path) in {None, "COMPLETED", "FAILED", "CANCELLED"}
        assert log_intact(path)
    assert set(outcomes.values()) - {"completed"}, f"no fault ever hit: {outcomes}"
    assert outcomes[max(outcomes)] == "completed"
