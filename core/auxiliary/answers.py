"""What the auxiliary run decisions answer (`TypedDict`s: checked shapes for mypy, plain dicts
at run time). A transition answers the run's row as written (`AuxiliaryRunRow`) itself."""

from __future__ import annotations

from typing import NotRequired, TypedDict


class SpawnAnswer(TypedDict):
    """The run's id, its state and its spec's digest; `idempotent` (true) only when the same
    spec was spawned before (its state is then wherever the run is now)."""

    id: str
    state: str
    spec_digest: str
    idempotent: NotRequired[bool]


class RecoveryAnswer(TypedDict):
    """The ids of the unfinished runs recovery failed as INTERRUPTED."""

    recovered: list[str]
