"""Day two of the task lifecycle (issue 17 items 1, 2 and 4): verification modes, backoff,
scheduling, operator retries, claims that take over passed leases, and a task's history,
through the library and the command line."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from aios_ledger.core import LedgerError, RetryPolicy, TaskCreateRequest, Timestamp
from aios_ledger.core.tasks import retry_delay_ms
from aios_ledger.core.tasks.backoff import MAX_RETRY_SECONDS, retry_not_before
from aios_ledger.core.tasks.status import status_report
from aios_ledger.shell import TaskLedger
from conftest import both_engines
from hypothesis import given
from hypothesis import strategies as st
from legacy_fixtures import dump
from test_tasks_cli import Cli
from test_tasks_support import START, Clock, refusal

pytest_generate_tests = both_engines


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


def _create(ledger: TaskLedger, task_id: str = "t1", **fields: Any) -> Any:
    task = {"task_id": task_id, "goal": "g", "instructions": "i", **fields}
    return ledger.create_task(task, idempotency_key=f"create-{task_id}")


def _claim(ledger: TaskLedger, agent: str = "w1") -> Any:
    return ledger.claim(agent_id=agent, capabilities=[], lease_seconds=60)


def _submit(ledger: TaskLedger, claim: Any, result: Any, key: str) -> Any:
    return ledger.submit_result(
        claim["task_id"], lease_token=claim["lease_token"], result=result, idempotency_key=key
    )


def _at(seconds: int) -> str:
    return Timestamp.from_datetime(START + timedelta(seconds=seconds)).text


# ---------------------------------------------------------------------------------------------
# backoff (pure)


@given(
    base=st.integers(1, MAX_RETRY_SECONDS),
    spread=st.integers(0, MAX_RETRY_SECONDS),
    retry=st.integers(1, 2000),
    jitter=st.floats(0.0, 1.0, exclude_max=True),
)
def test_the_backoff_stays_within_its_bounds(
    base: int, spread: int, retry: int, jitter: float
) -> None:
    policy = RetryPolicy(base, min(base + spread, MAX_RETRY_SECONDS))
    delay = retry_delay_ms(policy, retry, jitter)
    nominal = min(policy.max_seconds, base * 2 ** (retry - 1)) * 1000
    assert base * 1000 <= delay
    assert nominal <= delay <= nominal * 1.25
    assert delay <= retry_delay_ms(policy, retry + 1, jitter)


def test_the_backoff_is_golden() -> None:
    policy = RetryPolicy(10, 60)
    assert [retry_delay_ms(policy, n, 0.0) for n in range(1, 6)] == [
        10_000,
        20_000,
        40_000,
        60_000,
        60_000,
    ]
    assert retry_delay_ms(policy, 1, 0.5) == 11_250
    assert retry_delay_ms(policy, 4, 0.999) == 74_985
    # The stored text keeps the moment's milliseconds: the wait is never cut short.
    now = Timestamp.parse("2026-08-20T00:00:00.900Z")
    assert retry_not_before(policy, 1, 0.0, now).text == "2026-08-20T00:00:10.900Z"


@pytest.mark.parametrize("jitter", [-0.1, 1.0, 1, None, float("nan"), "0.5"])
def test_a_jitter_outside_its_range_is_refused(jitter: Any) -> None:
    with pytest.raises(LedgerError) as refused:
        retry_delay_ms(RetryPolicy(), 1, jitter)
    assert refused.value.code == "JITTER_INVALID"


@pytest.mark.parametrize(
    "retry",
    [
        {"base_seconds": 0},
        {"base_seconds": 20, "max_seconds": 10},
        {"max_seconds": MAX_RETRY_SECONDS + 1},
        {"base_seconds": "10"},
        {"base_seconds": 10, "extra": 1},
        [10, 20],
    ],
)
def test_a_bad_retry_policy_is_refused(retry: Any) -> None:
    with pytest.raises(LedgerError) as refused:
        TaskCreateRequest.from_mapping({"goal": "g", "instructions": "i", "retry": retry})
    assert refused.value.code == "FIELDS_INVALID"
    assert "retry" in refused.value.detail


# ---------------------------------------------------------------------------------------------
# automatic verification


def test_auto_accepts_a_succeeded_result(ledger: TaskLedger) -> None:
    _create(ledger, verification="auto")
    claim = _claim(ledger)
    answer = _submit(ledger, claim, {"status": "SUCCEEDED", "summary": "done"}, "s1")
    assert answer["status"] == "SUCCEEDED"
    task = ledger.get("t1")
    assert task["verification"] == {
        "decision": "SUCCEEDED",
        "reason": "result status SUCCEEDED",
        "automatic": True,
    }
    events = ledger.events("t1")
    assert [event["event_type"] for event in events[-2:]] == ["RESULT_SUBMITTED", "TASK_VERIFIED"]
    assert events[-1]["payload"]["automatic"] is True
    assert task["revision"] == 4  # created, claimed, submitted, verified: one write each


def test_auto_requeues_a_failure_after_the_backoff_then_fails_it(
    ledger: TaskLedger, clock: Clock
) -> None:
    _create(ledger, verification="auto", max_attempts=2, retry={"base_seconds": 30})
    failure = {"status": "FAILED", "failure": "exit_status", "summary": "exit_status: exit 3"}
    first = _submit(ledger, _claim(ledger), failure, "s1")
    assert first["status"] == "QUEUED"
    task = ledger.get("t1")
    assert task["not_before"] == _at(30)
    verified = ledger.events("t1")[-1]
    assert verified["payload"] == {
        "decision": "NEEDS_REWORK",
        "next_state": "QUEUED",
        "reason": "result status 'FAILED': exit_status: exit 3",
        "automatic": True,
        "not_before": _at(30),
    }
    # Never before its time, even when named.
    assert _claim(ledger) is None
    named = lambda: ledger.claim(agent_id="w", capabilities=[], lease_seconds=60, task_id="t1")  # noqa: E731
    assert refusal(named) == "TASK_NOT_DUE"
    clock.advance(29)
    assert _claim(ledger) is None
    clock.advance(1)
    second = _claim(ledger)
    assert second is not None and second["attempt"] == 2
    # Without a status the result is a failure too; the attempts are used up: FAILED.
    last = _submit(ledger, second, {"summary": "no output"}, "s2")
    assert last["status"] == "FAILED"
    assert ledger.get("t1")["verification"]["reason"] == "result status None: no output"


def test_the_reviewer_rework_waits_for_the_backoff(ledger: TaskLedger, clock: Clock) -> None:
    _create(ledger, retry={"base_seconds": 5, "max_seconds": 5})
    for attempt, key in ((1, "a"), (2, "b")):
        claim = _claim(ledger)
        assert claim is not None and claim["attempt"] == attempt
        _submit(ledger, claim, {"ok": False}, f"s-{key}")
        assert ledger.get("t1")["status"] == "SUBMITTED"  # a reviewer judges this one
        ledger.verify("t1", decision="NEEDS_REWORK", reason=f"try {key}", idempotency_key=key)
        assert _claim(ledger) is None
        clock.advance(5)  # the second retry is capped at max_seconds
    assert _claim(ledger) is not None


def test_a_scheduled_task_waits_for_its_time(ledger: TaskLedger, clock: Clock) -> None:
    _create(ledger, "later", not_before=_at(60), priority=10)
    _create(ledger, "now")
    assert _claim(ledger)["task_id"] == "now"
    assert _claim(ledger) is None
    clock.advance(60)
    assert _claim(ledger)["task_id"] == "later"


# ---------------------------------------------------------------------------------------------
# retry


def test_retry_requeues_a_failed_task_with_more_attempts(ledger: TaskLedger) -> None:
    _create(ledger, max_attempts=1)
    claim = _claim(ledger)
    _submit(ledger, claim, {"ok": False}, "s1")
    ledger.verify("t1", decision="FAILED", reason="broken", idempotency_key="v1")
    assert _claim(ledger) is None
    answer = ledger.retry("t1", reason="runner fixed", idempotency_key="r1", extra_attempts=2)
    assert (answer["status"], answer["max_attempts"], answer["previous_status"]) == (
        "QUEUED",
        3,
        "FAILED",
    )
    requeued = ledger.events("t1")[-1]
    assert requeued["event_type"] == "TASK_REQUEUED"
    assert requeued["payload"]["reason"] == "runner fixed"
    # Idempotent by key: the same call replays, another request with the key conflicts.
    again = ledger.retry("t1", reason="runner fixed", idempotency_key="r1", extra_attempts=2)
    assert again["idempotent"] is True and again["revision"] == answer["revision"]
    assert refusal(lambda: ledger.retry("t1", reason="x", idempotency_key="r1")) == (
        "IDEMPOTENCY_CONFLICT"
    )
    assert _claim(ledger)["attempt"] == 2


def test_retry_brings_back_a_cancelled_task(ledger: TaskLedger) -> None:
    _create(ledger)
    ledger.cancel("t1", reason="paused", idempotency_key="c1")
    assert ledger.retry("t1", reason="resume", idempotency_key="r1")["status"] == "QUEUED"


@pytest.mark.parametrize(
    "call",
    [
        lambda ledger: ledger.retry("t1", reason="r", idempotency_key="k"),  # QUEUED
        lambda ledger: ledger.retry("nope", reason="r", idempotency_key="k"),
        lambda ledger: ledger.retry("t1", reason="r", idempotency_key="k", extra_attempts=0),
        lambda ledger: ledger.retry("t1", reason="", idempotency_key="k"),
        lambda ledger: ledger.retry("t1", reason="r", idempotency_key="k", extra_attempts=True),
        lambda ledger: ledger.claim(agent_id="w", capabilities=[], lease_seconds=9, task_id="s"),
    ],
)
def test_refusals_leave_the_database_as_it_was(ledger: TaskLedger, path: Path, call: Any) -> None:
    _create(ledger)
    _create(ledger, "s", not_before=_at(60))
    before = dump(path)
    with pytest.raises(LedgerError):
        call(ledger)
    assert dump(path) == before


# ---------------------------------------------------------------------------------------------
# leases that clean up after themselves


def test_a_claim_takes_over_a_passed_lease(ledger: TaskLedger, clock: Clock) -> None:
    _create(ledger, "dead")
    _create(ledger, "used-up", max_attempts=1)
    held = [_claim(ledger, "crashed"), _claim(ledger, "crashed")]
    assert [claim["task_id"] for claim in held] == ["dead", "used-up"]
    clock.advance(61)
    taken = _claim(ledger, "w2")
    assert taken is not None and (taken["task_id"], taken["attempt"]) == ("dead", 2)
    expired = [
        event for event in ledger.events("dead") if event["event_type"] == "TASK_LEASE_EXPIRED"
    ]
    assert expired[0]["agent_id"] == "crashed"
    assert expired[0]["payload"]["next_state"] == "QUEUED"
    assert ledger.get("used-up")["status"] == "FAILED"
    assert ledger.expire_leases() == {"expired": [], "count": 0}


def test_status_counts_a_passed_lease_as_expired() -> None:
    leases = [
        {"task_id": "a", "claimed_by": "w", "lease_expires_at": "2026-08-20T00:00:00Z"},
        {"task_id": "b", "claimed_by": "w", "lease_expires_at": "2026-08-20T00:00:30Z"},
    ]
    report = status_report([], None, leases, [], now="2026-08-20T00:00:10Z")
    assert [row["task_id"] for row in report["leases_expired"]] == ["a"]
    assert [row["task_id"] for row in report["leases_expiring"]] == ["b"]


# ---------------------------------------------------------------------------------------------
# history and the command line


def test_retry_and_history_on_the_command_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    cli = Cli(tmp_path, capsys)
    assert cli.run("init")[0] == 0
    task = {"task_id": "t1", "goal": "g", "instructions": "i", "verification": "auto"}
    cli.run("task", "create", body={"idempotency_key": "c", "task": {**task, "max_attempts": 1}})
    _, claim, _ = cli.run("claim", body={"agent_id": "w", "capabilities": [], "lease_seconds": 60})
    failure = {"status": "FAILED", "failure": "timeout", "summary": "timeout: after 5s"}
    body = {"task_id": "t1", "lease_token": claim["lease_token"], "result": failure}
    _, submitted, _ = cli.run("submit", body={**body, "idempotency_key": "s"})
    assert submitted["status"] == "FAILED"
    code, retried, _ = cli.run(
        "task", "retry", body={"task_id": "t1", "reason": "longer timeout", "idempotency_key": "r"}
    )
    assert code == 0 and (retried["status"], retried["max_attempts"]) == ("QUEUED", 2)
    code, history, _ = cli.run("task", "history", "t1")
    assert code == 0
    assert [(entry["event"], entry["attempt"], entry["next_state"]) for entry in history] == [
        ("TASK_CREATED", 0, "QUEUED"),
        ("TASK_CLAIMED", 1, "CLAIMED"),
        ("RESULT_SUBMITTED", 1, "SUBMITTED"),
        ("TASK_VERIFIED", 1, "FAILED"),
        ("TASK_REQUEUED", 1, "QUEUED"),
    ]
    assert history[1]["agent"] == "w"
    assert history[3]["reason"] == "result status 'FAILED': timeout: after 5s"
    assert history[3]["decision"] == "NEEDS_REWORK"
    assert history[4]["reason"] == "longer timeout"
    code, _, err = cli.run("task", "history", "nope")
    assert code != 0 and "TASK_NOT_FOUND" in err
    code, _, err = cli.run(
        "task", "retry", body={"task_id": "t1", "reason": "again", "idempotency_key": "r2"}
    )
    assert code != 0 and "INVALID_TRANSITION" in err
    code, schema, _ = cli.run("schema", "retry")
    assert code == 0 and "extra_attempts" in schema["properties"]
