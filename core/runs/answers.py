"""What the run store's decisions answer: a run's row and an appended event's row, as dicts
(`TypedDict`s: checked shapes for mypy, plain dicts at run time)."""

from __future__ import annotations

from typing import TypedDict


class RunAnswer(TypedDict):
    """A run's row; `idempotent` when the same run was asked for again."""

    run_id: str
    session_id: str
    prompt: str
    event_count: int
    created_at: str
    updated_at: str
    idempotent: bool


class RunEventAnswer(TypedDict):
    run_id: str
    seq: int
    kind: str
    payload_json: str
    created_at: str
