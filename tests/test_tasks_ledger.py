"""The task lifecycle through `TaskLedger`: the seed's trail, every refusal, replays, fencing,
result contracts, claim order and the index, and refused calls that change nothing."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Callable, Iterator
from functools import partial
from pathlib import Path
from typing import Any

import apsw
import apsw.ext
import pytest
from aios_ledger.core import ClaimAnswer, LedgerError, lease_token_sha256
from aios_ledger.core.actors import Actor
from aios_ledger.core.projection import (
    InitialExecutionProjectionRequest,
    SourceCaptureProjectionRecoveryRequest,
)
from aios_ledger.core.tasks.queries import MAX_LIST
from aios_ledger.shell.clock import AUTHORIZATION_ENV
from aios_ledger.shell.db.run import Connection
from aios_ledger.shell.db.statements import sql
from aios_ledger.shell.projection.store import InitialExecutionProjectionStore
from aios_ledger.shell.tasks.ledger import TaskLedger
from conftest import both_engines, is_postgres
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from legacy_fixtures import LEGACY_DDL as LEGACY_SCHEMA
from legacy_fixtures import dump, row_dicts, rows
from test_tasks_support import (
    SEED_AUTHORIZATION,
    SEED_CAPABILITY,
    SEED_JOB_ID,
    SEED_TASK_ID,
    Clock,
    canon,
    file_bytes,
    refusal,
    runtime_result,
    seed_envelope,
    seed_resolver,
    seed_task,
    source_capture_result,
)

# Who the decisions here act as.
ACTOR = Actor("tester", "library")

pytest_generate_tests = both_engines


TOKEN = "claimer-token-0123456789abcdef"
OTHER_TOKEN = "another-token-0123456789abcdef"


@pytest.fixture(autouse=True)
def _authorization(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(AUTHORIZATION_ENV, SEED_AUTHORIZATION)


@pytest.fixture
def path(ledger_target: Path) -> Path:
    return ledger_target


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def ledger(path: Path, clock: Clock) -> Iterator[TaskLedger]:
    with TaskLedger(path, clock=clock, jitter=lambda: 0.0) as opened:
        yield opened


def _create(ledger: TaskLedger, task_id: str = "t1", key: str | None = None, **fields: Any) -> Any:
    task = {"task_id": task_id, "goal": "g", "instructions": "i", **fields}
    return ledger.create_task(task, idempotency_key=key or f"create-{task_id}")


def _claimed(ledger: TaskLedger, task_id: str = "t1", **fields: Any) -> ClaimAnswer:
    _create(ledger, task_id, **fields)
    claim = ledger.claim(agent_id="w1", capabilities=[], lease_seconds=60, task_id=task_id)
    assert claim is not None
    return claim


def _submitted(ledger: TaskLedger, task_id: str = "t1", **fields: Any) -> ClaimAnswer:
    claim = _claimed(ledger, task_id, **fields)
    ledger.submit_result(
        task_id,
        lease_token=claim["lease_token"],
        result={"ok": True},
        idempotency_key="s-" + task_id,
    )
    return claim


def _raw_task(path: Path, task_id: str = "t1") -> dict[str, Any]:
    (row,) = row_dicts(path, "SELECT * FROM tasks WHERE task_id = ?", (task_id,))
    return row


def _event_types(ledger: TaskLedger, task_id: str = "t1") -> list[str]:
    return [event["event_type"] for event in ledger.events(task_id)]


# ---------------------------------------------------------------------------------------------
# the seed's trail


def _seed_trail(ledger: TaskLedger) -> ClaimAnswer:
    created = ledger.create_task(seed_task(), idempotency_key="create-seed")
    assert (created["revision"], created["attempt"], created["status"]) == (1, 0, "QUEUED")
    claim = ledger.claim(agent_id="generic-worker", capabilities=[], lease_seconds=300)
    assert claim is not None and claim["task_id"] == SEED_TASK_ID
    assert (claim["revision"], claim["attempt"], claim["status"]) == (2, 1, "CLAIMED")
    beat = ledger.heartbeat(SEED_TASK_ID, lease_token=claim["lease_token"], lease_seconds=300)
    assert beat["revision"] == 3
    submitted = ledger.submit_result(
        SEED_TASK_ID,
        lease_token=claim["lease_token"],
        result=source_capture_result(),
        idempotency_key="source-capture-result-v1",
    )
    assert (submitted["revision"], submitted["status"]) == (4, "SUBMITTED")
    assert submitted["result_digest"] == canon(source_capture_result())
    verified = ledger.verify(
        SEED_TASK_ID,
        decision="NEEDS_REWORK",
        reason="SOURCE_CAPTURE_COMPLETE_RUNTIME_PROJECTION_REQUIRED",
        idempotency_key="verify-source-capture-v1",
        expected_result_digest=canon(source_capture_result()),
    )
    assert (verified["decision"], verified["next_state"]) == ("NEEDS_REWORK", "QUEUED")
    return claim


def test_seed_trail_through_the_public_api(ledger: TaskLedger, path: Path) -> None:
    claim = _seed_trail(ledger)
    row = _raw_task(path, SEED_TASK_ID)
    assert (row["status"], row["attempt"], row["revision"], row["claimed_by"]) == (
        "QUEUED",
        1,
        5,
        None,
    )
    assert row["lease_token_hash"] is None and row["lease_expires_at"] is None
    assert json.loads(row["result_json"]) == source_capture_result()
    assert row["result_digest"] == canon(source_capture_result())
    assert row["result_idempotency_key"] == "source-capture-result-v1"
    assert json.loads(row["verification_json"]) == {
        "decision": "NEEDS_REWORK",
        "reason": "SOURCE_CAPTURE_COMPLETE_RUNTIME_PROJECTION_REQUIRED",
    }
    events = ledger.events(SEED_TASK_ID)
    assert [event["event_type"] for event in events] == [
        "TASK_CREATED",
        "TASK_CLAIMED",
        "TASK_HEARTBEAT",
        "RESULT_SUBMITTED",
        "TASK_VERIFIED",
    ]
    # The verification says why, and when the next attempt may start (after the backoff).
    assert events[-1]["payload"] == {
        "decision": "NEEDS_REWORK",
        "next_state": "QUEUED",
        "reason": "SOURCE_CAPTURE_COMPLETE_RUNTIME_PROJECTION_REQUIRED",
        "not_before": row["not_before"],
    }
    assert events[1]["agent_id"] == "generic-worker"
    # The lease token itself is nowhere in the database.
    assert not any(claim["lease_token"] in line for line in dump(path))


def test_source_capture_recovery_on_a_trail_the_ledger_made(
    ledger: TaskLedger, path: Path, clock: Clock
) -> None:
    _seed_trail(ledger)
    verification = {
        "decision": "NEEDS_REWORK",
        "reason": "SOURCE_CAPTURE_COMPLETE_RUNTIME_PROJECTION_REQUIRED",
    }
    result = source_capture_result()
    request = SourceCaptureProjectionRecoveryRequest.from_mapping(
        {
            "expected_status": "QUEUED",
            "expected_revision": 5,
            "expected_attempt": 1,
            "expected_metadata_sha256": canon({}),
            "expected_required_capabilities_sha256": canon([]),
            "previous_verification_sha256": canon(verification),
            "expected_source_capture_result_sha256": canon(result),
            "expected_source_capture_execution_digest": result["execution_digest"],
            "expected_job_id": SEED_JOB_ID,
            "expected_execution_digest": seed_envelope()["execution_digest"],
            "required_capability": SEED_CAPABILITY,
            "adapter": "openclaw",
            "authorization_id": SEED_AUTHORIZATION,
            "idempotency_key": "source-capture-recovery-a-v1",
            "reason": "first durable runtime projection after governed source capture",
        }
    )
    store = InitialExecutionProjectionStore(path, seed_resolver)
    try:
        response = store.project_from_source_capture(SEED_TASK_ID, request)
    finally:
        store.close()
    assert (response["revision"], response["attempt"]) == (6, 1)
    assert response["recovery_from_source_capture"] is True
    # The ledger carries on once the rework's backoff (10 s, no jitter here) has passed: the
    # runtime claim gets the envelope and its runtime input.
    assert (
        ledger.claim(agent_id="runtime", capabilities=[SEED_CAPABILITY], lease_seconds=60) is None
    )
    clock.advance(10)
    assert ledger.claim(agent_id="runtime", capabilities=[], lease_seconds=60) is None
    claim = ledger.claim(agent_id="runtime", capabilities=[SEED_CAPABILITY], lease_seconds=60)
    assert claim is not None
    assert (claim["attempt"], claim["revision"]) == (2, 7)
    assert claim["envelope"] == seed_envelope()
    assert claim["runtime_input"] == seed_envelope()["runtime_input"]
    done = ledger.submit_result(
        SEED_TASK_ID,
        lease_token=claim["lease_token"],
        result=runtime_result(),
        idempotency_key="runtime-result-v1",
    )
    assert done["status"] == "SUBMITTED"
    final = ledger.verify(
        SEED_TASK_ID, decision="SUCCEEDED", reason="observed", idempotency_key="verify-runtime"
    )
    assert (final["status"], final["revision"]) == ("SUCCEEDED", 9)


# ---------------------------------------------------------------------------------------------
# result contracts on a task with an envelope


@pytest.fixture
def runtime_claim(ledger: TaskLedger, path: Path) -> ClaimAnswer:
    ledger.create_task(seed_task(), idempotency_key="create-seed")
    request = InitialExecutionProjectionRequest.from_mapping(
        {
            "expected_status": "QUEUED",
            "expected_revision": 1,
            "expected_attempt": 0,
            "expected_metadata_sha256": canon({}),
            "expected_required_capabilities_sha256": canon([]),
            "expected_job_id": SEED_JOB_ID,
            "expected_execution_digest": seed_envelope()["execution_digest"],
            "required_capability": SEED_CAPABILITY,
            "adapter": "openclaw",
            "authorization_id": SEED_AUTHORIZATION,
            "idempotency_key": "initial-projection-a-v1",
            "reason": "initial governed supervisor runtime projection",
        }
    )
    store = InitialExecutionProjectionStore(path, seed_resolver)
    try:
        store.project(SEED_TASK_ID, request)
    finally:
        store.close()
    claim = ledger.claim(agent_id="runtime", capabilities=[SEED_CAPABILITY], lease_seconds=60)
    assert claim is not None and claim["envelope"] == seed_envelope()
    return claim


@pytest.mark.parametrize(
    "result,code,path_named",
    [
        (runtime_result(production_write=True), "RESULT_GOVERNANCE_VIOLATION", None),
        (runtime_result(direct_main_write=True), "RESULT_GOVERNANCE_VIOLATION", None),
        (runtime_result(secret_material_exposed="yes"), "RESULT_GOVERNANCE_VIOLATION", None),
        (runtime_result(main_write=True), "RESULT_GOVERNANCE_VIOLATION", None),
        (runtime_result(changed_files="x"), "RESULT_CONTRACT_INVALID", "$.changed_files"),
        (runtime_result(status="DONE"), "RESULT_CONTRACT_INVALID", "$.status"),
        (runtime_result(extra=1), "RESULT_CONTRACT_INVALID", "$"),
        (runtime_result(job_id="job-other"), "RESULT_CONTRACT_INVALID", "$.job_id"),
        (runtime_result(target_branch="agent/other"), "RESULT_CONTRACT_INVALID", "$.target_branch"),
        (
            runtime_result(execution_digest="sha256:" + "f" * 64),
            "RESULT_EXECUTION_DIGEST_MISMATCH",
            "$.execution_digest",
        ),
        (source_capture_result(), "RESULT_CONTRACT_INVALID", "$"),
    ],
)
def test_results_of_an_enveloped_task_meet_the_contract(
    ledger: TaskLedger,
    path: Path,
    runtime_claim: dict[str, Any],
    result: dict[str, Any],
    code: str,
    path_named: str | None,
) -> None:
    before = dump(path)
    with pytest.raises(LedgerError) as refused:
        ledger.submit_result(
            SEED_TASK_ID,
            lease_token=runtime_claim["lease_token"],
            result=result,
            idempotency_key="bad-result",
        )
    assert refused.value.code == code
    if path_named is not None:
        assert refused.value.detail.startswith(path_named)
    assert dump(path) == before
    ok = ledger.submit_result(
        SEED_TASK_ID,
        lease_token=runtime_claim["lease_token"],
        result=runtime_result(),
        idempotency_key="good-result",
    )
    assert ok["status"] == "SUBMITTED"


# ---------------------------------------------------------------------------------------------
# every transition and its refusals through the API


def test_heartbeat_extends_the_lease(ledger: TaskLedger, clock: Clock) -> None:
    claim = _claimed(ledger)
    assert claim["lease_expires_at"] == "2026-08-20T00:01:00.000Z"
    clock.advance(30)
    beat = ledger.heartbeat("t1", lease_token=claim["lease_token"], lease_seconds=120)
    assert beat["lease_expires_at"] == "2026-08-20T00:02:30.000Z"
    assert (beat["status"], beat["revision"], beat["attempt"]) == ("CLAIMED", 3, 1)


def test_release_requeues_at_once_and_keeps_the_attempt(ledger: TaskLedger, path: Path) -> None:
    claim = _claimed(ledger)
    released = ledger.release("t1", lease_token=claim["lease_token"], reason="worker stopped")
    assert (released["status"], released["attempt"], released["revision"]) == ("QUEUED", 1, 3)
    assert released["claimed_by"] is None and released["lease_expires_at"] is None
    assert _raw_task(path)["lease_token_hash"] is None
    event = ledger.events("t1")[-1]
    assert (event["event_type"], event["agent_id"]) == ("TASK_RELEASED", "w1")
    assert event["payload"] == {"attempt": 1, "reason": "worker stopped", "next_state": "QUEUED"}
    # The lease is gone: the old holder is fenced, and anyone may claim the task again.
    before = dump(path)
    for call in (
        lambda: ledger.release("t1", lease_token=claim["lease_token"], reason="again"),
        lambda: ledger.heartbeat("t1", lease_token=claim["lease_token"], lease_seconds=5),
    ):
        assert refusal(call) == "LEASE_INVALID"
    assert dump(path) == before
    again = ledger.claim(agent_id="w2", capabilities=[], lease_seconds=60)
    assert again is not None and (again["task_id"], again["attempt"]) == ("t1", 2)


def test_release_of_the_last_attempt_fails_the_task(ledger: TaskLedger, clock: Clock) -> None:
    claim = _claimed(ledger, max_attempts=1)
    released = ledger.release("t1", lease_token=claim["lease_token"], reason="stopped")
    assert (released["status"], released["attempt"]) == ("FAILED", 1)
    assert ledger.events("t1")[-1]["payload"]["next_state"] == "FAILED"
    late = _claimed(ledger, "t2")
    clock.advance(60)
    assert refusal(
        lambda: ledger.release("t2", lease_token=late["lease_token"], reason="too late")
    ) == ("LEASE_EXPIRED")


def test_verify_decisions(ledger: TaskLedger) -> None:
    _submitted(ledger, "ok")
    _submitted(ledger, "bad")
    _submitted(ledger, "again", max_attempts=1)
    assert ledger.verify("ok", decision="SUCCEEDED", reason="r", idempotency_key="v1")[
        "status"
    ] == ("SUCCEEDED")
    assert ledger.verify("bad", decision="FAILED", reason="r", idempotency_key="v2")["status"] == (
        "FAILED"
    )
    used_up = ledger.verify("again", decision="NEEDS_REWORK", reason="r", idempotency_key="v3")
    assert (used_up["status"], used_up["next_state"]) == ("FAILED", "FAILED")
    assert ledger.events("again")[-1]["payload"] == {
        "decision": "NEEDS_REWORK",
        "next_state": "FAILED",
        "reason": "r",
    }


@pytest.mark.parametrize("stage", ["QUEUED", "CLAIMED", "SUBMITTED"])
def test_cancel_from_every_non_terminal_state(ledger: TaskLedger, stage: str) -> None:
    if stage == "QUEUED":
        _create(ledger)
    elif stage == "CLAIMED":
        _claimed(ledger)
    else:
        _submitted(ledger)
    answer = ledger.cancel("t1", reason="no longer needed", idempotency_key="c1")
    assert (answer["status"], answer["previous_status"]) == ("CANCELLED", stage)
    task = ledger.get("t1")
    assert task["claimed_by"] is None and task["lease_token_hash"] is None
    assert _event_types(ledger)[-1] == "TASK_CANCELLED"
    assert refusal(lambda: ledger.cancel("t1", reason="x", idempotency_key="c2")) == (
        "INVALID_TRANSITION"
    )


def test_terminal_states_refuse_everything(ledger: TaskLedger) -> None:
    claim = _submitted(ledger)
    ledger.verify("t1", decision="SUCCEEDED", reason="r", idempotency_key="v1")
    token = claim["lease_token"]
    calls: list[Callable[[], object]] = [
        lambda: ledger.claim(agent_id="w", capabilities=[], lease_seconds=5, task_id="t1"),
        lambda: ledger.heartbeat("t1", lease_token=token, lease_seconds=5),
        lambda: ledger.submit_result("t1", lease_token=token, result={}, idempotency_key="s9"),
        lambda: ledger.verify("t1", decision="FAILED", reason="r", idempotency_key="v9"),
        lambda: ledger.cancel("t1", reason="r", idempotency_key="c9"),
    ]
    codes = [refusal(call) for call in calls]
    assert codes == [
        "INVALID_TRANSITION",
        "LEASE_INVALID",
        "LEASE_INVALID",
        "INVALID_TRANSITION",
        "INVALID_TRANSITION",
    ]


def test_verify_needs_a_submitted_result(ledger: TaskLedger) -> None:
    _claimed(ledger)
    code = refusal(
        lambda: ledger.verify("t1", decision="SUCCEEDED", reason="r", idempotency_key="v")
    )
    assert code == "INVALID_TRANSITION"


def test_no_task_accepts_a_governance_violation(ledger: TaskLedger, path: Path) -> None:
    claim = _claimed(ledger)
    before = dump(path)
    code = refusal(
        lambda: ledger.submit_result(
            "t1",
            lease_token=claim["lease_token"],
            result={"summary": "done", "force_push": True},
            idempotency_key="s",
        )
    )
    assert code == "RESULT_GOVERNANCE_VIOLATION"
    assert dump(path) == before
    ok = ledger.submit_result(
        "t1",
        lease_token=claim["lease_token"],
        result={"summary": "done", "force_push": False},
        idempotency_key="s",
    )
    assert ok["status"] == "SUBMITTED"


def test_verify_checks_the_expected_result_digest(ledger: TaskLedger) -> None:
    _submitted(ledger)
    code = refusal(
        lambda: ledger.verify(
            "t1",
            decision="SUCCEEDED",
            reason="r",
            idempotency_key="v",
            expected_result_digest="0" * 64,
        )
    )
    assert code == "RESULT_DIGEST_MISMATCH"
    ok = ledger.verify(
        "t1",
        decision="SUCCEEDED",
        reason="r",
        idempotency_key="v",
        expected_result_digest=canon({"ok": True}),
    )
    assert ok["status"] == "SUCCEEDED"


def test_unknown_tasks(ledger: TaskLedger) -> None:
    calls: list[Callable[[], object]] = [
        lambda: ledger.get("nope"),
        lambda: ledger.claim(agent_id="w", capabilities=[], lease_seconds=5, task_id="nope"),
        lambda: ledger.heartbeat("nope", lease_token=TOKEN, lease_seconds=5),
        lambda: ledger.submit_result("nope", lease_token=TOKEN, result={}, idempotency_key="s"),
        lambda: ledger.verify("nope", decision="FAILED", reason="r", idempotency_key="v"),
        lambda: ledger.cancel("nope", reason="r", idempotency_key="c"),
        lambda: ledger.events("nope"),  # not [], which would read as a task without history
    ]
    assert {refusal(call) for call in calls} == {"TASK_NOT_FOUND"}


def test_create_refusals(ledger: TaskLedger) -> None:
    _create(ledger)
    assert refusal(lambda: _create(ledger, "t1", key="other-key")) == "TASK_ALREADY_EXISTS"
    bad: list[Any] = [
        None,
        [],
        {"goal": "g"},
        {"goal": "g", "instructions": "i", "surprise": 1},
        {"goal": "", "instructions": "i"},
        {"goal": "g", "instructions": "i", "priority": "7"},
        {"goal": "g", "instructions": "i", "priority": True},
        {"goal": "g", "instructions": "i", "max_attempts": 0},
        {"goal": "g", "instructions": "i", "deadline": "tomorrow"},
        {"goal": "g", "instructions": "i", "required_capabilities": "cap"},
        {"goal": "g", "instructions": "i", "required_capabilities": [""]},
        {"goal": "g", "instructions": "i", "metadata": {"execution": {}}},
        {"goal": "g", "instructions": "i", "constraints": {"x": float("nan")}},
        {"goal": "g", "instructions": "i", "success_criteria": {}},
        {"goal": "g\ud800", "instructions": "i"},
        {"goal": "g", "instructions": "i", "task_id": "bad id"},
    ]
    for mapping in bad:
        assert refusal(partial(ledger.create_task, mapping, idempotency_key="k")) == (
            "FIELDS_INVALID"
        ), mapping
    not_a_key: Any = 7
    assert refusal(
        lambda: ledger.create_task({"goal": "g", "instructions": "i"}, idempotency_key=not_a_key)
    ) == ("FIELDS_INVALID")


def test_create_generates_ids_and_defaults(ledger: TaskLedger) -> None:
    answer = ledger.create_task({"goal": "g", "instructions": "i"}, idempotency_key="k")
    task = ledger.get(answer["task_id"])
    assert answer["task_id"].startswith("task-")
    assert (task["priority"], task["max_attempts"], task["required_capabilities"]) == (0, 3, [])
    # A replay returns the first task, not a new id.
    again = ledger.create_task({"goal": "g", "instructions": "i"}, idempotency_key="k")
    assert again["task_id"] == answer["task_id"] and again["idempotent"] is True
    assert len(ledger.list_tasks()) == 1


def test_create_tasks_is_one_transaction(ledger: TaskLedger, path: Path) -> None:
    items = [({"task_id": f"b{i}", "goal": "g", "instructions": "i"}, f"bk{i}") for i in range(50)]
    answers = ledger.create_tasks(items)
    assert [answer["task_id"] for answer in answers] == [f"b{i}" for i in range(50)]
    before = dump(path)
    broken = [
        ({"task_id": "new-1", "goal": "g", "instructions": "i"}, "nk1"),
        ({"task_id": "b3", "goal": "g", "instructions": "i"}, "nk2"),
    ]
    assert refusal(lambda: ledger.create_tasks(broken)) == "TASK_ALREADY_EXISTS"
    assert dump(path) == before
    replayed = ledger.create_tasks([*items[:2], ({"goal": "x", "instructions": "y"}, "nk3")])
    assert [answer["idempotent"] for answer in replayed] == [True, True, False]
    assert refusal(lambda: ledger.create_tasks([])) == "FIELDS_INVALID"
    assert refusal(lambda: ledger.create_tasks([("x",)])) == "FIELDS_INVALID"  # type: ignore[list-item]


def test_claim_refusals_for_a_named_task(ledger: TaskLedger, clock: Clock) -> None:
    _create(ledger, "caps", required_capabilities=["git.read"])
    _create(ledger, "late", deadline="2026-08-20T00:00:30Z")
    clock.advance(60)

    def claim(task_id: str) -> object:
        return ledger.claim(agent_id="w", capabilities=["other"], lease_seconds=5, task_id=task_id)

    assert refusal(lambda: claim("caps")) == "CAPABILITY_MISSING"
    assert refusal(lambda: claim("late")) == "DEADLINE_PASSED"
    assert ledger.claim(agent_id="w", capabilities=["other"], lease_seconds=5) is None
    refused_claims: list[Any] = [
        {"agent_id": "", "capabilities": [], "lease_seconds": 5},
        {"agent_id": "w", "capabilities": "git.read", "lease_seconds": 5},
        {"agent_id": "w", "capabilities": [], "lease_seconds": 0},
        {"agent_id": "w", "capabilities": [], "lease_seconds": 5, "lease_token": "short"},
    ]
    for kwargs in refused_claims:
        assert refusal(partial(ledger.claim, **kwargs)) == "FIELDS_INVALID", kwargs
    code = refusal(
        lambda: ledger.claim(agent_id="w", capabilities=[], lease_seconds=5, idempotency_key="k")
    )
    assert code == "LEASE_TOKEN_REQUIRED"


def test_claim_skips_exhausted_tasks(ledger: TaskLedger, clock: Clock) -> None:
    _create(ledger, "once", max_attempts=1)
    claim = ledger.claim(agent_id="w", capabilities=[], lease_seconds=5)
    assert claim is not None
    clock.advance(10)
    expired = ledger.expire_leases()
    assert expired["expired"][0]["status"] == "FAILED"
    assert _event_types(ledger, "once")[-1] == "TASK_LEASE_EXPIRED"
    assert ledger.events("once")[-1]["payload"]["next_state"] == "FAILED"


def test_claim_order_and_eligibility(ledger: TaskLedger, clock: Clock) -> None:
    _create(ledger, "low", priority=1)
    clock.advance(1)
    _create(ledger, "high-new", priority=9)
    _create(ledger, "high-b", priority=9)
    _create(ledger, "high-a", priority=9, key="k-high-a")
    clock.advance(-5)
    _create(ledger, "high-old", priority=9)
    clock.advance(5)
    _create(ledger, "needs-git", priority=50, required_capabilities=["git.read"])
    _create(ledger, "gone", priority=60, deadline="2026-08-20T00:00:01Z")
    clock.advance(10)
    order = []
    while (claim := ledger.claim(agent_id="w", capabilities=["x"], lease_seconds=60)) is not None:
        order.append(claim["task_id"])
    # Equal priorities go in creation order: neither by id (high-b before high-a) nor by a
    # clock that stepped back (high-old was created last).
    assert order == ["high-new", "high-b", "high-a", "high-old", "low"]
    claim = ledger.claim(agent_id="g", capabilities=["git.read", "x"], lease_seconds=60)
    assert claim is not None and claim["task_id"] == "needs-git"
    assert [task["task_id"] for task in ledger.list_tasks("QUEUED")] == ["gone"]


def test_claim_walks_past_many_ineligible_tasks(ledger: TaskLedger) -> None:
    items = [
        (
            {
                "task_id": f"n{i:03d}",
                "goal": "g",
                "instructions": "i",
                "priority": 10,
                "required_capabilities": ["special"],
            },
            f"k{i}",
        )
        for i in range(100)
    ]
    ledger.create_tasks([*items, ({"task_id": "plain", "goal": "g", "instructions": "i"}, "kp")])
    claim = ledger.claim(agent_id="w", capabilities=[], lease_seconds=5)
    assert claim is not None and claim["task_id"] == "plain"


# ---------------------------------------------------------------------------------------------
# replays and conflicts


def test_replays_answer_the_recorded_answer_and_write_nothing(
    ledger: TaskLedger, path: Path
) -> None:
    task = {"task_id": "t1", "goal": "g", "instructions": "i"}
    first = ledger.create_task(task, idempotency_key="ck")
    claim = ledger.claim(
        agent_id="w", capabilities=[], lease_seconds=60, idempotency_key="clk", lease_token=TOKEN
    )
    assert claim is not None and claim["lease_token"] == TOKEN
    submitted = ledger.submit_result("t1", lease_token=TOKEN, result={"a": 1}, idempotency_key="sk")
    verified = ledger.verify("t1", decision="NEEDS_REWORK", reason="r", idempotency_key="vk")
    cancelled = ledger.cancel("t1", reason="stop", idempotency_key="xk")
    before = dump(path)
    replays = [
        (ledger.create_task(task, idempotency_key="ck"), first),
        (
            ledger.claim(
                agent_id="w",
                capabilities=[],
                lease_seconds=60,
                idempotency_key="clk",
                lease_token=TOKEN,
            ),
            claim,
        ),
        (
            ledger.submit_result("t1", lease_token=TOKEN, result={"a": 1}, idempotency_key="sk"),
            submitted,
        ),
        (ledger.verify("t1", decision="NEEDS_REWORK", reason="r", idempotency_key="vk"), verified),
        (ledger.cancel("t1", reason="stop", idempotency_key="xk"), cancelled),
    ]
    for replay, original in replays:
        assert replay is not None
        assert replay["idempotent"] is True
        assert {**replay, "idempotent": False} == original
    assert dump(path) == before


def test_same_key_different_request_conflicts(ledger: TaskLedger, path: Path) -> None:
    _create(ledger, "t1", key="k")
    ledger.claim(
        agent_id="w", capabilities=[], lease_seconds=60, idempotency_key="cl", lease_token=TOKEN
    )
    ledger.submit_result("t1", lease_token=TOKEN, result={"a": 1}, idempotency_key="s")
    before = dump(path)
    calls: list[Callable[[], object]] = [
        lambda: ledger.create_task(
            {"task_id": "t1", "goal": "other", "instructions": "i"}, idempotency_key="k"
        ),
        lambda: ledger.claim(
            agent_id="w",
            capabilities=[],
            lease_seconds=60,
            idempotency_key="cl",
            lease_token=OTHER_TOKEN,
        ),
        lambda: ledger.submit_result("t1", lease_token=TOKEN, result={"a": 2}, idempotency_key="s"),
        lambda: ledger.verify("t1", decision="SUCCEEDED", reason="r", idempotency_key="s"),
        lambda: ledger.cancel("t1", reason="r", idempotency_key="k"),
    ]
    assert {refusal(call) for call in calls} == {"IDEMPOTENCY_CONFLICT"}
    assert dump(path) == before


# ---------------------------------------------------------------------------------------------
# fencing


def test_a_stale_holder_is_fenced(ledger: TaskLedger, path: Path, clock: Clock) -> None:
    stale = _claimed(ledger)
    clock.advance(60)
    before = dump(path)
    # The lease has passed but nobody expired it yet: the holder's token is recognised.
    assert refusal(
        lambda: ledger.heartbeat("t1", lease_token=stale["lease_token"], lease_seconds=60)
    ) == ("LEASE_EXPIRED")
    assert refusal(
        lambda: ledger.submit_result(
            "t1", lease_token=stale["lease_token"], result={}, idempotency_key="late"
        )
    ) == ("LEASE_EXPIRED")
    assert dump(path) == before
    assert ledger.expire_leases()["count"] == 1
    fresh = ledger.claim(agent_id="w2", capabilities=[], lease_seconds=60)
    assert fresh is not None and fresh["attempt"] == 2
    before = dump(path)
    assert refusal(
        lambda: ledger.heartbeat("t1", lease_token=stale["lease_token"], lease_seconds=60)
    ) == ("LEASE_INVALID")
    assert refusal(
        lambda: ledger.submit_result(
            "t1", lease_token=stale["lease_token"], result={}, idempotency_key="late"
        )
    ) == ("LEASE_INVALID")
    assert dump(path) == before
    ok = ledger.submit_result(
        "t1", lease_token=fresh["lease_token"], result={"by": "w2"}, idempotency_key="fresh"
    )
    assert (ok["status"], ok["attempt"], ok["revision"]) == ("SUBMITTED", 2, 5)
    assert _event_types(ledger) == [
        "TASK_CREATED",
        "TASK_CLAIMED",
        "TASK_LEASE_EXPIRED",
        "TASK_CLAIMED",
        "RESULT_SUBMITTED",
    ]


def test_expire_leases_leaves_live_leases(ledger: TaskLedger, clock: Clock) -> None:
    short = _claimed(ledger, "short")
    _create(ledger, "long")
    ledger.claim(agent_id="w", capabilities=[], lease_seconds=600, task_id="long")
    clock.advance(59)
    assert ledger.expire_leases()["count"] == 0
    clock.advance(1)
    answer = ledger.expire_leases()
    assert [item["task_id"] for item in answer["expired"]] == ["short"]
    assert ledger.get("short")["status"] == "QUEUED"
    assert ledger.get("long")["status"] == "CLAIMED"
    assert refusal(
        lambda: ledger.heartbeat("short", lease_token=short["lease_token"], lease_seconds=5)
    ) == ("LEASE_INVALID")


def test_a_wrong_token_is_refused(ledger: TaskLedger) -> None:
    _claimed(ledger)
    assert refusal(lambda: ledger.heartbeat("t1", lease_token=TOKEN, lease_seconds=5)) == (
        "LEASE_INVALID"
    )


def test_only_the_token_digest_is_stored(ledger: TaskLedger, path: Path) -> None:
    _create(ledger)
    ledger.claim(agent_id="w", capabilities=[], lease_seconds=60, lease_token=TOKEN)
    assert _raw_task(path)["lease_token_hash"] == lease_token_sha256(TOKEN)
    assert not any(TOKEN in line for line in dump(path))


# ---------------------------------------------------------------------------------------------
# a refused call changes nothing, byte for byte


def test_refused_calls_leave_the_database_byte_for_byte(
    ledger: TaskLedger, path: Path, clock: Clock
) -> None:
    claim = _claimed(ledger)
    _create(ledger, "t2")
    before, raw_before = dump(path), file_bytes(path)
    calls: list[Callable[[], object]] = [
        lambda: ledger.heartbeat("t1", lease_token=OTHER_TOKEN, lease_seconds=5),
        lambda: ledger.release("t1", lease_token=OTHER_TOKEN, reason="r"),
        lambda: ledger.release("t2", lease_token=claim["lease_token"], reason="r"),
        lambda: ledger.release("t1", lease_token=claim["lease_token"], reason="r" * 1001),
        lambda: ledger.submit_result(
            "t1", lease_token=claim["lease_token"], result=[1], idempotency_key="s"
        ),
        lambda: ledger.submit_result(
            "t1",
            lease_token=claim["lease_token"],
            result={"x": {"y": [0] * 3, "z": 2**200}},
            idempotency_key="s",
        ),
        lambda: ledger.verify("t2", decision="SUCCEEDED", reason="r", idempotency_key="v"),
        lambda: ledger.verify("t1", decision="MAYBE", reason="r", idempotency_key="v"),
        lambda: ledger.cancel("t9", reason="r", idempotency_key="c"),
        lambda: ledger.create_task(
            {"task_id": "t2", "goal": "g", "instructions": "i"}, idempotency_key="n"
        ),
        lambda: ledger.create_tasks(
            [
                ({"task_id": "t3", "goal": "g", "instructions": "i"}, "n3"),
                ({"goal": "g"}, "n4"),
            ]
        ),
        lambda: ledger.claim(agent_id="w", capabilities=[], lease_seconds=5, task_id="t1"),
        lambda: ledger.list_tasks("DONE"),
        lambda: ledger.list_tasks(limit=0),
    ]
    for call in calls:
        refusal(call)
    assert dump(path) == before
    assert file_bytes(path) == raw_before


# ---------------------------------------------------------------------------------------------
# the claim uses the index


def _plan_details(path: Path, statement: str, params: dict[str, Any]) -> list[str]:
    if is_postgres(path):
        pytest.skip("SQLite's query plans (PostgreSQL's planner picks by statistics)")
    con = apsw.Connection(str(path))
    try:
        info = apsw.ext.query_info(con, sql(statement), params, explain_query_plan=True)
    finally:
        con.close()
    details: list[str] = []
    pending = [info.query_plan] if info.query_plan is not None else []
    while pending:
        node = pending.pop()
        details.append(node.detail)
        pending.extend(node.sub or [])
    return details


@pytest.mark.parametrize(
    "statement,params",
    [
        (
            "tasks_claim_candidates",
            {"now": "2026-08-20T00:00:00Z", "limit": 32, "offered_json": '["git"]'},
        ),
        ("tasks_expired_leases", {"now": "2026-08-20T00:00:00Z", "limit": 200}),
        ("tasks_list_by_status", {"status": "QUEUED", "limit": 10}),
        ("get_task", {"task_id": "t1"}),
        ("task_idempotency_get", {"idempotency_key": "k"}),
    ],
)
def test_claim_reads_through_an_index(
    ledger: TaskLedger, path: Path, statement: str, params: dict[str, Any]
) -> None:
    ledger.create_tasks(
        [({"task_id": f"q{i}", "goal": "g", "instructions": "i"}, f"q{i}") for i in range(20)]
    )
    details = _plan_details(path, statement, params)
    assert details, "no query plan"
    scans = [detail for detail in details if detail.startswith("SCAN") and "tasks" in detail]
    assert not scans, details
    if statement == "tasks_claim_candidates":
        assert any("tasks_claim_order" in detail for detail in details), details
        assert not any("TEMP B-TREE" in detail for detail in details), details


def test_the_claim_order_index_exists(path: Path, ledger: TaskLedger) -> None:
    if is_postgres(path):
        query = "SELECT indexdef FROM pg_indexes WHERE indexname = 'tasks_claim_order'"
        query += " AND schemaname = current_schema()"
    else:
        query = "SELECT sql FROM sqlite_master WHERE name = 'tasks_claim_order'"
    ((index_sql,),) = rows(path, query)
    assert "status, priority DESC, seq" in index_sql


# ---------------------------------------------------------------------------------------------
# reads


def test_reads(ledger: TaskLedger) -> None:
    _claimed(ledger, "a")
    _create(ledger, "b")
    assert [task["task_id"] for task in ledger.list_tasks()] == ["a", "b"]
    assert [task["task_id"] for task in ledger.list_tasks("CLAIMED")] == ["a"]
    assert ledger.list_tasks("QUEUED", limit=1)[0]["task_id"] == "b"
    task = ledger.get("a")
    assert task["metadata"] == {} and task["status"] == "CLAIMED"
    events = ledger.events("a")
    assert events[1]["payload"] == {  # the claim names the evidence run it created
        "attempt": 1,
        "lease_expires_at": "2026-08-20T00:01:00.000Z",
        "run_id": "a@1",
    }
    assert refusal(lambda: ledger.get(5)) == "FIELDS_INVALID"  # type: ignore[arg-type]


@pytest.mark.parametrize("limit", [0, -1, MAX_LIST + 1, 10**30, True, 1.0, "5", None])
def test_a_list_limit_out_of_range_is_refused_not_clamped(ledger: TaskLedger, limit: Any) -> None:
    _create(ledger, "a")
    with pytest.raises(LedgerError) as refused:
        ledger.list_tasks(limit=limit)
    assert refused.value.code == "FIELDS_INVALID"
    assert refused.value.detail.startswith("arguments.limit: ")
    assert len(ledger.list_tasks(limit=MAX_LIST)) == 1


# ---------------------------------------------------------------------------------------------
# rows the ledger did not write itself: the older runtime's database, tampering, races


def _legacy_db(path: Path, *, attempt: int = 0, max_attempts: int = 20) -> None:
    if is_postgres(path):
        pytest.skip("the older runtime's databases are SQLite files")
    con = sqlite3.connect(path)
    con.executescript(LEGACY_SCHEMA)
    con.execute(
        "INSERT INTO tasks VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
        (
            SEED_TASK_ID,
            "Supervise release preparation",
            "Observe and resume only the same lineage.",
            json.dumps([{"id": "heartbeat", "description": "Heartbeat observed"}]),
            "[]",
            json.dumps({"production_write": False}),
            "{}",
            None,
            100,
            max_attempts,
            attempt,
            "QUEUED",
            None,
            None,
            None,
            None,
            None,
            None,
            None,
            1,
            "2026-08-20T00:00:00Z",
            "2026-08-20T00:00:00Z",
        ),
    )
    con.execute(
        "INSERT INTO events(task_id,agent_id,event_type,payload_json,created_at) "
        "VALUES (?,?,?,?,?)",
        (SEED_TASK_ID, None, "TASK_CREATED", "{}", "2026-08-20T00:00:00Z"),
    )
    con.commit()
    con.close()


def test_a_task_of_the_older_runtime_goes_through_the_lifecycle(path: Path, clock: Clock) -> None:
    _legacy_db(path)
    with TaskLedger(path, clock=clock) as ledger:
        claim = ledger.claim(agent_id="generic-worker", capabilities=[], lease_seconds=60)
        assert claim is not None and (claim["task_id"], claim["revision"]) == (SEED_TASK_ID, 2)
        ledger.heartbeat(SEED_TASK_ID, lease_token=claim["lease_token"], lease_seconds=60)
        ledger.submit_result(
            SEED_TASK_ID,
            lease_token=claim["lease_token"],
            result=source_capture_result(),
            idempotency_key="source-capture-result-v1",
        )
        ledger.verify(SEED_TASK_ID, decision="NEEDS_REWORK", reason="r", idempotency_key="v")
    row = _raw_task(path, SEED_TASK_ID)
    assert (row["status"], row["attempt"], row["revision"], row["claimed_by"]) == (
        "QUEUED",
        1,
        5,
        None,
    )


def test_attempts_exhausted(path: Path, clock: Clock) -> None:
    _legacy_db(path, attempt=2, max_attempts=2)
    with TaskLedger(path, clock=clock) as ledger:
        assert ledger.claim(agent_id="w", capabilities=[], lease_seconds=5) is None
        code = refusal(
            lambda: ledger.claim(
                agent_id="w", capabilities=[], lease_seconds=5, task_id=SEED_TASK_ID
            )
        )
        assert code == "ATTEMPTS_EXHAUSTED"


def test_a_tampered_envelope_refuses_results(
    ledger: TaskLedger, path: Path, runtime_claim: dict[str, Any]
) -> None:
    ((found,),) = rows(path, "SELECT metadata_json FROM tasks WHERE task_id = ?", (SEED_TASK_ID,))
    metadata = json.loads(found)
    metadata["execution"]["adapter"] = "other"
    rows(
        path,
        "UPDATE tasks SET metadata_json = ? WHERE task_id = ?",
        (json.dumps(metadata), SEED_TASK_ID),
    )
    code = refusal(
        lambda: ledger.submit_result(
            SEED_TASK_ID,
            lease_token=runtime_claim["lease_token"],
            result=runtime_result(),
            idempotency_key="r",
        )
    )
    assert code == "EXECUTION_ENVELOPE_INVALID"


def test_a_plan_for_a_row_that_moved_on_is_a_revision_conflict(
    ledger: TaskLedger, path: Path
) -> None:
    from aios_ledger.core import (
        CancelRequest,
        TaskRow,
        TaskState,
        Timestamp,
        chain_of,
        decide_cancel,
    )
    from aios_ledger.shell.db.apply import apply_decision
    from aios_ledger.shell.db.connection import fetch_one
    from aios_ledger.shell.db.tail import read_log_tail

    _create(ledger)
    seen = ledger.database.read(lambda conn: fetch_one(conn, "get_task", {"task_id": "t1"}))
    tail = ledger.database.read(lambda conn: read_log_tail(conn, [chain_of("t1")]))
    assert seen is not None
    stale = TaskState(task=TaskRow.from_row(seen), tail=tail)
    ledger.claim(agent_id="w", capabilities=[], lease_seconds=60)
    request = CancelRequest.from_mapping({"task_id": "t1", "reason": "r", "idempotency_key": "c"})
    plan = decide_cancel(stale, request, now=Timestamp.parse("2026-08-20T00:00:00Z"), actor=ACTOR)
    before = dump(path)
    code = refusal(lambda: ledger.database.write(lambda conn: apply_decision(conn, plan)))
    assert code == "REVISION_CONFLICT"
    assert dump(path) == before


# ---------------------------------------------------------------------------------------------
# junk of any shape is a LedgerError and changes nothing

junk_leaves = (
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats()
    | st.text(max_size=20)
    | st.binary(max_size=8)
    | st.builds(object)
)
junk = junk_leaves | st.recursive(
    junk_leaves,
    lambda inner: (
        st.lists(inner, max_size=3)
        | st.tuples(inner, inner)
        | st.dictionaries(st.text(max_size=8) | st.integers(), inner, max_size=3)
    ),
    max_leaves=12,
)


def _never_valid_count(value: Any) -> Any:
    """Junk for a count: any integer becomes one no range accepts."""
    if isinstance(value, int) and not isinstance(value, bool):
        return -abs(value)
    return value


def test_junk_arguments_are_refused_and_change_nothing(ledger: TaskLedger, path: Path) -> None:
    target = "junk-target-task-0001"
    claim = _claimed(ledger, target)
    token = claim["lease_token"]
    before = dump(path)
    calls: dict[str, Callable[[Any], object]] = {
        "create": lambda value: ledger.create_task(value, idempotency_key="junk"),
        "create_key": lambda value: ledger.create_task(
            {"task_id": target, "goal": "g", "instructions": "i"}, idempotency_key=value
        ),
        "create_many": ledger.create_tasks,
        "claim_agent": lambda value: ledger.claim(
            agent_id=value, capabilities=[], lease_seconds=5, task_id=target
        ),
        "claim_caps": lambda value: ledger.claim(
            agent_id="w", capabilities=value, lease_seconds=5, task_id=target
        ),
        "claim_lease": lambda value: ledger.claim(
            agent_id="w", capabilities=[], lease_seconds=_never_valid_count(value), task_id=target
        ),
        "heartbeat_token": lambda value: ledger.heartbeat(
            target, lease_token=value, lease_seconds=5
        ),
        "heartbeat_seconds": lambda value: ledger.heartbeat(
            target, lease_token=token, lease_seconds=_never_valid_count(value)
        ),
        "submit_result": lambda value: ledger.submit_result(
            target,
            lease_token=token,
            result=[value] if isinstance(value, dict) else value,
            idempotency_key="junk",
        ),
        "verify": lambda value: ledger.verify(
            target, decision=value, reason="r", idempotency_key="j"
        ),
        "cancel": lambda value: ledger.cancel(value, reason="r", idempotency_key="j"),
        "get": ledger.get,
        "events": ledger.events,
        "list_status": ledger.list_tasks,
        "list_limit": lambda value: ledger.list_tasks(limit=_never_valid_count(value)),
    }
    reads = {"events", "get", "list_status"}

    @settings(max_examples=400, deadline=None, suppress_health_check=list(HealthCheck))
    @given(name=st.sampled_from(sorted(calls)), value=junk)
    def check(name: str, value: Any) -> None:
        try:
            answer = calls[name](value)
        except LedgerError:
            return
        # Only reads may answer (an unknown id has no events, no status lists everything).
        assert name in reads, (name, value)
        assert isinstance(answer, list | dict)

    check()
    assert dump(path) == before


def test_a_record_read_checks_that_the_statement_selects_its_fields(path: Path) -> None:
    from aios_ledger.core import IdempotencyRow, TaskRow
    from aios_ledger.shell.db.connection import fetch_record

    with TaskLedger(path) as store:
        created = store.create_task({"goal": "g", "instructions": "i"}, idempotency_key="c-1")

        def check(conn: Connection) -> None:
            task = fetch_record(conn, "get_task", {"task_id": created["task_id"]}, TaskRow)
            assert task is not None and task.task_id == created["task_id"]
            with pytest.raises(TypeError, match="not the fields of IdempotencyRow"):
                fetch_record(conn, "get_task", {"task_id": created["task_id"]}, IdempotencyRow)

        store.database.read(check)


def test_idle_reason_reads_the_queue_by_capabilities_and_schedule(ledger: TaskLedger) -> None:
    """On both engines: the named SQL groups the queue the way the core's reason counts it."""
    assert ledger.idle_reason([]).text() == "no queued task"
    _create(ledger, "t-gpu-1", required_capabilities=["gpu"])
    _create(ledger, "t-gpu-2", required_capabilities=["gpu"])
    _create(ledger, "t-later", not_before="2999-01-01T00:00:00.000Z")
    reason = ledger.idle_reason(["cpu"])
    assert (reason.queued, reason.lacking, reason.missing) == (3, 2, ("gpu",))
    assert (reason.not_due, reason.due_from) == (1, "2999-01-01T00:00:00.000Z")
    assert ledger.idle_reason(["gpu"]).lacking == 0
