"""What the auxiliary run decisions answer (`TypedDict`s: checked shapes for mypy, plain dicts
at run time). A transition answers the run's row as written (`AuxiliaryRunRow`) itself."""

from __future__ import annotations

from typing import NotRequired, TypedDict


class SpawnAnswer(TypedDict):
    """The run's id, state and spec digest; `idempotent` when the same spec was spawned before."""

    id: str
    state: str
    spec_digest: str
    idempotent: NotRequired[bool]


class RecoveryAnswer(TypedDict):
    """The ids of the unfinished runs recovery failed as INTERRUPTED."""

    recovered: list[str]
