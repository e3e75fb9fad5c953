"""Batched transitions: `claim_many`, `submit_results` and `verify_results`, each one
transaction in which every item is the same decision its single call makes, all or nothing."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from aios_ledger.core import LedgerError
from aios_ledger.core.actors import Actor
from aios_ledger.core.batches import MAX_BATCH
from aios_ledger.core.tasks.requests import MAX_CLAIM_BATCH
from aios_ledger.shell import Database, TaskLedger
from aios_ledger.shell.log.verification import verify_log
from conftest import both_engines
from legacy_fixtures import dump, rows
from test_tasks_support import START, Clock, refusal

# Who the decisions here act as.
ACTOR = Actor("tester", "library")

pytest_generate_tests = both_engines


@pytest.fixture
def path(ledger_target: Path) -> Path:
    return ledger_target


@pytest.fixture
def ledger(path: Path) -> Iterator[TaskLedger]:
    with TaskLedger(path, clock=Clock()) as opened:
        yield opened


def _create(ledger: TaskLedger, count: int, **fields: Any) -> list[str]:
    prefix = fields.pop("prefix", "t")
    answers = ledger.create_tasks(
        (
            {"task_id": f"{prefix}{n:03}", "goal": "g", "instructions": "i", **fields},
            f"create-{prefix}{n}",
        )
        for n in range(count)
    )
    return [answer["task_id"] for answer in answers]


def _claim_many(ledger: TaskLedger, limit: int, capabilities: list[str] | None = None) -> Any:
    return ledger.claim_many(
        agent_id="agent-1", capabilities=capabilities or [], lease_seconds=60, limit=limit
    )


def _submissions(claims: list[dict[str, Any]], tag: str = "s") -> list[dict[str, Any]]:
    return [
        {
            "task_id": claim["task_id"],
            "lease_token": claim["lease_token"],
            "result": {"n": index},
            "idempotency_key": f"{tag}-{claim['task_id']}",
        }
        for index, claim in enumerate(claims)
    ]


def _verdicts(task_ids: list[str], decision: str = "SUCCEEDED") -> list[dict[str, Any]]:
    return [
        {
            "task_id": task_id,
            "decision": decision,
            "reason": "ok",
            "idempotency_key": f"v-{task_id}",
        }
        for task_id in task_ids
    ]


def _events(path: Path, kind: str) -> list[tuple[Any, ...]]:
    return rows(path, "SELECT task_id FROM events WHERE event_type = ? ORDER BY event_id", (kind,))


def test_claim_many_takes_tasks_in_claim_order_each_under_its_own_lease(
    ledger: TaskLedger, path: Path
) -> None:
    _create(ledger, 3, priority=1)
    low = _create(ledger, 2, prefix="low")
    claims = _claim_many(ledger, 4)
    assert [claim["task_id"] for claim in claims] == ["t000", "t001", "t002", low[0]]
    assert len({claim["lease_token"] for claim in claims}) == 4
    assert {claim["status"] for claim in claims} == {"CLAIMED"}
    assert [row[0] for row in _events(path, "TASK_CLAIMED")] == [c["task_id"] for c in claims]
    # every lease is a real one: its token heartbeats its task, and only its task
    for claim in claims:
        beat = ledger.heartbeat(claim["task_id"], lease_token=claim["lease_token"], lease_seconds=9)
        assert beat["status"] == "CLAIMED"
    other = claims[1]["lease_token"]
    assert refusal(lambda: ledger.heartbeat("t000", lease_token=other, lease_seconds=9)) == (
        "LEASE_INVALID"
    )
    assert [claim["task_id"] for claim in _claim_many(ledger, 4)] == [low[1]]
    assert _claim_many(ledger, 4) == []


# More tasks a claimer may not take than a page of candidates ever held (32).
MANY = 40


def test_claim_many_looks_past_tasks_it_may_not_take(ledger: TaskLedger) -> None:
    _create(ledger, MANY, priority=5, required_capabilities=["gpu"])
    plain = _create(ledger, 3, prefix="plain")
    assert [claim["task_id"] for claim in _claim_many(ledger, 3)] == plain
    assert len(_claim_many(ledger, MAX_CLAIM_BATCH, ["gpu"])) == MANY


@pytest.mark.parametrize("limit", [0, -1, MAX_CLAIM_BATCH + 1, True, "3", 2.0, None])
def test_claim_many_refuses_a_limit_out_of_range(
    ledger: TaskLedger, path: Path, limit: Any
) -> None:
    _create(ledger, 2)
    before = dump(path)
    assert refusal(lambda: _claim_many(ledger, limit)) == "FIELDS_INVALID"
    assert dump(path) == before


def test_a_batch_of_submissions_and_verdicts_runs_whole_lifecycles(
    ledger: TaskLedger, path: Path
) -> None:
    task_ids = _create(ledger, 5)
    claims = _claim_many(ledger, 5)
    submitted = ledger.submit_results(_submissions(claims))
    assert [answer["task_id"] for answer in submitted] == task_ids
    assert {answer["status"] for answer in submitted} == {"SUBMITTED"}
    assert [ledger.get(task_id)["result"] for task_id in task_ids] == [{"n": n} for n in range(5)]
    verified = ledger.verify_results(
        _verdicts(task_ids[:3]) + _verdicts(task_ids[3:], decision="NEEDS_REWORK")
    )
    assert [answer["status"] for answer in verified] == ["SUCCEEDED"] * 3 + ["QUEUED"] * 2
    assert len(_events(path, "RESULT_SUBMITTED")) == 5
    assert len(_events(path, "TASK_VERIFIED")) == 5
    with Database(path) as db:
        assert verify_log(db).intact


def test_a_batch_replayed_gives_the_recorded_answers_back(ledger: TaskLedger, path: Path) -> None:
    task_ids = _create(ledger, 3)
    claims = _claim_many(ledger, 3)
    first = ledger.submit_results(_submissions(claims))
    before = dump(path)
    again = ledger.submit_results(_submissions(claims))
    assert again == [{**answer, "idempotent": True} for answer in first]
    judged = ledger.verify_results(_verdicts(task_ids))
    assert ledger.verify_results(_verdicts(task_ids)) == [
        {**answer, "idempotent": True} for answer in judged
    ]
    assert len(_events(path, "RESULT_SUBMITTED")) == 3
    assert before != dump(path)  # the verdicts were written once


# (changes, code, repeat): the changes go to the last of three items, or, with repeat, to a
# copy of the first item added as a fourth.
@pytest.mark.parametrize(
    ("changes", "code", "repeat"),
    [
        pytest.param({"lease_token": "x" * 40}, "LEASE_INVALID", False, id="foreign token"),
        pytest.param({"result": [1]}, "FIELDS_INVALID", False, id="result not an object"),
        pytest.param({"task_id": "missing"}, "TASK_NOT_FOUND", False, id="no such task"),
        pytest.param(
            {"result": {"force_push": True}}, "RESULT_GOVERNANCE_VIOLATION", False, id="governance"
        ),
        # the first submission of the batch released that task's lease
        pytest.param({"idempotency_key": "again"}, "LEASE_INVALID", True, id="same task, new key"),
        pytest.param({"result": {"n": 9}}, "IDEMPOTENCY_CONFLICT", True, id="same key, new result"),
    ],
)
def test_one_refused_submission_refuses_the_whole_batch(
    ledger: TaskLedger, path: Path, changes: dict[str, Any], code: str, repeat: bool
) -> None:
    _create(ledger, 3)
    items = _submissions(_claim_many(ledger, 3))
    if repeat:
        items.append(dict(items[0], **changes))
    else:
        items[-1].update(changes)
    before = dump(path)
    with pytest.raises(LedgerError) as refused:
        ledger.submit_results(items)
    assert refused.value.code == code
    assert refused.value.detail.startswith(f"item {len(items) - 1}: ")
    assert dump(path) == before


def test_one_refused_verdict_refuses_the_whole_batch(ledger: TaskLedger, path: Path) -> None:
    task_ids = _create(ledger, 3)
    ledger.submit_results(_submissions(_claim_many(ledger, 2)))
    before = dump(path)
    with pytest.raises(LedgerError) as refused:
        ledger.verify_results(_verdicts(task_ids))  # the third task was never submitted
    assert (refused.value.code, refused.value.detail[:8]) == ("INVALID_TRANSITION", "item 2: ")
    with pytest.raises(LedgerError) as refused:
        ledger.verify_results(_verdicts(task_ids[:2], decision="MAYBE"))
    assert (refused.value.code, refused.value.detail[:8]) == ("FIELDS_INVALID", "item 0: ")
    assert dump(path) == before


@pytest.mark.parametrize(
    "items",
    [[], None, 7, "abc", [None], [[1, 2]], [{}] * (MAX_BATCH + 1)],
    ids=["empty", "None", "int", "str", "[None]", "[list]", "too many"],
)
def test_a_batch_that_is_not_a_list_of_requests_is_refused(
    ledger: TaskLedger, path: Path, items: Any
) -> None:
    _create(ledger, 1)
    before = dump(path)
    assert refusal(lambda: ledger.submit_results(items)) == "FIELDS_INVALID"
    assert refusal(lambda: ledger.verify_results(items)) == "FIELDS_INVALID"
    assert dump(path) == before


@pytest.mark.parametrize(
    ("items", "code", "named"),
    [
        ([], "FIELDS_INVALID", None),
        (
            [({"goal": "g", "instructions": "i"}, f"k{n}") for n in range(MAX_BATCH + 1)],
            "FIELDS_INVALID",
            None,
        ),
        ([({"goal": "g", "instructions": "i"}, "k0"), ("no key",)], "FIELDS_INVALID", 1),
        ([({"goal": "g", "instructions": "i"}, "k0"), ({"goal": 5}, "k1")], "FIELDS_INVALID", 1),
        (
            [({"goal": "g", "instructions": "i"}, "k0"), ({"task_id": "t000"}, "k1")],
            "FIELDS_INVALID",
            1,
        ),
        (
            [({"goal": "g", "instructions": "i"}, "k0"), ({"goal": "g", "instructions": "i"}, "")],
            "FIELDS_INVALID",
            1,
        ),
        ([({"task_id": "t000", "goal": "g", "instructions": "i"}, "k0")], "TASK_ALREADY_EXISTS", 0),
    ],
    ids=["empty", "too many", "not a pair", "bad field", "missing field", "bad key", "exists"],
)
def test_a_refused_create_batch_names_its_item_and_writes_nothing(
    ledger: TaskLedger, path: Path, items: Any, code: str, named: int | None
) -> None:
    _create(ledger, 1)
    before = dump(path)
    with pytest.raises(LedgerError) as refused:
        ledger.create_tasks(items)
    assert refused.value.code == code
    if named is not None:
        assert refused.value.detail.startswith(f"item {named}: ")
    assert dump(path) == before


def test_a_single_create_refusal_names_no_item(ledger: TaskLedger) -> None:
    _create(ledger, 1)
    with pytest.raises(LedgerError) as refused:
        ledger.create_task(
            {"task_id": "t000", "goal": "g", "instructions": "i"}, idempotency_key="k"
        )
    assert refused.value.code == "TASK_ALREADY_EXISTS"
    assert not refused.value.detail.startswith("item ")


def test_a_create_batch_of_the_largest_size_is_written(ledger: TaskLedger) -> None:
    answers = ledger.create_tasks(
        ({"goal": "g", "instructions": "i"}, f"k{n}") for n in range(MAX_BATCH)
    )
    assert len({answer["task_id"] for answer in answers}) == MAX_BATCH
    assert len(ledger.list_tasks("QUEUED", limit=MAX_BATCH)) == MAX_BATCH


def test_decisions_of_one_transaction_start_from_the_tail_the_last_plan_left(
    ledger: TaskLedger, path: Path
) -> None:
    """Two heartbeats on one task in one transaction: the second is sealed onto the first's
    event from the tail its plan left, without the log being read again."""
    from aios_ledger.core import (
        HeartbeatRequest,
        TaskRow,
        TaskState,
        Timestamp,
        chain_of,
        decide_heartbeat,
    )
    from aios_ledger.shell.db.apply import PlanExecutor
    from aios_ledger.shell.db.connection import fetch_record

    (task_id,) = _create(ledger, 1)
    (claim,) = _claim_many(ledger, 1)
    request = HeartbeatRequest.from_mapping(
        {"task_id": task_id, "lease_token": claim["lease_token"], "lease_seconds": 60}
    )

    def beat(plans: PlanExecutor) -> Any:
        task = fetch_record(plans.conn, "get_task", {"task_id": task_id}, TaskRow)
        tail = plans.tail(chain_of(task_id))
        plan = decide_heartbeat(
            TaskState(task, tail), request, now=Timestamp.from_datetime(START), actor=ACTOR
        )
        plans.apply(plan)
        return tail, plan

    def write(conn: Any) -> list[Any]:
        plans = PlanExecutor(conn)
        return [beat(plans), beat(plans)]

    (_, first), (second_tail, second) = ledger.database.write(write)
    assert second_tail == first.tail
    first_seal, second_seal = first.events[0].seal, second.events[0].seal
    assert (second_seal.chain_seq, second_seal.prev_seal) == (
        first_seal.chain_seq + 1,
        first_seal.seal,
    )
    assert second_seal.event_id == first_seal.event_id + 1
    with Database(path) as db:
        assert verify_log(db).intact
