"""Batches: many requests in one call, all or none, each refusal naming its item; bounded so that
one call does not hold the write lock long while other writers wait."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TypeVar

from aios_ledger.core.errors import LedgerError

MAX_BATCH = 10_000

Item = TypeVar("Item")
Answer = TypeVar("Answer")


def structure_batch(
    items: object, parse: Callable[[object], Answer], *, shape: str = "a list of request objects"
) -> list[Answer]:
    """The parsed items of a batch (a JSON array of 1 to MAX_BATCH); a refusal names the item."""
    if not isinstance(items, list):
        raise LedgerError("FIELDS_INVALID", f"items must be {shape}")
    if not 1 <= len(items) <= MAX_BATCH:
        raise LedgerError("FIELDS_INVALID", f"a batch holds 1 to {MAX_BATCH} items")
    return each_item(items, parse)


def each_item(items: Sequence[Item], step: Callable[[Item], Answer]) -> list[Answer]:
    """`step` over the items in order; a refusal keeps its code and says which item it was."""
    answers = []
    for index, item in enumerate(items):
        try:
            answers.append(step(item))
        except LedgerError as refused:
            raise _in_item(refused, index) from None
    return answers


def _in_item(refused: LedgerError, index: int) -> LedgerError:
    error = type(refused)(refused.code, f"item {index}: {refused.detail}")
    field = getattr(refused, "field", None)
    if field is not None:
        error.field = field  # type: ignore[attr-defined]
    return error
