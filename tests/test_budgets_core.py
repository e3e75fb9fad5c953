"""Budgets in the pure core: the request fields, the over-budget rule, and golden plans of a
create with a budget and of submits within and over it. No database here."""

from __future__ import annotations

import json
from typing import Any

import pytest
from aios_ledger.core import (
    LedgerError,
    SubmitRequest,
    TaskCreateCommand,
    TaskCreateRequest,
    TaskState,
    canonical_json,
    decide_create,
    decide_submit,
)
from aios_ledger.core.actors import Actor
from aios_ledger.core.tasks.budgets import (
    NO_SPEND,
    Money,
    SpendTotals,
    TaskBudget,
    Usage,
    over_budget,
)
from aios_ledger.core.tasks.decisions import create_digest
from syrupy.assertion import SnapshotAssertion
from test_tasks_core import FRESH, HISTORY, JITTER, NOW, TOKEN, plan_json, row

# Who the decisions here act as.
ACTOR = Actor("tester", "library")

BUDGET: dict[str, Any] = {
    "wall_seconds": 60,
    "input_tokens": 1000,
    "output_tokens": 500,
    "cost": {"micros": 2_000_000, "currency": "EUR"},
}


def _budgeted(status: str, **changes: Any) -> Any:
    return row(status, metadata_json=canonical_json({"budget": BUDGET}), **changes)


def _submit(task: Any, usage: Any, spent: SpendTotals | None = None) -> Any:
    request = SubmitRequest.from_mapping(
        {
            "task_id": "t1",
            "lease_token": TOKEN,
            "result": {"status": "SUCCEEDED"},
            "idempotency_key": "submit-t1-1",
            "usage": usage,
        }
    )
    state = TaskState(task, HISTORY, spent=spent)
    return decide_submit(state, request, now=NOW, contracts={}, jitter=JITTER, actor=ACTOR)


@pytest.mark.parametrize(
    ("budget", "field"),
    [
        ({}, "task.budget"),
        ({"wall_seconds": 0}, "task.budget.wall_seconds"),
        ({"wall_seconds": 1.5}, "task.budget.wall_seconds"),
        ({"input_tokens": -1}, "task.budget.input_tokens"),
        ({"output_tokens": True}, "task.budget.output_tokens"),
        ({"cost": {"micros": 0.5, "currency": "EUR"}}, "task.budget.cost.micros"),
        ({"cost": {"micros": "5", "currency": "EUR"}}, "task.budget.cost.micros"),
        ({"cost": {"micros": 5, "currency": "euro"}}, "task.budget.cost.currency"),
        ({"cost": {"micros": 5}}, "task.budget.cost"),
        ({"cost": 5.0}, "task.budget.cost"),
        ({"max_attempts": 3}, "task.budget"),  # the task's own max_attempts is the limit
        ("60s", "task.budget"),
    ],
)
def test_a_bad_budget_is_refused_naming_its_field(budget: object, field: str) -> None:
    with pytest.raises(LedgerError, match="FIELDS_INVALID") as refused:
        TaskCreateRequest.from_mapping({"goal": "g", "instructions": "i", "budget": budget})
    assert field in refused.value.detail


@pytest.mark.parametrize(
    "usage",
    [
        {"input_tokens": -1},
        {"input_tokens": 10**13},
        {"cost": {"micros": 1.0, "currency": "EUR"}},
        {"cost": {"micros": 1, "currency": "EU"}},
        {"tokens": 5},
        {"model": "a model"},
        {"model": "m" * 257},
        {"model": 4},
        [1, 2],
    ],
)
def test_a_bad_usage_is_refused(usage: object) -> None:
    with pytest.raises(LedgerError, match=r"FIELDS_INVALID: submit\.usage"):
        _submit(_budgeted("CLAIMED"), usage)


def test_a_budget_may_not_be_smuggled_in_through_the_metadata() -> None:
    with pytest.raises(LedgerError, match=r"FIELDS_INVALID: task\.metadata"):
        TaskCreateRequest.from_mapping(
            {"goal": "g", "instructions": "i", "metadata": {"budget": BUDGET}}
        )


def test_the_budget_is_part_of_the_create_digest_only_when_set() -> None:
    plain = TaskCreateRequest.from_mapping({"goal": "g", "instructions": "i"})
    budgeted = TaskCreateRequest.from_mapping({"goal": "g", "instructions": "i", "budget": BUDGET})
    assert "budget" not in plain.public()
    assert create_digest(plain) != create_digest(budgeted)


def test_a_usage_may_name_its_model_which_is_sealed_only_when_named() -> None:
    named = Usage.from_mapping({"input_tokens": 3, "model": "org/model-4o:2024-08-06"})
    assert named.public()["model"] == "org/model-4o:2024-08-06"
    assert "model" not in Usage.from_mapping({"input_tokens": 3}).public()


def test_a_submit_without_usage_keeps_its_digest() -> None:
    request = SubmitRequest.from_mapping(
        {"task_id": "t1", "lease_token": TOKEN, "result": {}, "idempotency_key": "k"}
    )
    assert "usage" not in request.public()


def _usage(input_tokens: int = 0, output_tokens: int = 0, cost: Money | None = None) -> Usage:
    return Usage(input_tokens=input_tokens, output_tokens=output_tokens, cost=cost)


def test_the_spend_is_held_against_the_budget_over_every_attempt() -> None:
    budget = TaskBudget(input_tokens=100, cost=Money(micros=1000, currency="EUR"))
    assert over_budget(budget, NO_SPEND, _usage(100, 10**9, Money(1000, "EUR"))) == []
    assert over_budget(budget, NO_SPEND, _usage(101)) == ["input_tokens"]
    earlier = SpendTotals(60, 0, 900, "EUR", 1)
    assert over_budget(budget, earlier, _usage(40, 0, Money(100, "EUR"))) == []
    assert over_budget(budget, earlier, _usage(41, 0, Money(101, "EUR"))) == [
        "input_tokens",
        "cost",
    ]
    assert over_budget(None, earlier, _usage(10**12)) == []


def test_a_cost_in_another_currency_cannot_be_held_to_the_budget() -> None:
    budget = TaskBudget(cost=Money(micros=1000, currency="EUR"))
    assert over_budget(budget, NO_SPEND, _usage(cost=Money(1, "USD"))) == ["cost"]
    assert over_budget(budget, SpendTotals(0, 0, 1, "USD", 1), _usage()) == ["cost"]
    assert over_budget(budget, SpendTotals(0, 0, 2, "EUR", 2), _usage()) == ["cost"]
    # A budget without a cost limit takes any currency.
    assert over_budget(TaskBudget(input_tokens=5), NO_SPEND, _usage(cost=Money(1, "USD"))) == []


def test_an_over_budget_result_of_an_auto_task_is_not_verified_automatically() -> None:
    task = _budgeted("CLAIMED", verification_mode="auto")
    within = _submit(task, {"input_tokens": 10, "output_tokens": 10})
    assert [appended.event.event_type for appended in within.events] == [
        "RESULT_SUBMITTED",
        "TASK_VERIFIED",
    ]
    over = _submit(task, {"input_tokens": 1001})
    assert [appended.event.event_type for appended in over.events] == ["RESULT_SUBMITTED"]
    assert over.response["status"] == "SUBMITTED"
    assert over.response["over_budget"] is True
    assert json.loads(over.events[0].event.payload_json)["over_budget"] == {
        "code": "BUDGET_EXCEEDED",
        "exceeded": ["input_tokens"],
    }
    # The spend row is written and sealed by the submit's event, over budget or not.
    for plan in (within, over):
        assert "task_spend_insert" in [write.statement for write in plan.writes]
        assert "task_spend" in [sealed.row_table for sealed in plan.events[0].rows]


def test_golden_budget_plans(golden: SnapshotAssertion) -> None:
    create = TaskCreateCommand.from_mapping(
        {
            "idempotency_key": "create-t1",
            "task": {
                "task_id": "t1",
                "goal": "g",
                "instructions": "i",
                "metadata": {"scope": "legacy"},
                "budget": BUDGET,
            },
        }
    )
    usage = {"input_tokens": 400, "output_tokens": 100, "cost": {"micros": 900, "currency": "EUR"}}
    earlier = SpendTotals(700, 0, 1_999_500, "EUR", 1)
    plans = {
        "create": decide_create(
            TaskState(None, FRESH, next_seq=1), create, now=NOW, task_id="t1", actor=ACTOR
        ),
        "submit_within": _submit(_budgeted("CLAIMED", verification_mode="auto"), usage),
        "submit_over": _submit(_budgeted("CLAIMED", verification_mode="auto"), usage, earlier),
    }
    assert golden == {name: plan_json(plan) for name, plan in plans.items()}
