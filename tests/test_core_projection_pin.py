"""`prepare_pin` and `pin_projection`, pure: the projection request pinned to what was read, a
golden snapshot of it, its refusals, and the seed's decision refusing it once the task moved."""

from __future__ import annotations

import json
from typing import Any

import attrs
import pytest
from aios_ledger.core import (
    ChainTip,
    EventRow,
    InitialExecutionProjectionError,
    LogTail,
    TaskRow,
    Timestamp,
    WritePlan,
    canonical_json,
    chain_of,
    sha256_hex,
)
from aios_ledger.core.actors import Actor
from aios_ledger.core.projection import (
    BindingRow,
    PinCommand,
    PinnedProjection,
    PinRead,
    ProjectionCommand,
    ProjectionState,
    decide_projection,
    pin_projection,
    prepare_pin,
)
from aios_ledger.shell.contracts import SOURCE_CAPTURE_RESULT, result_contract
from legacy_fixtures import (
    OWNER,
    TASK,
    binding,
    projection_mapping,
    runtime_envelope,
    runtime_input,
)
from syrupy.assertion import SnapshotAssertion

# Who the decisions here act as.
ACTOR = Actor("tester", "library")

NOW = Timestamp.parse("2026-09-01T12:00:00Z")
ADAPTER = "openclaw"


def task_row(**changes: Any) -> TaskRow:
    inputs = runtime_input()
    row = TaskRow(
        task_id=TASK,
        goal=str(inputs["goal"]),
        instructions=str(inputs["instructions"]),
        success_criteria_json=json.dumps(inputs["success_criteria"]),
        required_capabilities_json="[]",
        constraints_json=json.dumps(inputs["constraints"]),
        metadata_json="{}",
        deadline=None,
        priority=10,
        max_attempts=3,
        attempt=0,
        status="QUEUED",
        claimed_by=None,
        lease_token_hash=None,
        lease_expires_at=None,
        result_json=None,
        result_digest=None,
        result_idempotency_key=None,
        verification_json=None,
        revision=1,
        created_at="2026-08-20T00:00:00.000Z",
        updated_at="2026-08-20T00:00:00.000Z",
    )
    return row._replace(**changes)


def binding_row(**overrides: Any) -> BindingRow:
    public = binding(**overrides).public()
    return BindingRow(
        task_id=public["task_id"],
        job_id=public["job_id"],
        binding_json=canonical_json(public),
        binding_sha256=sha256_hex(public),
        created_at="2026-08-20T00:00:00.000Z",
    )


def read(task: TaskRow | None = None, *bindings: BindingRow) -> PinRead:
    return PinRead(
        task_id=TASK,
        task=task_row() if task is None else task,
        bindings=bindings or (binding_row(),),
    )


def command(**changes: Any) -> PinCommand:
    return attrs.evolve(PinCommand(adapter=ADAPTER, authorization_id=OWNER), **changes)


def pinned(seen: PinRead | None = None, pin: PinCommand | None = None) -> PinnedProjection:
    seen, pin = seen or read(), pin or command()
    call = prepare_pin(seen, pin)
    return pin_projection(seen, pin, call, runtime_envelope())


def test_the_pinned_projection_is_golden(golden: SnapshotAssertion) -> None:
    seen = read()
    call = prepare_pin(seen, command())
    decided = pin_projection(seen, command(), call, runtime_envelope())
    assert {
        "resolver_call": attrs.asdict(call),
        "request": decided.request.public(),
        "authorized": decided.authorized,
    } == golden


def test_the_request_pins_every_expected_value_a_hand_written_request_would() -> None:
    request = pinned().request.public()
    by_hand = projection_mapping()
    assert {key: request[key] for key in by_hand if key not in {"idempotency_key", "reason"}} == {
        key: value for key, value in by_hand.items() if key not in {"idempotency_key", "reason"}
    }


def test_the_key_is_derived_from_what_is_pinned_unless_given() -> None:
    first, again = pinned().request, pinned().request
    assert first == again and first.idempotency_key.startswith("pin-")
    moved = pinned(read(task_row(metadata_json='{"note": 1}'))).request
    assert moved.idempotency_key != first.idempotency_key
    assert pinned(pin=command(idempotency_key="mine")).request.idempotency_key == "mine"
    assert pinned(pin=command(reason="why")).request.reason == "why"


def state(task: TaskRow) -> ProjectionState:
    events = (EventRow(1, TASK, None, "TASK_CREATED", "{}", "2026-08-20T00:00:00.000Z"),)
    tail = LogTail.read(8, [chain_of(TASK)], [ChainTip(chain_of(TASK), 1, "sha256:" + "e" * 64)])
    return ProjectionState(task=task, events=events, prior=None, tail=tail)


def decide(task: TaskRow, pin: PinnedProjection) -> object:
    return decide_projection(
        state(task),
        ProjectionCommand(TASK, pin.request),
        now=NOW,
        envelope=runtime_envelope(),
        authorization_id=OWNER,
        source_capture_contract=result_contract(SOURCE_CAPTURE_RESULT),
        actor=ACTOR,
    )


@pytest.mark.parametrize(
    ("moved", "code"),
    [
        ({"revision": 3}, "REVISION_CONFLICT"),  # paused and resumed meanwhile
        ({"claimed_by": "worker-1", "status": "CLAIMED", "attempt": 1}, "TASK_ALREADY_CLAIMED"),
        ({"metadata_json": '{"note": 1}'}, "METADATA_DIGEST_MISMATCH"),
    ],
)
def test_a_pin_of_a_stale_read_is_refused_by_the_projection_with_its_own_code(
    moved: dict[str, Any], code: str
) -> None:
    pin = pinned()
    assert isinstance(decide(task_row(), pin), WritePlan)  # the task as read: it projects
    with pytest.raises(InitialExecutionProjectionError) as refused:
        decide(task_row(**moved), pin)
    assert refused.value.code == code


@pytest.mark.parametrize(
    ("seen", "pin", "code"),
    [
        (read(), command(authorization_id=None), "AUTHORIZATION_DENIED"),
        (PinRead(TASK, None, (binding_row(),)), command(), "TASK_NOT_FOUND"),
        (read(task_row(claimed_by="worker-1")), command(), "TASK_ALREADY_CLAIMED"),
        (
            read(task_row(lease_expires_at="2026-08-20T00:01:00.000Z")),
            command(),
            "ACTIVE_LEASE_DENY",
        ),
        (
            read(task_row(metadata_json='{"execution": {}}')),
            command(),
            "TASK_EXECUTION_ALREADY_PROJECTED",
        ),
        (
            read(task_row(required_capabilities_json='["python"]')),
            command(),
            "TASK_INITIAL_CAPABILITIES_MUST_BE_EMPTY",
        ),
        (PinRead(TASK, task_row(), ()), command(), "GOVERNED_BINDING_NOT_FOUND"),
        (
            read(None, binding_row(), binding_row(job_id="job-2")),
            command(),
            "GOVERNED_BINDING_AMBIGUOUS",
        ),
        (read(), command(adapter="two words"), "FIELDS_INVALID"),
        (read(), command(job_id="/job"), "FIELDS_INVALID"),
    ],
)
def test_prepare_pin_refuses_before_anything_is_resolved(
    seen: PinRead, pin: PinCommand, code: str
) -> None:
    with pytest.raises(InitialExecutionProjectionError) as refused:
        prepare_pin(seen, pin)
    assert refused.value.code == code


def test_a_named_job_is_resolved_even_among_several_bindings() -> None:
    seen = read(None, binding_row(), binding_row(job_id="job-2"))
    assert prepare_pin(seen, command(job_id="job-2")).job_id == "job-2"


@pytest.mark.parametrize(
    ("seen", "envelope", "code"),
    [
        (read(), {"not": "an envelope"}, "EXECUTION_ENVELOPE_INVALID"),
        (read(), runtime_envelope(binding(job_id="job-2")), "GOVERNED_BINDING_CONFLICT"),
        (read(task_row(revision=2)), runtime_envelope(), "INITIAL_STATE_REQUIRED"),
    ],
)
def test_decide_pin_refuses_an_envelope_or_a_task_the_projection_would_refuse(
    seen: PinRead, envelope: object, code: str
) -> None:
    call = prepare_pin(seen, command())
    with pytest.raises(InitialExecutionProjectionError) as refused:
        pin_projection(seen, command(), call, envelope)
    assert refused.value.code == code
