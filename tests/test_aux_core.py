"""The pure core of auxiliary runs: specs, capability ceilings, snapshots, the transition table."""

from __future__ import annotations

import os
from typing import Any

import attrs
import pytest
from aios_ledger.core import (
    AuxiliaryRunError,
    LedgerError,
    LogTail,
    Statement,
    Timestamp,
    WritePlan,
    canonical_json,
    digest_bytes,
)
from aios_ledger.core.actors import Actor
from aios_ledger.core.auxiliary import (
    AUXILIARY_SNAPSHOT_SCHEMA_V1,
    MAX_FRAME_DEPTH,
    TRANSITIONS,
    AuxiliaryCapabilityProfile,
    AuxiliaryRowState,
    AuxiliaryRunMode,
    AuxiliaryRunOutput,
    AuxiliaryRunRow,
    AuxiliaryRunSnapshot,
    AuxiliaryRunSpec,
    AuxiliaryRunState,
    AuxiliaryStopRequest,
    AuxiliaryTransitionRequest,
    ExecutionFrame,
    RecoverInterruptedRequest,
    UnfinishedRunsState,
    check_output,
    check_spawn,
    decide_recover_interrupted,
    decide_spawn,
    decide_stop,
    decide_transition,
)
from aios_ledger.core.auxiliary.records import failure_of
from aios_ledger.core.auxiliary.states import transition_event, transition_table
from aios_ledger.core.log import GENESIS_SEAL, LEDGER_CHAIN
from aios_ledger.core.runs import ExecutionTarget
from aios_ledger.core.runs.evidence import EvidenceReadRequest, build_evidence_snapshot
from aios_ledger.core.runs.records import RunRow
from hypothesis import given, settings
from hypothesis import strategies as st
from syrupy.assertion import SnapshotAssertion

# Who the decisions here act as.
ACTOR = Actor("tester", "library")

EXAMPLES = 400 if os.environ.get("AIOS_SOAK") == "1" else 60
DIGEST = digest_bytes("evidence", b"x")
TAIL = LogTail.read(1, [LEDGER_CHAIN], [])  # an empty log: every decision appends to its chain
DEAD = RecoverInterruptedRequest(dead_owners=frozenset({"dead:1:t"}))


def ms(milliseconds: int) -> Timestamp:
    return Timestamp.from_epoch_ms(milliseconds)


def at(row: AuxiliaryRunRow | None, tail: LogTail = TAIL) -> AuxiliaryRowState:
    return AuxiliaryRowState(row, tail)


def move(target: AuxiliaryRunState, aux_id: str = "aux-1", **changes: Any) -> Any:
    return AuxiliaryTransitionRequest(aux_id, target, **changes)


def unfinished(*rows: AuxiliaryRunRow, tail: LogTail = TAIL) -> UnfinishedRunsState:
    return UnfinishedRunsState(rows, tail)


def _spec(**changes: Any) -> AuxiliaryRunSpec:
    frame = ExecutionFrame.root(ExecutionTarget("s", "r"))
    spec = AuxiliaryRunSpec(frame, "x", "y", DIGEST)
    return attrs.evolve(spec, **changes) if changes else spec


# --- the seed's pure tests ------------------------------------------------------------------


def test_capability_ceiling_rejects_escalation() -> None:
    spec = (
        _spec()
        .with_capabilities(AuxiliaryCapabilityProfile.read_only(1024))
        .with_parent_ceiling(AuxiliaryCapabilityProfile.tool_free())
    )
    with pytest.raises(AuxiliaryRunError) as refused:
        spec.validate(spec.evidence_digest)
    assert refused.value.code == "CAPABILITY_ESCALATION"
    assert isinstance(refused.value, LedgerError)


def test_auxiliary_snapshot_state_and_terminal_fields_are_consistent() -> None:
    frame = ExecutionFrame.root(ExecutionTarget("session-snapshot", "run-snapshot"))
    spec = AuxiliaryRunSpec(frame, "snapshot", "return", digest_bytes("evidence", b"snapshot"))
    snapshot = AuxiliaryRunSnapshot(
        schema=AUXILIARY_SNAPSHOT_SCHEMA_V1,
        id=spec.id,
        parent=frame,
        mode=spec.mode,
        state=AuxiliaryRunState.FAILED,
        spec_digest=spec.digest(),
        created_at_ms=1,
        updated_at_ms=1,
        output_digest=None,
        error=None,
    )
    with pytest.raises(AuxiliaryRunError) as refused:
        snapshot.validate()
    assert (refused.value.code, refused.value.field) == ("INVALID_FIELD", "state")
    attrs.evolve(snapshot, error="failed").validate()


# --- snapshots ------------------------------------------------------------------------------

OUT = digest_bytes("output", b"1")


@pytest.mark.parametrize(
    ("state", "output_digest", "error", "valid"),
    [
        (AuxiliaryRunState.PENDING, None, None, True),
        (AuxiliaryRunState.PENDING, OUT, None, False),
        (AuxiliaryRunState.RUNNING, None, None, True),
        (AuxiliaryRunState.RUNNING, None, "x", False),
        (AuxiliaryRunState.COMPLETED, OUT, None, True),
        (AuxiliaryRunState.COMPLETED, None, None, False),
        (AuxiliaryRunState.COMPLETED, OUT, "x", False),
        (AuxiliaryRunState.FAILED, None, "EXECUTOR: boom", True),
        (AuxiliaryRunState.FAILED, OUT, "EXECUTOR: boom", False),
        (AuxiliaryRunState.CANCELLED, None, "CANCELLED: stop", True),
        (AuxiliaryRunState.CANCELLED, None, None, False),
    ],
)
def test_snapshot_fields_must_agree_with_state(
    state: AuxiliaryRunState, output_digest: str | None, error: str | None, valid: bool
) -> None:
    snapshot = AuxiliaryRunSnapshot(
        schema=AUXILIARY_SNAPSHOT_SCHEMA_V1,
        id="aux-1",
        parent=ExecutionFrame.root(ExecutionTarget("s", "r")),
        mode=AuxiliaryRunMode.ISOLATED,
        state=state,
        spec_digest=_spec().digest(),
        created_at_ms=5,
        updated_at_ms=6,
        output_digest=output_digest,
        error=error,
    )
    if valid:
        snapshot.validate()
    else:
        with pytest.raises(AuxiliaryRunError) as refused:
            snapshot.validate()
        assert refused.value.field == "state"


@pytest.mark.parametrize(
    ("changes", "field"),
    [
        ({"schema": "other.v1"}, "schema"),
        ({"id": "has space"}, "id"),
        ({"spec_digest": "abc"}, "spec_digest"),
        ({"updated_at_ms": 4}, "updated_at_ms"),
        ({"created_at_ms": -1}, "created_at_ms"),
    ],
)
def test_snapshot_refuses_bad_fields(changes: dict[str, Any], field: str) -> None:
    snapshot = AuxiliaryRunSnapshot(
        schema=AUXILIARY_SNAPSHOT_SCHEMA_V1,
        id="aux-1",
        parent=ExecutionFrame.root(ExecutionTarget("s", "r")),
        mode=AuxiliaryRunMode.ISOLATED,
        state=AuxiliaryRunState.PENDING,
        spec_digest=_spec().digest(),
        created_at_ms=5,
        updated_at_ms=6,
    )
    with pytest.raises(AuxiliaryRunError) as refused:
        attrs.evolve(snapshot, **changes).validate()
    assert refused.value.field == field


# --- the transition table -------------------------------------------------------------------


def test_transition_table_is_golden(golden: SnapshotAssertion) -> None:
    assert golden == {
        "table": transition_table(),
        "events": {f"{a}->{b}": event for (a, b), event in TRANSITIONS.items()},
        "terminal": sorted(state.value for state in AuxiliaryRunState if state.is_terminal),
    }


def test_every_pair_outside_the_table_is_refused() -> None:
    for source in AuxiliaryRunState:
        for target in AuxiliaryRunState:
            if (source, target) in TRANSITIONS:
                assert transition_event(source, target).startswith("AUXILIARY_RUN_")
            else:
                with pytest.raises(AuxiliaryRunError, match="INVALID_TRANSITION"):
                    transition_event(source, target)
    terminal = {state for state in AuxiliaryRunState if state.is_terminal}
    assert terminal == {
        AuxiliaryRunState.COMPLETED,
        AuxiliaryRunState.FAILED,
        AuxiliaryRunState.CANCELLED,
    }


# --- specs ----------------------------------------------------------------------------------


def test_spec_digests_are_golden(golden: SnapshotAssertion) -> None:
    base = _spec()
    variants = {
        "base": base,
        "with_id": base.with_id("aux-1"),
        "read_only": base.with_capabilities(AuxiliaryCapabilityProfile.read_only(1024)),
        "schema": base.with_output_schema({"type": "object", "required": ["answer"]}),
        "timeout": base.with_timeout_ms(1500),
        "nested": attrs.evolve(base, frame=base.frame.child("aux-parent")),
    }
    assert golden == {name: {"id": s.id, "digest": s.digest()} for name, s in variants.items()}
    assert len({s.digest() for s in variants.values()}) == len(variants)


def test_spec_id_is_derived_until_set() -> None:
    spec = _spec()
    assert spec.id.startswith("aux-")
    assert spec.id == _spec().id
    assert spec.with_output_schema({"type": "object"}).id != spec.id
    assert spec.with_id("aux-1").id == "aux-1"
    assert spec.with_id("aux-1").digest() != spec.digest()


def test_equal_schemas_make_equal_specs() -> None:
    one = _spec().with_output_schema({"type": "object", "required": ["a"]})
    two = _spec().with_output_schema({"required": ["a"], "type": "object"})
    assert one == two
    assert one.digest() == two.digest()
    assert one != _spec().with_output_schema({"type": "array"})


@pytest.mark.parametrize(
    ("spec", "code", "field"),
    [
        (_spec(kind="bad kind"), "INVALID_FIELD", "kind"),
        (_spec(instruction="  "), "INVALID_FIELD", "instruction"),
        (_spec(evidence_digest="abc"), "INVALID_FIELD", "evidence_digest"),
        (_spec(id="bad id"), "INVALID_FIELD", "id"),
        (_spec(timeout_ms=0), "INVALID_FIELD", "timeout_ms"),
        (_spec(output_schema={"type": 5}), "INVALID_FIELD", "output_schema"),
        (
            _spec(capabilities=AuxiliaryCapabilityProfile.read_only(0)),
            "INVALID_FIELD",
            "capabilities.max_output_bytes",
        ),
        (
            _spec(capabilities=AuxiliaryCapabilityProfile(write_workspace=True)),
            "CAPABILITY_ESCALATION",
            None,
        ),
        (
            _spec(
                capabilities=AuxiliaryCapabilityProfile().with_tools("grep"),
                parent_ceiling=AuxiliaryCapabilityProfile.read_only(10**6),
            ),
            "CAPABILITY_ESCALATION",
            None,
        ),
        (
            _spec(capabilities=AuxiliaryCapabilityProfile().with_tools("Bad Tool")),
            "INVALID_FIELD",
            "capabilities.tools",
        ),
    ],
)
def test_spec_validate_refuses(spec: AuxiliaryRunSpec, code: str, field: str | None) -> None:
    with pytest.raises(AuxiliaryRunError) as refused:
        spec.validate(spec.evidence_digest)
    assert (refused.value.code, refused.value.field) == (code, field)


def test_spec_validate_checks_the_evidence_digest() -> None:
    spec = _spec()
    spec.validate(DIGEST)
    other = digest_bytes("evidence", b"other")
    with pytest.raises(AuxiliaryRunError, match="EVIDENCE_DIGEST_MISMATCH") as refused:
        spec.validate(other)
    assert refused.value.detail == f"the spec pins evidence {DIGEST}, it was given {other}"


def test_frames_nest_up_to_the_depth_limit() -> None:
    frame = ExecutionFrame.root(ExecutionTarget("s", "r"))
    for level in range(MAX_FRAME_DEPTH):
        frame = frame.child(f"aux-{level}")
        frame.validate()
    assert frame.depth == MAX_FRAME_DEPTH
    with pytest.raises(AuxiliaryRunError, match="FRAME_TOO_DEEP"):
        frame.child("aux-too-deep")
    with pytest.raises(AuxiliaryRunError, match="FRAME_TOO_DEEP"):
        attrs.evolve(frame, depth=MAX_FRAME_DEPTH + 1).validate()


# --- capability order -----------------------------------------------------------------------

profiles = st.builds(
    AuxiliaryCapabilityProfile,
    read_workspace=st.booleans(),
    write_workspace=st.booleans(),
    network=st.booleans(),
    tools=st.frozensets(st.sampled_from(["grep", "read", "web"]), max_size=3),
    max_output_bytes=st.integers(min_value=1, max_value=4096),
)


@settings(max_examples=EXAMPLES)
@given(profiles, profiles, profiles)
def test_is_within_is_a_partial_order(
    a: AuxiliaryCapabilityProfile, b: AuxiliaryCapabilityProfile, c: AuxiliaryCapabilityProfile
) -> None:
    assert a.is_within(a)
    if a.is_within(b) and b.is_within(a):
        assert a == b
    if a.is_within(b) and b.is_within(c):
        assert a.is_within(c)
    assert AuxiliaryCapabilityProfile.tool_free().is_within(attrs.evolve(a, max_output_bytes=10**6))


def test_named_profiles() -> None:
    assert not AuxiliaryCapabilityProfile.tool_free().write_workspace
    assert AuxiliaryCapabilityProfile.read_only(1024).read_workspace
    assert AuxiliaryCapabilityProfile.read_only(1024).max_output_bytes == 1024
    assert not AuxiliaryCapabilityProfile.read_only(1024).is_within(
        AuxiliaryCapabilityProfile.tool_free()
    )


# --- from_mapping ---------------------------------------------------------------------------

specs = st.builds(
    lambda kind, instruction, caps, ceiling, schema, timeout, run_id, depth: AuxiliaryRunSpec(
        ExecutionFrame(
            ExecutionTarget("s", "r"), depth=depth, parent_id="aux-p" if depth else None
        ),
        kind,
        instruction,
        DIGEST,
        id=run_id,
        capabilities=attrs.evolve(caps, write_workspace=False),
        parent_ceiling=ceiling,
        output_schema=schema,
        timeout_ms=timeout,
    ),
    st.from_regex(r"[a-z][a-z0-9-]{0,10}", fullmatch=True),
    st.text(min_size=1, max_size=40).filter(lambda text: text.strip() != ""),
    profiles,
    st.none() | profiles.map(lambda p: attrs.evolve(p, max_output_bytes=10**6)),
    st.none() | st.just({"type": "object"}),
    st.none() | st.integers(min_value=1, max_value=10**6),
    st.none() | st.from_regex(r"aux-[a-z0-9]{1,8}", fullmatch=True),
    st.integers(min_value=0, max_value=MAX_FRAME_DEPTH),
)


@settings(max_examples=EXAMPLES)
@given(specs)
def test_from_mapping_round_trips(spec: AuxiliaryRunSpec) -> None:
    try:
        spec.validate(DIGEST)
    except AuxiliaryRunError:
        with pytest.raises(LedgerError):
            AuxiliaryRunSpec.from_mapping(spec.public())
        return
    again = AuxiliaryRunSpec.from_mapping(spec.public())
    assert again.public() == spec.public()
    assert again.digest() == spec.digest()


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=5),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3)
    ),
    max_leaves=10,
)


@settings(max_examples=EXAMPLES)
@given(st.dictionaries(st.sampled_from(sorted(_spec().public())), json_values, max_size=10))
def test_from_mapping_refuses_garbage_with_a_ledger_error(raw: dict[str, Any]) -> None:
    try:
        AuxiliaryRunSpec.from_mapping(raw)
    except AuxiliaryRunError as refused:
        assert refused.code == "INVALID_FIELD"


@pytest.mark.parametrize("raw", [None, [], "x", 7, {"id": "aux-1"}])
def test_from_mapping_refuses_wrong_shapes(raw: object) -> None:
    with pytest.raises(AuxiliaryRunError, match="INVALID_FIELD"):
        AuxiliaryRunSpec.from_mapping(raw)


# --- outputs and failures -------------------------------------------------------------------


def test_check_output() -> None:
    spec = _spec().with_output_schema(
        {"type": "object", "required": ["answer"], "properties": {"answer": {"type": "string"}}}
    )
    output = check_output(spec, {"answer": "yes"})
    assert output.digest == digest_bytes("output", b'{"answer":"yes"}')
    assert output.size_bytes == len(b'{"answer":"yes"}')
    with pytest.raises(AuxiliaryRunError, match="OUTPUT_SCHEMA_MISMATCH"):
        check_output(spec, {"wrong": True})
    with pytest.raises(AuxiliaryRunError, match="OUTPUT_INVALID"):
        check_output(spec, {"answer": object()})
    with pytest.raises(AuxiliaryRunError, match="OUTPUT_INVALID"):
        check_output(spec, float("nan"))
    tiny = _spec(capabilities=AuxiliaryCapabilityProfile.read_only(1))
    with pytest.raises(AuxiliaryRunError, match="OUTPUT_LIMIT"):
        check_output(tiny, "too large")
    assert check_output(tiny, 1).size_bytes == 1


def test_failure_of_keeps_codes_and_names_panics() -> None:
    assert failure_of(AuxiliaryRunError("CANCELLED", "stop")).code == "CANCELLED"
    panic = failure_of(RuntimeError("fixture panic"))
    assert panic.code == "EXECUTOR"
    assert "panicked" in panic.detail
    assert "fixture panic" in panic.detail


# --- decisions ------------------------------------------------------------------------------


def _evidence() -> Any:
    run = RunRow("r", "s", "prompt", 0, "2026-08-20T00:00:00Z", "2026-08-20T00:00:00Z")
    return build_evidence_snapshot(EvidenceReadRequest(ExecutionTarget("s", "r")), run, ())


def _spawned(owner: str) -> tuple[AuxiliaryRunSpec, WritePlan[Any]]:
    """A spec of run `aux-1` over fresh evidence, and the plan that spawns it."""
    evidence = _evidence()
    spec = AuxiliaryRunSpec(
        ExecutionFrame.root(evidence.target), "k", "i", evidence.snapshot_digest
    ).with_id("aux-1")
    plan = decide_spawn(at(None), check_spawn(spec, evidence), now=ms(10), owner=owner, actor=ACTOR)
    assert isinstance(plan, WritePlan)
    return spec, plan


def _row(plan_params: dict[str, Any], **changes: Any) -> AuxiliaryRunRow:
    values = {
        **plan_params,
        "revision": 1,
        "updated_at_ms": plan_params["created_at_ms"],
        "output_json": None,
        "output_digest": None,
        "error_code": None,
        "error": None,
    }
    values.update(changes)
    return AuxiliaryRunRow.from_row(values)


def test_spawn_plans_a_pending_insert_and_replays_the_same_spec() -> None:
    evidence = _evidence()
    spec = AuxiliaryRunSpec(
        ExecutionFrame.root(evidence.target), "k", "i", evidence.snapshot_digest
    ).with_id("aux-1")
    checked = check_spawn(spec, evidence)
    plan = decide_spawn(at(None), checked, now=ms(10), owner="h:1:t", actor=ACTOR)
    assert isinstance(plan, WritePlan)
    (write,) = plan.writes
    assert write.statement is Statement.INSERT_AUXILIARY_RUN
    assert write.params["state"] == "PENDING"
    assert write.params["spec_digest"] == spec.digest()
    assert write.params["spec_json"] == canonical_json(spec.public())
    assert write.params["parent_json"] == canonical_json(spec.frame.public())
    assert [placed.event.event_type for placed in plan.events] == ["AUXILIARY_RUN_SPAWNED"]
    row = _row(dict(write.params))
    replay = decide_spawn(at(row), checked, now=ms(11), owner="h:2:t", actor=ACTOR)
    assert replay.response["idempotent"] is True
    changed = check_spawn(attrs.evolve(spec, instruction="other"), evidence)
    with pytest.raises(AuxiliaryRunError, match="SPEC_CONFLICT"):
        decide_spawn(at(row), changed, now=ms(1), owner="o", actor=ACTOR)
    with pytest.raises(AuxiliaryRunError, match="INVALID_FIELD"):
        decide_spawn(at(None), spec, now=ms(1), owner="o", actor=ACTOR)  # type: ignore[arg-type]


def test_check_spawn_refuses_another_target_and_forged_evidence() -> None:
    evidence = _evidence()
    other = AuxiliaryRunSpec(
        ExecutionFrame.root(ExecutionTarget("s", "other")), "k", "i", evidence.snapshot_digest
    )
    with pytest.raises(AuxiliaryRunError, match="TARGET_MISMATCH"):
        check_spawn(other, evidence)
    spec = AuxiliaryRunSpec(
        ExecutionFrame.root(evidence.target), "k", "i", evidence.snapshot_digest
    )
    forged = attrs.evolve(evidence, truncated=True)
    with pytest.raises(AuxiliaryRunError, match="EVIDENCE_DIGEST_MISMATCH"):
        check_spawn(spec, forged)


def test_a_checked_spawn_stores_the_spec_as_it_was_checked() -> None:
    """The output schema is a dict: changing it after the check changes nothing written."""
    evidence = _evidence()
    schema: dict[str, Any] = {"type": "object"}
    spec = AuxiliaryRunSpec(
        ExecutionFrame.root(evidence.target),
        "k",
        "i",
        evidence.snapshot_digest,
        output_schema=schema,
    ).with_id("aux-2")
    checked = check_spawn(spec, evidence)
    as_checked = canonical_json(spec.public())
    schema["type"] = "array"
    plan = decide_spawn(at(None), checked, now=ms(10), owner="h:1:t", actor=ACTOR)
    assert isinstance(plan, WritePlan)
    assert plan.writes[0].params["spec_json"] == as_checked
    assert plan.writes[0].params["spec_digest"] == checked.spec_digest


@pytest.mark.parametrize(
    "parent_json",
    [
        "not json",
        "{}",
        '{"target":{"session_id":"s","run_id":"r"},"depth":1,"parent_id":null}',
        '{"target":{"session_id":"s","run_id":"r"},"depth":0,"parent_id":"aux-0"}',
    ],
)
def test_a_row_with_a_corrupt_parent_frame_is_refused_every_time(parent_json: str) -> None:
    spec, plan = _spawned("h:1:t")
    good = _row(dict(plan.writes[0].params))
    assert good.snapshot().parent == spec.frame
    corrupt = _row(dict(plan.writes[0].params), parent_json=parent_json)
    for _ in range(2):  # a refusal is never remembered as an answer
        with pytest.raises(AuxiliaryRunError) as refused:
            corrupt.snapshot()
        assert refused.value.code == "RUN_ROW_CORRUPT"
        with pytest.raises(AuxiliaryRunError, match="RUN_ROW_CORRUPT"):
            decide_transition(at(corrupt), move(AuxiliaryRunState.RUNNING), now=ms(11), actor=ACTOR)
    assert good.snapshot().parent == spec.frame


def test_transitions_are_guarded_and_recovery_fails_dead_owners() -> None:
    _, plan = _spawned("dead:1:t")
    row = _row(dict(plan.writes[0].params))
    started = decide_transition(at(row), move(AuxiliaryRunState.RUNNING), now=ms(5), actor=ACTOR)
    (write,) = started.writes
    assert write.guarded
    assert write.params["expected_revision"] == 1
    assert write.params["updated_at_ms"] == 10  # never before created_at_ms
    with pytest.raises(AuxiliaryRunError) as refused:
        decide_transition(at(row), move(AuxiliaryRunState.COMPLETED), now=ms(11), actor=ACTOR)
    assert refused.value.code == "INVALID_TRANSITION"
    with pytest.raises(AuxiliaryRunError, match="state"):
        # A failure needs an error.
        decide_transition(at(row), move(AuxiliaryRunState.FAILED), now=ms(11), actor=ACTOR)
    with pytest.raises(AuxiliaryRunError, match="RUN_NOT_FOUND"):
        decide_transition(at(None), move(AuxiliaryRunState.RUNNING, "x"), now=ms(11), actor=ACTOR)
    pending_recovery = decide_recover_interrupted(unfinished(row), DEAD, now=ms(20), actor=ACTOR)
    assert [w.params["expected_revision"] for w in pending_recovery.writes] == [1]
    running = attrs.evolve(row, state="RUNNING", revision=2)
    done = attrs.evolve(row, state="COMPLETED", revision=3, output_json="1", output_digest=OUT)
    recovery = decide_recover_interrupted(
        unfinished(running, done, attrs.evolve(running, aux_id="aux-2", owner="alive:1:t")),
        DEAD,
        now=ms(20),
        actor=ACTOR,
    )
    assert recovery.response == {"recovered": ["aux-1"]}
    assert [w.params["error_code"] for w in recovery.writes] == ["INTERRUPTED"]
    assert [placed.event.event_type for placed in recovery.events] == ["AUXILIARY_RUN_FAILED"]


def test_a_transition_answers_the_row_it_writes_and_seals_its_event() -> None:
    _, plan = _spawned("h:1:t")
    row = _row(dict(plan.writes[0].params))
    assert plan.tail is not None
    started = decide_transition(
        at(row, plan.tail), move(AuxiliaryRunState.RUNNING), now=ms(15), actor=ACTOR
    )
    after = started.response
    assert after == attrs.evolve(row, state="RUNNING", revision=2, updated_at_ms=15)
    spawned, moved = plan.events[0].seal, started.events[0].seal
    assert (spawned.event_id, spawned.chain, spawned.chain_seq) == (1, LEDGER_CHAIN, 1)
    assert spawned.prev_seal == GENESIS_SEAL
    assert (moved.event_id, moved.chain_seq, moved.prev_seal) == (2, 2, spawned.seal)


def test_recovery_seals_its_failures_one_after_the_other() -> None:
    _, plan = _spawned("dead:1:t")
    row = _row(dict(plan.writes[0].params))
    rows = unfinished(row, attrs.evolve(row, aux_id="aux-2"))
    recovery = decide_recover_interrupted(rows, DEAD, now=ms(20), actor=ACTOR)
    first, second = (placed.seal for placed in recovery.events)
    assert recovery.tail is not None
    assert [first.chain_seq, second.chain_seq] == [1, 2]
    assert second.prev_seal == first.seal
    assert recovery.tail == LogTail.read(3, [], [recovery.tail.tips[LEDGER_CHAIN]])


def test_stopping_leaves_an_ended_run_as_it_ended() -> None:
    _, plan = _spawned("h:1:t")
    row = _row(dict(plan.writes[0].params))
    error = AuxiliaryRunError("CANCELLED", "stopped")
    stopped = decide_stop(at(row), AuxiliaryStopRequest("aux-1", error), now=ms(20), actor=ACTOR)
    assert stopped is not None
    assert stopped.response.state == "CANCELLED"
    ended = stopped.response
    assert (
        decide_stop(at(ended), AuxiliaryStopRequest("aux-1", error), now=ms(21), actor=ACTOR)
        is None
    )
    with pytest.raises(AuxiliaryRunError, match="RUN_NOT_FOUND"):
        decide_stop(at(None), AuxiliaryStopRequest("gone", error), now=ms(21), actor=ACTOR)


def test_plans_are_golden(golden: SnapshotAssertion) -> None:
    """A run's whole life on the ledger chain: each plan sealed onto the tail the last left."""
    _, spawned = _spawned("dead:1:t")
    row = _row(dict(spawned.writes[0].params))
    assert spawned.tail is not None
    started = decide_transition(
        at(row, spawned.tail), move(AuxiliaryRunState.RUNNING), now=ms(12), actor=ACTOR
    )
    output = AuxiliaryRunOutput(value={"verdict": "fine"}, digest=OUT, size_bytes=20)
    assert started.tail is not None
    completed = decide_transition(
        at(started.response, started.tail),
        move(AuxiliaryRunState.COMPLETED, output=output),
        now=ms(13),
        actor=ACTOR,
    )
    recovered = decide_recover_interrupted(
        unfinished(row, tail=spawned.tail), DEAD, now=ms(14), actor=ACTOR
    )
    plans = {
        "spawn": spawned,
        "start": started,
        "complete": completed,
        "recover": recovered,
    }
    assert golden == {name: attrs.asdict(plan) for name, plan in plans.items()}
