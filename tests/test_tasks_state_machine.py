"""A hypothesis state machine drives `TaskLedger` with a pure model beside it.

Rules: create, claim (one or a batch, each taking over passed leases first), heartbeat, release
and submit (with current or stale tokens; one or a batch), verify (a rework waits for its
backoff), cancel, retry, expire, replays, and clock jumps; after every step the ledger's tasks
and event counts must equal the model's. Larger runs with AIOS_SOAK=1.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from aios_ledger.core import (
    CancelAnswer,
    ClaimAnswer,
    LedgerError,
    RetryAnswer,
    RetryPolicy,
    SubmitAnswer,
    Timestamp,
    VerifyAnswer,
)
from aios_ledger.core.tasks import retry_delay_ms
from aios_ledger.shell.tasks.ledger import TaskLedger
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule
from test_tasks_support import Clock

SOAK = os.environ.get("AIOS_SOAK") == "1"
TASK_IDS = ["a", "b", "c", "d"]
AGENTS = ["w1", "w2"]


@dataclass
class ModelTask:
    task_id: str
    priority: int
    max_attempts: int
    created_at: int
    status: str = "QUEUED"
    attempt: int = 0
    revision: int = 1
    claimed_by: str | None = None
    token: str | None = None
    expires_at: int | None = None
    not_before: int | None = None
    events: int = 1
    tokens: list[str] = field(default_factory=list)


class LedgerMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.directory = tempfile.mkdtemp(prefix="tasks-sm-")
        self.clock = Clock()
        self.seconds = 0
        self.ledger = TaskLedger(
            Path(self.directory) / "ledger.sqlite3", clock=self.clock, jitter=lambda: 0.0
        )
        self.tasks: dict[str, ModelTask] = {}
        self.counter = 0
        self.last_submit: tuple[str, str, dict[str, Any], str, SubmitAnswer] | None = None

    def teardown(self) -> None:
        self.ledger.close()
        shutil.rmtree(self.directory, ignore_errors=True)

    # -- helpers ----------------------------------------------------------------------------

    def key(self, kind: str) -> str:
        self.counter += 1
        return f"{kind}-{self.counter}"

    def stamp(self, seconds: int | None) -> str | None:
        if seconds is None:
            return None
        from datetime import timedelta

        moment = self.clock.now - timedelta(seconds=self.seconds - seconds)
        return Timestamp.from_datetime(moment).text

    def expect_refusal(self, code: str, work: Any) -> None:
        try:
            work()
        except LedgerError as refused:
            assert refused.code == code, (refused.code, code, refused.detail)
            return
        raise AssertionError(f"expected {code}")

    def write(self, task: ModelTask, **changes: Any) -> None:
        for name, value in changes.items():
            setattr(task, name, value)
        task.revision += 1
        task.events += 1

    def release(self, task: ModelTask, status: str) -> None:
        self.write(task, status=status, claimed_by=None, token=None, expires_at=None)

    def lease_refusal(self, task: ModelTask | None, token: str) -> str | None:
        if task is None:
            return "TASK_NOT_FOUND"
        if task.token is None or token != task.token:
            return "LEASE_INVALID"
        assert task.expires_at is not None
        if self.seconds >= task.expires_at:
            return "LEASE_EXPIRED"
        return None

    def pick_token(self, task: ModelTask | None, choice: int) -> str:
        """Mostly the current token; otherwise a stale one, or one never issued."""
        issued = [] if task is None else task.tokens
        if task is not None and task.token is not None and choice < 3:
            return task.token
        if not issued or choice == 5:
            return "never-issued-token-000000"
        return issued[choice % len(issued)]

    # -- rules ------------------------------------------------------------------------------

    @rule(
        task_id=st.sampled_from(TASK_IDS),
        priority=st.integers(0, 2),
        max_attempts=st.integers(1, 3),
    )
    def create(self, task_id: str, priority: int, max_attempts: int) -> None:
        mapping = {
            "task_id": task_id,
            "goal": "g",
            "instructions": "i",
            "priority": priority,
            "max_attempts": max_attempts,
        }
        if task_id in self.tasks:
            self.expect_refusal(
                "TASK_ALREADY_EXISTS",
                lambda: self.ledger.create_task(mapping, idempotency_key=self.key("create")),
            )
            return
        answer = self.ledger.create_task(mapping, idempotency_key=self.key("create"))
        assert answer["revision"] == 1 and answer["idempotent"] is False
        self.tasks[task_id] = ModelTask(task_id, priority, max_attempts, self.seconds)

    def eligible(self) -> list[ModelTask]:
        """The tasks a claim may take, in claim order."""
        eligible = [
            task
            for task in self.tasks.values()
            if task.status == "QUEUED"
            and task.attempt < task.max_attempts
            and (task.not_before is None or task.not_before <= self.seconds)
        ]
        # Creation order within a priority: the model's dict keeps it (a stable sort).
        eligible.sort(key=lambda task: -task.priority)
        return eligible

    def claimed(self, task: ModelTask, agent: str, lease: int, answer: ClaimAnswer) -> None:
        assert answer["task_id"] == task.task_id
        self.write(
            task,
            status="CLAIMED",
            attempt=task.attempt + 1,
            claimed_by=agent,
            token=answer["lease_token"],
            expires_at=self.seconds + lease,
        )
        task.tokens.append(answer["lease_token"])
        assert (answer["revision"], answer["attempt"]) == (task.revision, task.attempt)

    @rule(agent=st.sampled_from(AGENTS), lease=st.sampled_from([10, 20]))
    def claim(self, agent: str, lease: int) -> None:
        self.take_over()
        eligible = self.eligible()
        answer = self.ledger.claim(agent_id=agent, capabilities=[], lease_seconds=lease)
        if not eligible:
            assert answer is None
            return
        assert answer is not None
        self.claimed(eligible[0], agent, lease, answer)

    @rule(agent=st.sampled_from(AGENTS), lease=st.sampled_from([10, 20]), limit=st.integers(1, 3))
    def claim_many(self, agent: str, lease: int, limit: int) -> None:
        self.take_over()
        chosen = self.eligible()[:limit]
        answers = self.ledger.claim_many(
            agent_id=agent, capabilities=[], lease_seconds=lease, limit=limit
        )
        assert len(answers) == len(chosen)
        for task, answer in zip(chosen, answers, strict=True):
            self.claimed(task, agent, lease, answer)

    @rule(spoil=st.booleans())
    def submit_batch(self, spoil: bool) -> None:
        """Every lease still held, submitted in one batch; spoiled, the batch ends with the
        first task again, whose lease the batch's own first item released: nothing is kept."""
        held = [
            task
            for task in self.tasks.values()
            if task.token is not None and self.lease_refusal(task, task.token) is None
        ]
        if not held:
            return
        items = [
            {
                "task_id": task.task_id,
                "lease_token": task.token,
                "result": {"n": index},
                "idempotency_key": self.key("submit"),
            }
            for index, task in enumerate(held)
        ]
        if spoil:
            items.append({**items[0], "idempotency_key": self.key("submit")})
            self.expect_refusal("LEASE_INVALID", lambda: self.ledger.submit_results(items))
            return
        answers = self.ledger.submit_results(items)
        for task, answer in zip(held, answers, strict=True):
            self.release(task, "SUBMITTED")
            assert (answer["task_id"], answer["revision"]) == (task.task_id, task.revision)

    @rule(
        task_id=st.sampled_from(TASK_IDS), choice=st.integers(0, 5), lease=st.sampled_from([10, 20])
    )
    def heartbeat(self, task_id: str, choice: int, lease: int) -> None:
        task = self.tasks.get(task_id)
        token = self.pick_token(task, choice)
        refused = self.lease_refusal(task, token)
        if refused is not None:
            self.expect_refusal(
                refused,
                lambda: self.ledger.heartbeat(task_id, lease_token=token, lease_seconds=lease),
            )
            return
        assert task is not None
        answer = self.ledger.heartbeat(task_id, lease_token=token, lease_seconds=lease)
        self.write(task, expires_at=self.seconds + lease)
        assert answer["lease_expires_at"] == self.stamp(task.expires_at)

    @rule(task_id=st.sampled_from(TASK_IDS), choice=st.integers(0, 5))
    def release_lease(self, task_id: str, choice: int) -> None:
        task = self.tasks.get(task_id)
        token = self.pick_token(task, choice)
        refused = self.lease_refusal(task, token)
        if refused is not None:
            self.expect_refusal(
                refused, lambda: self.ledger.release(task_id, lease_token=token, reason="stop")
            )
            return
        assert task is not None
        answer = self.ledger.release(task_id, lease_token=token, reason="stop")
        self.release(task, "QUEUED" if task.attempt < task.max_attempts else "FAILED")
        assert (answer["status"], answer["attempt"]) == (task.status, task.attempt)

    @rule(task_id=st.sampled_from(TASK_IDS), choice=st.integers(0, 5))
    def submit(self, task_id: str, choice: int) -> None:
        task = self.tasks.get(task_id)
        token = self.pick_token(task, choice)
        key = self.key("submit")
        result = {"n": self.counter}
        refused = self.lease_refusal(task, token)
        if refused is not None:
            self.expect_refusal(
                refused,
                lambda: self.ledger.submit_result(
                    task_id, lease_token=token, result=result, idempotency_key=key
                ),
            )
            return
        assert task is not None
        answer = self.ledger.submit_result(
            task_id, lease_token=token, result=result, idempotency_key=key
        )
        self.release(task, "SUBMITTED")
        self.last_submit = (task_id, token, result, key, answer)

    @precondition(lambda self: self.last_submit is not None)
    @rule()
    def replay_submit(self) -> None:
        assert self.last_submit is not None
        task_id, token, result, key, first = self.last_submit
        again = self.ledger.submit_result(
            task_id, lease_token=token, result=result, idempotency_key=key
        )
        assert again == {**first, "idempotent": True}
        self.expect_refusal(
            "IDEMPOTENCY_CONFLICT",
            lambda: self.ledger.submit_result(
                task_id, lease_token=token, result={"other": True}, idempotency_key=key
            ),
        )

    @rule(
        task_id=st.sampled_from(TASK_IDS),
        decision=st.sampled_from(["SUCCEEDED", "NEEDS_REWORK", "FAILED"]),
    )
    def verify(self, task_id: str, decision: str) -> None:
        task = self.tasks.get(task_id)

        def call() -> VerifyAnswer:
            return self.ledger.verify(
                task_id, decision=decision, reason="r", idempotency_key=self.key("verify")
            )

        if task is None:
            self.expect_refusal("TASK_NOT_FOUND", call)
            return
        if task.status != "SUBMITTED":
            self.expect_refusal("INVALID_TRANSITION", call)
            return
        answer = call()
        if decision == "SUCCEEDED":
            status = "SUCCEEDED"
        elif decision == "FAILED" or task.attempt >= task.max_attempts:
            status = "FAILED"
        else:
            status = "QUEUED"
            backoff = retry_delay_ms(RetryPolicy(), task.attempt, 0.0) // 1000
            task.not_before = self.seconds + backoff
        self.release(task, status)
        assert answer["next_state"] == status

    @rule(task_id=st.sampled_from(TASK_IDS))
    def cancel(self, task_id: str) -> None:
        task = self.tasks.get(task_id)

        def call() -> CancelAnswer:
            return self.ledger.cancel(task_id, reason="r", idempotency_key=self.key("cancel"))

        if task is None:
            self.expect_refusal("TASK_NOT_FOUND", call)
            return
        if task.status not in ("QUEUED", "CLAIMED", "SUBMITTED"):
            self.expect_refusal("INVALID_TRANSITION", call)
            return
        call()
        self.release(task, "CANCELLED")

    @rule(task_id=st.sampled_from(TASK_IDS), extra=st.integers(1, 2))
    def retry(self, task_id: str, extra: int) -> None:
        task = self.tasks.get(task_id)

        def call() -> RetryAnswer:
            return self.ledger.retry(
                task_id, reason="r", idempotency_key=self.key("retry"), extra_attempts=extra
            )

        if task is None:
            self.expect_refusal("TASK_NOT_FOUND", call)
            return
        if task.status not in ("FAILED", "CANCELLED"):
            self.expect_refusal("INVALID_TRANSITION", call)
            return
        answer = call()
        task.max_attempts += extra
        task.not_before = None
        self.release(task, "QUEUED")
        assert (answer["max_attempts"], answer["revision"]) == (task.max_attempts, task.revision)

    def take_over(self) -> list[str]:
        """What a claim (and `expire_leases`) does first: every passed lease is requeued, or
        failed when its attempts are used up."""
        expired = []
        for task in self.tasks.values():
            due = task.expires_at is not None and task.expires_at <= self.seconds
            if task.status == "CLAIMED" and due:
                left = task.attempt < task.max_attempts
                self.release(task, "QUEUED" if left else "FAILED")
                expired.append(task.task_id)
        return expired

    @rule()
    def expire(self) -> None:
        answer = self.ledger.expire_leases()
        expected = self.take_over()
        assert sorted(item["task_id"] for item in answer["expired"]) == sorted(expected)

    @rule(seconds=st.sampled_from([5, 10]))
    def jump(self, seconds: int) -> None:
        self.clock.advance(seconds)
        self.seconds += seconds

    # -- comparison after every step --------------------------------------------------------

    @invariant()
    def ledger_matches_model(self) -> None:
        listed = {task["task_id"] for task in self.ledger.list_tasks()}
        assert listed == set(self.tasks)
        for task in self.tasks.values():
            row = self.ledger.get(task.task_id)
            observed = (
                row["status"],
                row["attempt"],
                row["revision"],
                row["claimed_by"],
                row["lease_expires_at"],
                row["max_attempts"],
                row["not_before"],
            )
            expected = (
                task.status,
                task.attempt,
                task.revision,
                task.claimed_by,
                self.stamp(task.expires_at),
                task.max_attempts,
                self.stamp(task.not_before),
            )
            assert observed == expected, (task.task_id, observed, expected)
            assert len(self.ledger.events(task.task_id)) == task.events == task.revision
            assert (row["lease_token_hash"] is None) == (task.token is None)


LedgerMachine.TestCase.settings = settings(
    max_examples=500 if SOAK else 60,
    stateful_step_count=80 if SOAK else 40,
    deadline=None,
)
test_task_ledger_matches_its_model = LedgerMachine.TestCase
