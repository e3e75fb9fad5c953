"""`AuxiliaryRunService`: the Rust seed's behaviours, ported, and more."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import attrs
import pytest
from aios_ledger.core import AuxiliaryRunError, JsonValue, LedgerError
from aios_ledger.core.auxiliary import (
    AuxiliaryCapabilityProfile,
    AuxiliaryRunSpec,
    AuxiliaryRunState,
    ExecutionFrame,
)
from aios_ledger.core.auxiliary.queries import MAX_AUXILIARY_LIST
from aios_ledger.core.runs import EvidenceReadRequest, EvidenceSnapshot, ExecutionTarget
from aios_ledger.shell.auxiliary.service import (
    AuxiliaryRunContext,
    AuxiliaryRunService,
    CancellationToken,
    auxiliary_run_events,
    list_auxiliary_runs,
)
from aios_ledger.shell.runs.store import RunEvidenceReader, RunStore
from conftest import both_engines, fresh_target

pytest_generate_tests = both_engines
pytestmark = pytest.mark.usefixtures("engine_targets")

T = TypeVar("T")
# Seconds a test waits for a run or a token before it fails instead of hanging: a bound on
# the wait, never an assertion on how long the run took.
PATIENCE = 60.0


def run(factory: Callable[[], Awaitable[T]]) -> T:
    async def main() -> T:
        return await factory()

    return asyncio.run(main())


def evidence() -> EvidenceSnapshot:
    runs = RunStore(fresh_target())
    created = runs.create_run("session-1", "prompt", run_id="run-1")
    snapshot = RunEvidenceReader(runs).read(
        EvidenceReadRequest(ExecutionTarget("session-1", created.run_id))
    )
    runs.close()
    return snapshot


def spec_for(evidence: EvidenceSnapshot, kind: str, aux_id: str) -> AuxiliaryRunSpec:
    return AuxiliaryRunSpec(
        ExecutionFrame.root(evidence.target),
        kind,
        "inspect bounded evidence",
        evidence.snapshot_digest,
    ).with_id(aux_id)


@attrs.define
class FixtureExecutor:
    value: Any
    calls: int = 0

    async def execute(self, context: AuxiliaryRunContext) -> Any:
        self.calls += 1
        assert not context.spec.capabilities.write_workspace
        return self.value


class BlockingExecutor:
    async def execute(self, context: AuxiliaryRunContext) -> JsonValue:
        await context.cancellation.cancelled()
        raise AuxiliaryRunError("CANCELLED", "fixture saw cancellation")


class StubbornExecutor:
    """Ignores its cancellation token: only cancelling its task stops it."""

    async def execute(self, context: AuxiliaryRunContext) -> JsonValue:
        await asyncio.sleep(3600)
        return None


class PanicExecutor:
    async def execute(self, context: AuxiliaryRunContext) -> JsonValue:
        raise RuntimeError("fixture panic")


class YieldingExecutor:
    async def execute(self, context: AuxiliaryRunContext) -> JsonValue:
        await asyncio.sleep(0)
        return {"ok": True}


def test_service_runs_isolated_executor_and_is_idempotent() -> None:
    ev = evidence()
    executor = FixtureExecutor({"decision": "ok"})
    service = AuxiliaryRunService(executor, fresh_target())
    spec = spec_for(ev, "fixture", "aux-1").with_capabilities(
        AuxiliaryCapabilityProfile.tool_free()
    )

    async def scenario() -> None:
        handle = await service.spawn(spec, ev)
        replay = await service.spawn(spec, ev)
        assert handle.id == replay.id == "aux-1"
        output = await handle.wait()
        assert output.value == {"decision": "ok"}
        assert (await replay.wait()).digest == output.digest
        # A replay after the end does not run it again either.
        await (await service.spawn(spec, ev)).wait()
        assert executor.calls == 1
        assert (await service.get("aux-1")).state == AuxiliaryRunState.COMPLETED

    run(scenario)


def test_same_id_with_another_spec_is_a_spec_conflict() -> None:
    ev = evidence()
    service = AuxiliaryRunService(FixtureExecutor({"ok": True}), fresh_target())
    spec = spec_for(ev, "fixture", "aux-conflict")

    async def scenario() -> None:
        await (await service.spawn(spec, ev)).wait()
        with pytest.raises(AuxiliaryRunError) as refused:
            await service.spawn(attrs.evolve(spec, instruction="something else"), ev)
        assert refused.value.code == "SPEC_CONFLICT"

    run(scenario)


def test_parent_cancellation_is_propagated() -> None:
    ev = evidence()
    service = AuxiliaryRunService(BlockingExecutor(), fresh_target())
    parent = CancellationToken()

    async def scenario() -> None:
        handle = await service.spawn(spec_for(ev, "cancel-fixture", "aux-cancel"), ev, parent)
        await asyncio.sleep(0)
        parent.cancel()
        with pytest.raises(AuxiliaryRunError) as refused:
            await handle.wait()
        assert refused.value.code == "CANCELLED"
        snapshot = await handle.snapshot()
        assert snapshot.state == AuxiliaryRunState.CANCELLED
        snapshot.validate()

    run(scenario)


def test_cancellation_stops_an_executor_that_ignores_its_token() -> None:
    ev = evidence()
    service = AuxiliaryRunService(StubbornExecutor(), fresh_target())
    parent = CancellationToken()

    async def scenario() -> None:
        handle = await service.spawn(spec_for(ev, "stubborn", "aux-stubborn"), ev, parent)
        await asyncio.sleep(0)
        parent.cancel()
        with pytest.raises(AuxiliaryRunError, match="CANCELLED"):
            await asyncio.wait_for(handle.wait(), timeout=PATIENCE)
        assert (await handle.snapshot()).state == AuxiliaryRunState.CANCELLED

    run(scenario)


def test_a_parent_cancelled_before_spawn_never_runs_the_executor() -> None:
    ev = evidence()
    executor = FixtureExecutor({"ok": True})
    service = AuxiliaryRunService(executor, fresh_target())
    parent = CancellationToken()
    parent.cancel()

    async def scenario() -> None:
        handle = await service.spawn(spec_for(ev, "early", "aux-early"), ev, parent)
        with pytest.raises(AuxiliaryRunError, match="CANCELLED"):
            await handle.wait()
        assert executor.calls == 0

    run(scenario)


def test_output_schema_and_limit_are_enforced() -> None:
    ev = evidence()
    service = AuxiliaryRunService(FixtureExecutor({"wrong": True}), fresh_target())
    spec = spec_for(ev, "schema-fixture", "aux-schema").with_output_schema(
        {"type": "object", "required": ["answer"], "properties": {"answer": {"type": "string"}}}
    )

    async def scenario() -> None:
        handle = await service.spawn(spec, ev)
        with pytest.raises(AuxiliaryRunError) as refused:
            await handle.wait()
        assert refused.value.code == "OUTPUT_SCHEMA_MISMATCH"
        snapshot = await handle.snapshot()
        assert snapshot.state == AuxiliaryRunState.FAILED
        assert snapshot.error_code == "OUTPUT_SCHEMA_MISMATCH"

    run(scenario)


def test_a_non_json_output_is_a_terminal_failure() -> None:
    ev = evidence()
    service = AuxiliaryRunService(FixtureExecutor({"set": {1, 2}}), fresh_target())

    async def scenario() -> None:
        handle = await service.spawn(spec_for(ev, "non-json", "aux-non-json"), ev)
        with pytest.raises(AuxiliaryRunError, match="OUTPUT_INVALID"):
            await handle.wait()
        assert (await handle.snapshot()).state == AuxiliaryRunState.FAILED

    run(scenario)


def test_concurrent_waiters_cannot_miss_terminal_notification() -> None:
    ev = evidence()
    service = AuxiliaryRunService(YieldingExecutor(), fresh_target())

    async def scenario() -> None:
        for index in range(256):
            spec = AuxiliaryRunSpec(
                ExecutionFrame.root(ev.target), "wait-race", "return", ev.snapshot_digest
            ).with_id(f"aux-wait-race-{index}")
            handle = await service.spawn(spec, ev)
            waiters = [asyncio.create_task(handle.wait()) for _ in range(4)]
            for waiter in waiters:
                result = await asyncio.wait_for(waiter, timeout=PATIENCE)
                assert result.value == {"ok": True}
            assert (await handle.snapshot()).state.is_terminal
            # A waiter that arrives after the end returns at once.
            late = await asyncio.wait_for(handle.wait(), timeout=PATIENCE)
            assert late.value == {"ok": True}

    run(scenario)


def test_service_rejects_cross_target_evidence() -> None:
    ev = evidence()
    spec = AuxiliaryRunSpec(
        ExecutionFrame.root(ExecutionTarget("session-other", "run-other")),
        "cross-target",
        "must be rejected",
        ev.snapshot_digest,
    ).with_id("aux-cross-target")
    executor = FixtureExecutor({})
    service = AuxiliaryRunService(executor, fresh_target())

    async def scenario() -> None:
        with pytest.raises(AuxiliaryRunError) as refused:
            await service.spawn(spec, ev)
        assert refused.value.code == "TARGET_MISMATCH"
        with pytest.raises(AuxiliaryRunError, match="RUN_NOT_FOUND"):
            await service.get("aux-cross-target")

    run(scenario)
    assert executor.calls == 0


def test_spawn_refuses_tampered_evidence_and_escalation_before_storing() -> None:
    ev = evidence()
    service = AuxiliaryRunService(FixtureExecutor({}), fresh_target())
    tampered = attrs.evolve(ev, truncated=True)
    escalated = (
        spec_for(ev, "esc", "aux-esc")
        .with_capabilities(AuxiliaryCapabilityProfile.read_only(10))
        .with_parent_ceiling(AuxiliaryCapabilityProfile.tool_free())
    )

    async def scenario() -> None:
        with pytest.raises(AuxiliaryRunError, match="EVIDENCE_DIGEST_MISMATCH"):
            await service.spawn(spec_for(ev, "t", "aux-tampered"), tampered)
        with pytest.raises(AuxiliaryRunError, match="CAPABILITY_ESCALATION"):
            await service.spawn(escalated, ev)
        with pytest.raises(AuxiliaryRunError, match="INVALID_FIELD") as refused:
            await service.spawn(
                spec_for(ev, "bad", "aux-bad").with_output_schema({"type": "nope"}), ev
            )
        assert refused.value.field == "output_schema"
        with pytest.raises(AuxiliaryRunError, match="INVALID_FIELD"):
            await service.spawn("not a spec", ev)  # type: ignore[arg-type]
        assert list_auxiliary_runs(service._db) == []

    run(scenario)


def test_executor_panics_and_output_overflow_become_terminal_failures() -> None:
    ev = evidence()

    async def scenario() -> None:
        service = AuxiliaryRunService(PanicExecutor(), fresh_target())
        handle = await service.spawn(spec_for(ev, "panic", "aux-panic"), ev)
        with pytest.raises(AuxiliaryRunError) as refused:
            await handle.wait()
        assert refused.value.code == "EXECUTOR"
        assert "panicked" in str(refused.value)
        assert (await handle.snapshot()).state == AuxiliaryRunState.FAILED

        service = AuxiliaryRunService(FixtureExecutor("too large"), fresh_target())
        spec = spec_for(ev, "overflow", "aux-overflow").with_capabilities(
            AuxiliaryCapabilityProfile.read_only(1)
        )
        handle = await service.spawn(spec, ev)
        with pytest.raises(AuxiliaryRunError) as refused:
            await handle.wait()
        assert refused.value.code == "OUTPUT_LIMIT"
        assert (await handle.snapshot()).state == AuxiliaryRunState.FAILED

    run(scenario)


def test_a_run_over_its_timeout_fails_with_timeout() -> None:
    ev = evidence()
    service = AuxiliaryRunService(StubbornExecutor(), fresh_target())

    async def scenario() -> None:
        handle = await service.spawn(spec_for(ev, "slow", "aux-slow").with_timeout_ms(20), ev)
        with pytest.raises(AuxiliaryRunError) as refused:
            await asyncio.wait_for(handle.wait(), timeout=PATIENCE)
        assert refused.value.code == "TIMEOUT"
        snapshot = await handle.snapshot()
        assert snapshot.state == AuxiliaryRunState.FAILED
        assert snapshot.error_code == "TIMEOUT"

    run(scenario)


def test_every_transition_is_a_sealed_ledger_event_and_a_revision() -> None:
    ev = evidence()
    service = AuxiliaryRunService(FixtureExecutor({"ok": 1}), fresh_target())

    async def scenario() -> None:
        await (await service.spawn(spec_for(ev, "audit", "aux-audit"), ev)).wait()

    run(scenario)

    events = auxiliary_run_events(service._db, "aux-audit")
    assert [event["event_type"] for event in events] == [
        "AUXILIARY_RUN_SPAWNED",
        "AUXILIARY_RUN_STARTED",
        "AUXILIARY_RUN_COMPLETED",
    ]
    assert {event["chain"] for event in events} == {"ledger"}
    assert [event["payload"].get("to") for event in events] == [None, "RUNNING", "COMPLETED"]
    (row,) = list_auxiliary_runs(service._db)
    assert (row.state, row.revision) == ("COMPLETED", 3)


@pytest.mark.parametrize(
    ("arguments", "field"),
    [
        ({"limit": 0}, "limit"),
        ({"limit": MAX_AUXILIARY_LIST + 1}, "limit"),
        ({"limit": True}, "limit"),
        ({"state": "DONE"}, "state"),
        ({"session_id": "bad session"}, "session_id"),
    ],
)
def test_a_list_out_of_range_is_refused_not_clamped(arguments: Any, field: str) -> None:
    service = AuxiliaryRunService(FixtureExecutor({"ok": 1}), fresh_target())
    try:
        with pytest.raises(LedgerError) as refused:
            list_auxiliary_runs(service._db, **arguments)
        assert refused.value.code == "FIELDS_INVALID"
        assert refused.value.detail.startswith(f"arguments.{field}: ")
        assert list_auxiliary_runs(service._db, limit=MAX_AUXILIARY_LIST) == []
    finally:
        service.close()


def test_many_waiters_and_cancel_through_the_handle() -> None:
    ev = evidence()
    service = AuxiliaryRunService(BlockingExecutor(), fresh_target())

    async def scenario() -> None:
        handle = await service.spawn(spec_for(ev, "many", "aux-many"), ev)
        waiters = [asyncio.create_task(handle.wait()) for _ in range(50)]
        await asyncio.sleep(0)
        await handle.cancel()
        results = await asyncio.wait_for(
            asyncio.gather(*waiters, return_exceptions=True), timeout=PATIENCE
        )
        assert all(isinstance(r, AuxiliaryRunError) and r.code == "CANCELLED" for r in results)

    run(scenario)


def test_cancellation_tokens() -> None:
    async def scenario() -> None:
        parent = CancellationToken()
        child = parent.child()
        grandchild = child.child()
        assert not grandchild.is_cancelled
        waiter = asyncio.create_task(grandchild.cancelled())
        await asyncio.sleep(0)
        parent.cancel()
        await asyncio.wait_for(waiter, timeout=PATIENCE)
        assert child.is_cancelled and grandchild.is_cancelled
        assert parent.child().is_cancelled
        lone = CancellationToken()
        lone.child().cancel()
        assert not lone.is_cancelled
        await asyncio.wait_for(parent.cancelled(), timeout=PATIENCE)

    run(scenario)


def test_aclose_cancels_runs_in_flight() -> None:
    ev = evidence()

    async def scenario() -> None:
        service = AuxiliaryRunService(BlockingExecutor(), fresh_target())
        handle = await service.spawn(spec_for(ev, "closing", "aux-closing"), ev)
        await asyncio.sleep(0)
        async with service:
            pass
        with pytest.raises(AuxiliaryRunError, match="CANCELLED"):
            await handle.wait()

    run(scenario)


def test_finished_runs_are_retired_but_still_answer(monkeypatch: pytest.MonkeyPatch) -> None:
    from aios_ledger.shell.auxiliary import service as auxiliary

    monkeypatch.setattr(auxiliary, "FINISHED_CACHE", 2)
    ev = evidence()
    service = AuxiliaryRunService(YieldingExecutor(), fresh_target())

    async def scenario() -> None:
        handles = [
            await service.spawn(spec_for(ev, "retire", f"aux-retire-{index}"), ev)
            for index in range(5)
        ]
        for handle in handles:
            assert (await asyncio.wait_for(handle.wait(), timeout=PATIENCE)).value == {"ok": True}
        assert len(service._finished) == 2
        assert not service._entries
        first = await asyncio.wait_for(handles[0].wait(), timeout=PATIENCE)  # from the database
        assert first.value == {"ok": True}

    run(scenario)
