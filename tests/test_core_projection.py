"""The projection decisions, pure: no database, golden plans."""

from __future__ import annotations

import json
from typing import Any

import attrs
import pytest
from aios_ledger.core import (
    ChainTip,
    EventRow,
    IdempotencyRow,
    InitialExecutionProjectionError,
    LogTail,
    Replay,
    TaskRow,
    Timestamp,
    WritePlan,
    canonical_json,
    chain_of,
)
from aios_ledger.core.actors import Actor
from aios_ledger.core.digests import sha256_hex
from aios_ledger.core.log import LEDGER_CHAIN
from aios_ledger.core.log.plan import request_digest
from aios_ledger.core.projection import (
    BindingState,
    ProjectionCommand,
    ProjectionState,
    ResolverCall,
    decide_projection,
    decide_register_binding,
    prepare_projection,
)
from aios_ledger.shell import AUTHORIZATION_ENV
from aios_ledger.shell.contracts import SOURCE_CAPTURE_RESULT, result_contract
from legacy_fixtures import (
    OWNER,
    REWORK,
    REWORK_TRAIL,
    TASK,
    binding,
    capture_result,
    projection_request,
    recovery_request,
    runtime_envelope,
    runtime_input,
)
from syrupy.assertion import SnapshotAssertion

# Who the decisions here act as.
ACTOR = Actor("tester", "library")

NOW = Timestamp.parse("2026-09-01T12:00:00Z")
CONTRACT = result_contract(SOURCE_CAPTURE_RESULT)


def task_row(**changes: Any) -> TaskRow:
    row = TaskRow(
        task_id=TASK,
        goal=str(runtime_input()["goal"]),
        instructions=str(runtime_input()["instructions"]),
        success_criteria_json=json.dumps(runtime_input()["success_criteria"]),
        required_capabilities_json="[]",
        constraints_json=json.dumps(runtime_input()["constraints"]),
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
        created_at="2026-08-20T00:00:00Z",
        updated_at="2026-08-20T00:00:00Z",
    )
    return row._replace(**changes)


def events(trail: Any = (("TASK_CREATED", {}),)) -> tuple[EventRow, ...]:
    return tuple(
        EventRow(index, TASK, None, kind, json.dumps(payload), "2026-08-20T00:00:00Z")
        for index, (kind, payload) in enumerate(trail, 1)
    )


def tail_after(events: tuple[EventRow, ...]) -> LogTail:
    """The log's tail after the task's events, which its chain holds (and a few others)."""
    chain = chain_of(TASK)
    tip = ChainTip(chain, len(events), "sha256:" + "e" * 64)
    return LogTail.read(len(events) + 7, [chain], [tip])


def state_of(
    task: TaskRow | None, trail: tuple[EventRow, ...], prior: IdempotencyRow | None = None
) -> ProjectionState:
    return ProjectionState(task=task, events=trail, prior=prior, tail=tail_after(trail))


def plan_view(plan: WritePlan[Any]) -> dict[str, Any]:
    return {
        "writes": [attrs.asdict(write) for write in plan.writes],
        "events": [attrs.asdict(event) for event in plan.events],
        "response": plan.response,
    }


def test_initial_projection_plan_is_golden(golden: SnapshotAssertion) -> None:
    plan = decide_projection(
        state_of(task_row(), events()),
        ProjectionCommand(TASK, projection_request()),
        now=NOW,
        envelope=runtime_envelope(),
        authorization_id=OWNER,
        source_capture_contract=CONTRACT,
        actor=ACTOR,
    )
    assert isinstance(plan, WritePlan)
    assert [write.guarded for write in plan.writes] == [True, False]
    assert golden == plan_view(plan)


def test_recovery_plan_is_golden(golden: SnapshotAssertion) -> None:
    result, verification = capture_result(), REWORK
    task = task_row(
        attempt=1,
        revision=5,
        result_json=canonical_json(result),
        verification_json=canonical_json(verification),
    )
    plan = decide_projection(
        state_of(task, events(REWORK_TRAIL)),
        ProjectionCommand(TASK, recovery_request()),
        now=NOW,
        envelope=runtime_envelope(),
        authorization_id=OWNER,
        source_capture_contract=CONTRACT,
        actor=ACTOR,
    )
    assert isinstance(plan, WritePlan)
    assert golden == plan_view(plan)


def test_prepare_names_the_envelope_to_resolve() -> None:
    state = state_of(task_row(), events())
    command = ProjectionCommand(TASK, projection_request())
    call = prepare_projection(state, command, authorization_id=OWNER)
    assert call == ResolverCall(
        TASK, "job-legacy-1", "agent.runtime.openclaw", "openclaw", runtime_input()
    )


def test_prior_answer_replays_whatever_the_task_now_is() -> None:
    request = projection_request()
    digest = request_digest("project", TASK, request.public())
    prior = IdempotencyRow(request.idempotency_key, digest, '{"revision": 2}')
    moved_on = state_of(task_row(status="SUCCEEDED", revision=9), (), prior)
    command = ProjectionCommand(TASK, request)
    answer = prepare_projection(moved_on, command, authorization_id=OWNER)
    assert isinstance(answer, Replay)
    assert dict(answer.response) == {"revision": 2, "idempotent": True}
    conflicting = prior._replace(request_sha256="0" * 64)
    with pytest.raises(InitialExecutionProjectionError, match="IDEMPOTENCY_CONFLICT"):
        prepare_projection(
            attrs.evolve(moved_on, prior=conflicting), command, authorization_id=OWNER
        )


def test_authorization_comes_before_replay() -> None:
    request = projection_request()
    digest = request_digest("project", TASK, request.public())
    prior = IdempotencyRow(request.idempotency_key, digest, "{}")
    state = state_of(task_row(), events(), prior)
    command = ProjectionCommand(TASK, request)
    for configured in (None, "someone-else"):
        with pytest.raises(InitialExecutionProjectionError, match="AUTHORIZATION_DENIED") as denied:
            prepare_projection(state, command, authorization_id=configured)
        # The refusal names the setting to configure (or to ask the owner about).
        assert AUTHORIZATION_ENV in denied.value.detail


def test_a_digest_refusal_says_which_value_was_expected_and_which_was_found() -> None:
    wrong = "0" * 64
    found = sha256_hex({})
    for field, code in (
        ("expected_metadata_sha256", "METADATA_DIGEST_MISMATCH"),
        ("expected_required_capabilities_sha256", "REQUIRED_CAPABILITIES_DIGEST_MISMATCH"),
    ):
        request = projection_request(**{field: wrong})
        state = state_of(task_row(), events())
        with pytest.raises(InitialExecutionProjectionError, match=f"^{code}: ") as refused:
            decide_projection(
                state,
                ProjectionCommand(TASK, request),
                now=NOW,
                envelope=runtime_envelope(),
                authorization_id=OWNER,
                source_capture_contract=CONTRACT,
                actor=ACTOR,
            )
        expected = found if code.startswith("METADATA") else sha256_hex([])
        assert f"sha256 {expected}, the request expects {wrong}" in refused.value.detail


def test_binding_plan_is_golden(golden: SnapshotAssertion) -> None:
    """A registered binding is a ledger-level event: the task's own chain is left alone."""
    tail = LogTail.read(3, [LEDGER_CHAIN], [ChainTip(LEDGER_CHAIN, 2, "sha256:" + "2" * 64)])
    plan = decide_register_binding(BindingState(None, tail), binding(), now=NOW, actor=ACTOR)
    assert isinstance(plan, WritePlan)
    assert [placed.seal.chain for placed in plan.events] == [LEDGER_CHAIN]
    assert golden == attrs.asdict(plan)
