"""What a task may spend, what an attempt reports it spent, and whether a result is over budget;
money is integer micro-units, never a float."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Annotated, Any, NamedTuple

import attrs
from aios_ledger.core.errors import LedgerError
from aios_ledger.core.jsonvalue import JsonObject, JsonValue
from aios_ledger.core.kinds import Between, Text
from aios_ledger.core.log.rows import TASK_SPEND, RowImage, row_image
from aios_ledger.core.records import record_from_row
from aios_ledger.core.structuring import FieldRefused, Structured, structure, unstructure

MAX_WALL_SECONDS = 7 * 24 * 3600
# Bounds that no honest report comes near and that every engine's 64-bit integers hold summed.
MAX_TOKENS = 10**12
MAX_MICROS = 10**15
CURRENCY = re.compile(r"^[A-Z]{3}$")
# A model's name as providers spell them: printable ASCII without spaces.
MAX_MODEL_NAME = 256
MODEL_NAME = re.compile(r"^[!-~]+$")
BUDGET_EXCEEDED = "BUDGET_EXCEEDED"

Tokens = Annotated[int, Between(0, MAX_TOKENS)]
Micros = Annotated[int, Between(0, MAX_MICROS)]
Currency = Annotated[str, Text(max_length=3, pattern=CURRENCY)]
ModelName = Annotated[str, Text(max_length=MAX_MODEL_NAME, pattern=MODEL_NAME)]


@attrs.frozen
class Money:
    """An amount: `micros` millionths of one unit of `currency` (ISO 4217, e.g. `EUR`)."""

    micros: Micros
    currency: Currency


def _some_limit(budget: TaskBudget, attribute: attrs.Attribute[Money | None], value: Any) -> None:
    if all(getattr(budget, name) is None for name in LIMITS) and value is None:
        raise FieldRefused("a budget sets at least one limit")


@attrs.frozen(kw_only=True)
class TaskBudget:
    """A task's limits, each optional (None: no limit), at least one set."""

    wall_seconds: Annotated[int, Between(1, MAX_WALL_SECONDS)] | None = None
    input_tokens: Tokens | None = None
    output_tokens: Tokens | None = None
    cost: Money | None = attrs.field(default=None, validator=_some_limit)

    def public(self) -> JsonObject:
        return unstructure(self)


# The limits of a budget, by name; `cost` last (its validator sees the others).
LIMITS = ("wall_seconds", "input_tokens", "output_tokens")


@attrs.frozen(kw_only=True)
class Usage(Structured):
    """What an attempt reports it spent: tokens in and out, what they cost (if known), and the
    model that spent them (if it says), sealed with the result's event."""

    WHAT = "usage"

    input_tokens: Tokens = 0
    output_tokens: Tokens = 0
    cost: Money | None = None
    model: ModelName | None = None

    def public(self) -> JsonObject:
        # A usage without a model is sealed as it was before `model` was known.
        public = unstructure(self)
        if self.model is None:
            del public["model"]
        return public


class SpendRow(NamedTuple):
    """One row of `task_spend`: one attempt's reported spend, never changed."""

    spend_key: str
    task_id: str
    attempt: int
    agent_id: str | None
    repository: str | None
    day: str
    input_tokens: int
    output_tokens: int
    cost_micros: int
    cost_currency: str | None
    over_budget: int
    created_at: str

    @classmethod
    def from_row(cls, row: Mapping[str, Any]) -> SpendRow:
        return record_from_row(cls, row)

    def image(self) -> RowImage:
        return row_image(TASK_SPEND, self.spend_key, self._asdict())


class SpendTotals(NamedTuple):
    """A task's spend before a submit; a cost in several currencies holds against no budget."""

    input_tokens: int
    output_tokens: int
    cost_micros: int
    cost_currency: str | None
    currencies: int

    @classmethod
    def from_row(cls, row: Mapping[str, Any]) -> SpendTotals:
        return record_from_row(cls, row)


NO_SPEND = SpendTotals(0, 0, 0, None, 0)


def spend_key(task_id: str, attempt: int) -> str:
    return f"{task_id} {attempt}"


def budget_of(metadata: JsonObject, task_id: str) -> TaskBudget | None:
    """The budget in a task's metadata (None: none), else `TASK_ROW_CORRUPT`."""
    stored = metadata.get("budget")
    if stored is None:
        return None
    try:
        return structure(stored, TaskBudget, what="budget")
    except LedgerError as refused:
        raise LedgerError("TASK_ROW_CORRUPT", f"task {task_id}: {refused.detail}") from None


def over_budget(budget: TaskBudget | None, before: SpendTotals, usage: Usage) -> list[str]:
    """The limits the spend passes; a cost in another currency counts as past them."""
    if budget is None:
        return []
    passed: list[str] = []
    spent = {
        "input_tokens": before.input_tokens + usage.input_tokens,
        "output_tokens": before.output_tokens + usage.output_tokens,
    }
    for name, total in spent.items():
        limit = getattr(budget, name)
        if limit is not None and total > limit:
            passed.append(name)
    limit = budget.cost
    if limit is not None:
        currency = limit.currency
        foreign = usage.cost is not None and usage.cost.currency != currency
        earlier_foreign = before.currencies > 1 or before.cost_currency not in (None, currency)
        micros = before.cost_micros + (0 if usage.cost is None else usage.cost.micros)
        if foreign or earlier_foreign or micros > limit.micros:
            passed.append("cost")
    return passed


def over_budget_mark(passed: list[str]) -> JsonObject:
    """What an over-budget result's event says: the stable code and the limits passed."""
    exceeded: list[JsonValue] = list(passed)
    return {"code": BUDGET_EXCEEDED, "exceeded": exceeded}
