"""The pure task lifecycle: the transition table walked against every decision, strict requests,
and golden snapshots of representative plans. No database here."""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from pathlib import Path
from typing import Any, Literal

import attrs
import pytest
from aios_ledger.core import (
    CancelRequest,
    ChainTip,
    ClaimRequest,
    ExpireRequest,
    ExpiryState,
    HeartbeatRequest,
    LedgerError,
    LogTail,
    Replay,
    RetryRequest,
    Statement,
    SubmitRequest,
    TaskCreateCommand,
    TaskCreateRequest,
    TaskRow,
    TaskState,
    TaskStatus,
    Timestamp,
    VerifyRequest,
    WritePlan,
    chain_of,
    decide_cancel,
    decide_claim,
    decide_create,
    decide_expire,
    decide_heartbeat,
    decide_retry,
    decide_submit,
    decide_verify,
    lease_token_sha256,
)
from aios_ledger.core.actors import Actor
from aios_ledger.core.tasks import (
    ABSENT,
    TASK_TRANSITIONS,
    TERMINAL_STATUSES,
    TaskOperation,
    first_claimable,
    next_task_status,
)
from aios_ledger.core.tasks.operations import TASK_OPERATIONS, decide_task
from aios_ledger.core.tasks.requests import PauseRequest, ReleaseRequest, ResumeRequest
from aios_ledger.core.tasks.transitions import TASK_RELEASED
from hypothesis import given, settings
from hypothesis import strategies as st
from syrupy.assertion import SnapshotAssertion

# Who the decisions here act as.
ACTOR = Actor("tester", "library")

NOW = Timestamp.parse("2026-08-20T00:00:10Z")
TOKEN = "lease-token-0123456789abcdef"
JITTER = 0.5
ROOT = Path(__file__).resolve().parents[1]
CHAIN = chain_of("t1")
# The log a task at revision 4 has behind it: its chain holds four events, forty in all.
HISTORY = LogTail.read(41, [CHAIN], [ChainTip(CHAIN, 4, "sha256:" + "4" * 64)])
FRESH = LogTail.read(1, [CHAIN], [])


def row(status: str, **changes: Any) -> TaskRow:
    held = status == "CLAIMED"
    base = TaskRow(
        task_id="t1",
        goal="g",
        instructions="i",
        success_criteria_json="[]",
        required_capabilities_json="[]",
        constraints_json="{}",
        metadata_json="{}",
        deadline=None,
        priority=0,
        max_attempts=3,
        attempt=1 if status != "QUEUED" else 0,
        status=status,
        claimed_by="w1" if held else None,
        lease_token_hash=lease_token_sha256(TOKEN) if held else None,
        lease_expires_at="2026-08-20T00:01:00Z" if held else None,
        result_json='{"ok":true}' if status not in ("QUEUED", "CLAIMED") else None,
        result_digest=None,
        result_idempotency_key=None,
        verification_json=None,
        revision=4,
        created_at="2026-08-20T00:00:00Z",
        updated_at="2026-08-20T00:00:00Z",
    )
    return base._replace(**changes)


def plan_json(plan: object) -> Any:
    assert isinstance(plan, WritePlan | Replay)
    return attrs.asdict(plan, value_serializer=lambda _i, _a, value: value)


# Each operation of the table, applied to a task of `status` through its decision.
def _claim(task: TaskRow) -> object:
    request = ClaimRequest.from_mapping(
        {"agent_id": "w2", "capabilities": [], "lease_seconds": 60, "task_id": "t1"}
    )
    return decide_claim(TaskState(task, HISTORY), request, now=NOW, lease_token=TOKEN, actor=ACTOR)


def _heartbeat(task: TaskRow) -> object:
    request = HeartbeatRequest.from_mapping(
        {"task_id": "t1", "lease_token": TOKEN, "lease_seconds": 60}
    )
    return decide_heartbeat(TaskState(task, HISTORY), request, now=NOW, actor=ACTOR)


def _release(task: TaskRow | None) -> object:
    request = ReleaseRequest.from_mapping(
        {"task_id": "t1", "lease_token": TOKEN, "reason": "worker stopped"}
    )
    return decide_task(TaskState(task, HISTORY), request, now=NOW, actor=ACTOR)


def _submit(task: TaskRow, result: Any = None) -> object:
    request = SubmitRequest.from_mapping(
        {
            "task_id": "t1",
            "lease_token": TOKEN,
            "result": {"ok": True} if result is None else result,
            "idempotency_key": "s",
        }
    )
    return decide_submit(
        TaskState(task, HISTORY), request, now=NOW, contracts={}, jitter=JITTER, actor=ACTOR
    )


def _verify(decision: str) -> Callable[[TaskRow], object]:
    def run(task: TaskRow) -> object:
        request = VerifyRequest.from_mapping(
            {"task_id": "t1", "decision": decision, "reason": "r", "idempotency_key": "v"}
        )
        return decide_verify(TaskState(task, HISTORY), request, now=NOW, jitter=JITTER, actor=ACTOR)

    return run


def _cancel(task: TaskRow) -> object:
    request = CancelRequest.from_mapping({"task_id": "t1", "reason": "r", "idempotency_key": "c"})
    return decide_cancel(TaskState(task, HISTORY), request, now=NOW, actor=ACTOR)


def _retry(task: TaskRow) -> object:
    request = RetryRequest.from_mapping(
        {"task_id": "t1", "reason": "flaky runner", "idempotency_key": "r", "extra_attempts": 2}
    )
    return decide_retry(TaskState(task, HISTORY), request, now=NOW, actor=ACTOR)


def _pause(task: TaskRow) -> object:
    request = PauseRequest.from_mapping(
        {"task_id": "t1", "reason": "freeze", "idempotency_key": "p"}
    )
    return decide_task(TaskState(task, HISTORY), request, now=NOW, actor=ACTOR)


def _resume(task: TaskRow) -> object:
    request = ResumeRequest.from_mapping(
        {"task_id": "t1", "reason": "thaw", "idempotency_key": "u"}
    )
    return decide_task(TaskState(task, HISTORY), request, now=NOW, actor=ACTOR)


def _expire(task: TaskRow) -> object:
    passed = task._replace(lease_expires_at="2026-08-20T00:00:05Z")
    return decide_expire(ExpiryState((passed,), HISTORY), ExpireRequest(), now=NOW, actor=ACTOR)


DRIVERS: dict[TaskOperation, tuple[Callable[[TaskRow], object], dict[str, Any]]] = {
    TaskOperation.CLAIM: (_claim, {}),
    TaskOperation.HEARTBEAT: (_heartbeat, {}),
    TaskOperation.RELEASE: (_release, {}),
    TaskOperation.RELEASE_EXHAUSTED: (_release, {"attempt": 3}),
    TaskOperation.SUBMIT: (_submit, {}),
    TaskOperation.VERIFY_SUCCEEDED: (_verify("SUCCEEDED"), {}),
    TaskOperation.VERIFY_FAILED: (_verify("FAILED"), {}),
    TaskOperation.REWORK: (_verify("NEEDS_REWORK"), {}),
    TaskOperation.REWORK_EXHAUSTED: (_verify("NEEDS_REWORK"), {"attempt": 3}),
    TaskOperation.CANCEL: (_cancel, {}),
    TaskOperation.RETRY: (_retry, {}),
    TaskOperation.EXPIRE: (_expire, {}),
    TaskOperation.EXPIRE_EXHAUSTED: (_expire, {"attempt": 3}),
    TaskOperation.PAUSE: (_pause, {}),
    TaskOperation.RESUME: (_resume, {}),
}


def test_every_operation_of_the_table_has_a_driver() -> None:
    assert set(DRIVERS) == set(TaskOperation) - {TaskOperation.CREATE}
    assert {operation for _, operation in TASK_TRANSITIONS} == set(TaskOperation)
    assert {status for status, _ in TASK_TRANSITIONS} <= {ABSENT, *TaskStatus}
    assert set(TASK_TRANSITIONS.values()) <= set(TaskStatus)
    assert {TaskStatus.SUCCEEDED, TaskStatus.FAILED, TaskStatus.CANCELLED} == TERMINAL_STATUSES


@pytest.mark.parametrize("status", [ABSENT, *TaskStatus])
@pytest.mark.parametrize("operation", list(TaskOperation))
def test_next_status_is_the_table(
    status: TaskStatus | Literal["ABSENT"], operation: TaskOperation
) -> None:
    if (status, operation) in TASK_TRANSITIONS:
        assert next_task_status(status, operation) == TASK_TRANSITIONS[(status, operation)]
    else:
        with pytest.raises(LedgerError, match="INVALID_TRANSITION"):
            next_task_status(status, operation)


@pytest.mark.parametrize("status", list(TaskStatus))
@pytest.mark.parametrize("operation", sorted(DRIVERS))
def test_decisions_follow_the_table(status: TaskStatus, operation: TaskOperation) -> None:
    drive, changes = DRIVERS[operation]
    task = row(status, **changes)
    allowed = (status, operation) in TASK_TRANSITIONS
    if not allowed:
        try:
            outcome = drive(task)
        except LedgerError as refused:
            # Holding a lease is checked before the transition: a task without one is fenced.
            expected = {"INVALID_TRANSITION", "LEASE_INVALID"}
            assert refused.code in expected
            return
        assert outcome is None and operation.startswith("expire")  # nothing to expire
        return
    plan = drive(task)
    assert isinstance(plan, WritePlan)
    cas = plan.writes[0]
    assert cas.guarded and cas.statement is Statement.TASKS_CAS_UPDATE
    assert cas.params["status"] == TASK_TRANSITIONS[(status, operation)]
    assert cas.params["expected_revision"] == task.revision
    assert cas.params["attempt"] == task.attempt + (1 if operation == "claim" else 0)
    (appended,) = plan.events
    # Sealed onto the task's chain where the log left it.
    seal = appended.seal
    assert (appended.event.event_id, seal.event_id, seal.chain, seal.chain_seq) == (
        41,
        41,
        CHAIN,
        5,
    )
    assert seal.prev_seal == HISTORY.tips[CHAIN].seal
    tip = ChainTip(CHAIN, 5, seal.seal, seal.chained_row_digest)
    assert plan.tail == LogTail.read(42, [], [tip])
    # A lease is held exactly while CLAIMED.
    held = cas.params["status"] == "CLAIMED"
    assert (cas.params["lease_token_hash"] is not None) == held
    assert (cas.params["claimed_by"] is not None) == held


def test_create_plan_and_replay() -> None:
    request = TaskCreateCommand.from_mapping(
        {"task": {"goal": "g", "instructions": "i"}, "idempotency_key": "k"}
    )
    fresh = LogTail.read(1, [chain_of("t9")], [])
    plan = decide_create(
        TaskState(None, fresh, next_seq=1), request, now=NOW, task_id="t9", actor=ACTOR
    )
    assert isinstance(plan, WritePlan)
    assert plan.writes[0].params["status"] == "QUEUED"
    assert plan.writes[0].params["revision"] == 1
    with pytest.raises(LedgerError, match="TASK_ALREADY_EXISTS"):
        decide_create(
            TaskState(row("QUEUED"), HISTORY, next_seq=2),
            request,
            now=NOW,
            task_id="t1",
            actor=ACTOR,
        )


def test_a_verdict_seals_the_reviewer_the_edge_named_and_only_that() -> None:
    def verdict(**acting: str) -> dict[str, Any]:
        request = VerifyRequest.from_mapping(
            {"task_id": "t1", "decision": "SUCCEEDED", "reason": "r", "idempotency_key": "v"}
            | acting
        )
        plan = decide_verify(
            TaskState(row("SUBMITTED"), HISTORY), request, now=NOW, jitter=JITTER, actor=ACTOR
        )
        assert isinstance(plan, WritePlan)
        (appended,) = plan.events
        payload = appended.event.payload()
        assert isinstance(payload, dict)
        return payload

    # The name is who the edge authenticated (an HTTP token's), sealed with the verdict.
    assert verdict(agent_id="alice")["reviewer"] == "alice"
    # A caller that names nobody seals no name (the event's agent stays nobody either way).
    assert "reviewer" not in verdict()


def test_release_requeues_or_fails_and_fences_a_stale_holder() -> None:
    released = _release(row("CLAIMED"))
    assert isinstance(released, WritePlan)
    (appended,) = released.events
    assert appended.event.event_type == TASK_RELEASED
    assert appended.event.agent_id == "w1"
    assert appended.event.payload() == {
        "attempt": 1,
        "reason": "worker stopped",
        "next_state": "QUEUED",
    }
    assert released.response["status"] == "QUEUED"
    assert released.response["attempt"] == 1  # the released attempt stays counted
    exhausted = _release(row("CLAIMED", attempt=3))
    assert isinstance(exhausted, WritePlan)
    assert exhausted.response["status"] == "FAILED"
    assert exhausted.writes[0].params["status"] == "FAILED"
    with pytest.raises(LedgerError, match="LEASE_EXPIRED"):
        _release(row("CLAIMED", lease_expires_at="2026-08-20T00:00:05Z"))
    with pytest.raises(LedgerError, match="LEASE_INVALID"):
        _release(row("CLAIMED", lease_token_hash=lease_token_sha256("another-token-0123456")))
    with pytest.raises(LedgerError, match="TASK_NOT_FOUND"):
        _release(None)


# ---------------------------------------------------------------------------------------------
# golden plans


def test_golden_plans(golden: SnapshotAssertion) -> None:
    create = TaskCreateCommand.from_mapping(
        {
            "idempotency_key": "create-t1",
            "task": {
                "task_id": "t1",
                "goal": "Supervise release preparation",
                "instructions": "Observe.",
                "success_criteria": [{"id": "heartbeat"}],
                "required_capabilities": ["git.read", "agent.runtime.openclaw", "git.read"],
                "constraints": {"production_write": False},
                "metadata": {"scope": "legacy"},
                "deadline": "2026-09-01T12:00:00+02:00",
                "priority": 100,
                "max_attempts": 20,
            },
        }
    )
    plans = {
        "create": decide_create(
            TaskState(None, FRESH, next_seq=1), create, now=NOW, task_id="t1", actor=ACTOR
        ),
        "claim": _claim(row("QUEUED")),
        "heartbeat": _heartbeat(row("CLAIMED")),
        "submit": _submit(row("CLAIMED")),
        "verify_needs_rework": _verify("NEEDS_REWORK")(row("SUBMITTED")),
        "cancel": _cancel(row("SUBMITTED")),
        "expire_exhausted": _expire(row("CLAIMED", attempt=3)),
        "retry_failed": _retry(row("FAILED", attempt=3)),
        "submit_auto_accepted": _submit(
            row("CLAIMED", verification_mode="auto"), {"status": "SUCCEEDED"}
        ),
        "submit_auto_requeued": _submit(
            row("CLAIMED", verification_mode="auto", retry_base_seconds=5),
            {"status": "FAILED", "failure": "timeout", "summary": "timeout: after 30s"},
        ),
    }
    assert golden == {name: plan_json(plan) for name, plan in plans.items()}


def test_golden_release_plan(golden: SnapshotAssertion) -> None:
    assert golden == plan_json(_release(row("CLAIMED")))


def _create_t1() -> object:
    create = TaskCreateCommand.from_mapping(
        {
            "idempotency_key": "create-t1",
            "task": {"task_id": "t1", "goal": "g", "instructions": "i"},
        }
    )
    return decide_create(
        TaskState(None, FRESH, next_seq=1), create, now=NOW, task_id="t1", actor=ACTOR
    )


# One plan of each operation of the transition table, from the task it starts from: a new
# operation is a row of the table and an entry here, whose golden plan is then recorded.
OPERATION_PLANS: dict[str, Callable[[], object]] = {
    "create": _create_t1,
    "claim": lambda: _claim(row("QUEUED")),
    "heartbeat": lambda: _heartbeat(row("CLAIMED")),
    "release": lambda: _release(row("CLAIMED")),
    "submit": lambda: _submit(row("CLAIMED")),
    "verify": lambda: _verify("SUCCEEDED")(row("SUBMITTED")),
    "cancel": lambda: _cancel(row("QUEUED")),
    "retry": lambda: _retry(row("CANCELLED")),
    "expire": lambda: _expire(row("CLAIMED")),
    "pause": lambda: _pause(row("QUEUED")),
    "resume": lambda: _resume(row("PAUSED")),
}


def test_every_operation_of_the_transition_table_has_a_golden_plan(
    golden: SnapshotAssertion,
) -> None:
    assert set(OPERATION_PLANS) == set(TASK_OPERATIONS)
    assert golden == {name: plan_json(build()) for name, build in OPERATION_PLANS.items()}


def test_each_operation_seals_the_event_its_row_names() -> None:
    for name, build in OPERATION_PLANS.items():
        plan = build()
        assert isinstance(plan, WritePlan)
        assert plan.events[0].event.event_type == TASK_OPERATIONS[name].event


# ---------------------------------------------------------------------------------------------
# strict requests


REQUESTS: list[Any] = [
    TaskCreateRequest,
    ClaimRequest,
    HeartbeatRequest,
    SubmitRequest,
    VerifyRequest,
    CancelRequest,
    RetryRequest,
]
json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=30),
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=10), inner, max_size=4)
    ),
    max_leaves=20,
)
fields = st.sampled_from(
    [
        "task_id",
        "goal",
        "instructions",
        "agent_id",
        "capabilities",
        "lease_seconds",
        "lease_token",
        "result",
        "idempotency_key",
        "decision",
        "reason",
        "priority",
        "max_attempts",
        "deadline",
        "metadata",
        "verification",
        "retry",
        "not_before",
        "extra_attempts",
    ]
)


@settings(max_examples=200, deadline=None)
@given(kind=st.sampled_from(REQUESTS), raw=st.dictionaries(fields, json_values) | json_values)
def test_requests_refuse_any_shape_with_a_ledger_error(kind: Any, raw: Any) -> None:
    with contextlib.suppress(LedgerError):
        kind.from_mapping(raw)


def test_lease_tokens_stay_out_of_reprs_and_digests() -> None:
    request = SubmitRequest.from_mapping(
        {"task_id": "t1", "lease_token": TOKEN, "result": {}, "idempotency_key": "k"}
    )
    assert TOKEN not in repr(request)
    assert TOKEN not in str(request.public())


# ---------------------------------------------------------------------------------------------
# purity


def test_an_enveloped_task_without_its_contract_refuses_results() -> None:
    from aios_ledger.core import canonical_json
    from test_tasks_support import SEED_TASK_ID, runtime_result, seed_envelope

    task = row(
        "CLAIMED",
        task_id=SEED_TASK_ID,
        metadata_json=canonical_json({"execution": seed_envelope()}),
    )
    request = SubmitRequest.from_mapping(
        {
            "task_id": SEED_TASK_ID,
            "lease_token": TOKEN,
            "result": runtime_result(),
            "idempotency_key": "s",
        }
    )
    with pytest.raises(LedgerError, match="RESULT_CONTRACT_UNKNOWN"):
        decide_submit(
            TaskState(task, HISTORY), request, now=NOW, contracts={}, jitter=JITTER, actor=ACTOR
        )


def test_the_create_digest_covers_every_field_of_the_request() -> None:
    day_two = {
        "verification": "auto",
        "retry": {"base_seconds": 5, "max_seconds": 60},
        "not_before": "2026-08-21T00:00:00Z",
        "budget": {"wall_seconds": 60, "cost": {"micros": 2_500_000, "currency": "EUR"}},
        "governed": True,
    }
    request = TaskCreateRequest.from_mapping({"goal": "g", "instructions": "i", **day_two})
    assert set(request.public()) == set(attrs.fields_dict(TaskCreateRequest))
    assert request.public() == attrs.asdict(request)


def test_a_task_asked_for_as_before_keeps_its_digest() -> None:
    """Day two's fields at their defaults stay out of the canonical form, so a key first used
    by an older version replays instead of conflicting."""
    request = TaskCreateRequest.from_mapping({"goal": "g", "instructions": "i"})
    assert set(request.public()) == set(attrs.fields_dict(TaskCreateRequest)) - {
        "verification",
        "retry",
        "not_before",
        "budget",
        "governed",
    }


def test_memoised_timestamps_still_refuse_and_drop_sub_milliseconds() -> None:
    from datetime import UTC, datetime

    for _ in range(2):  # a refusal is never remembered as an answer
        with pytest.raises(LedgerError) as refused:
            Timestamp.parse("2026-08-20T00:00:00", field="deadline")
        assert refused.value.code == "TIMESTAMP_INVALID"
        assert "deadline" in refused.value.detail
    moment = datetime(2026, 8, 20, 0, 0, 59, 999_999, tzinfo=UTC)
    assert Timestamp.from_datetime(moment).text == "2026-08-20T00:00:59.999Z"
    assert (
        Timestamp.parse("2026-08-20T00:00:59Z").plus_seconds(1).text == "2026-08-20T00:01:00.000Z"
    )
    assert str(Timestamp.parse("2026-08-20T00:00:59+00:00").plus_seconds(1)) == (
        "2026-08-20T00:01:00.000Z"
    )


@pytest.mark.parametrize(
    "text", ["not json", '{"a": 1}', "[1, 2]", '["ok", null]', "[" * 100 + "]" * 100]
)
def test_a_corrupt_capability_list_is_refused_every_time(text: str) -> None:
    task = row("QUEUED", required_capabilities_json=text)
    for _ in range(2):  # the memo keeps no refusal as an answer
        with pytest.raises(LedgerError) as refused:
            task.required_capabilities()
        assert refused.value.code == "TASK_ROW_CORRUPT"


def test_capability_lists_read_back_are_the_callers_own() -> None:
    task = row("QUEUED", required_capabilities_json='["git", "python"]')
    first = task.required_capabilities()
    first.append("mutated")
    assert task.required_capabilities() == ["git", "python"]
    huge = '["' + "a" * 20_000 + '"]'  # larger than any valid list: read, never remembered
    assert row("QUEUED", required_capabilities_json=huge).required_capabilities() == ["a" * 20_000]


def test_the_core_chooses_what_a_claimer_takes_reading_no_more_than_it_needs() -> None:
    tasks = [
        row("QUEUED", task_id="needs-git", required_capabilities_json='["git"]'),
        row("QUEUED", task_id="a"),
        row("QUEUED", task_id="used-up", attempt=3),
        row("QUEUED", task_id="b"),
        row("QUEUED", task_id="c"),
    ]
    read: list[str] = []

    def candidates() -> Any:
        for task in tasks:
            read.append(task.task_id)
            yield task

    chosen = first_claimable(candidates(), [], NOW, 2)
    assert [task.task_id for task in chosen] == ["a", "b"]
    assert read == ["needs-git", "a", "used-up", "b"]
    assert [task.task_id for task in first_claimable(tasks, ["git"], NOW, 1)] == ["needs-git"]
