"""Sealing, at adoption, the events the older runtime stored without seals."""

from __future__ import annotations

from typing import TypedDict

import attrs
from aios_ledger.core.log.plan import WritePlan
from aios_ledger.core.log.records import EventRow
from aios_ledger.core.log.tail import LogTail
from aios_ledger.core.timestamps import Timestamp, require_timestamp


class AdoptionAnswer(TypedDict):
    sealed: int


@attrs.frozen
class AdoptionState:
    """The events stored without a seal, in event order, and the log's tail at their chains."""

    unsealed: tuple[EventRow, ...]
    tail: LogTail


@attrs.frozen
class AdoptionSealRequest:
    """Seal every event the older runtime left unsealed (the request has nothing to choose)."""


def decide_adoption_seals(
    state: AdoptionState, request: AdoptionSealRequest, *, now: Timestamp
) -> WritePlan[AdoptionAnswer]:
    """A seal for each unsealed event, marked as sealed at adoption: the log vouches only that
    nothing changed since. `now` is recorded nowhere, so sealing again gives the same seals."""
    require_timestamp(now)
    writes, after = state.tail.seal_in_place(state.unsealed)
    answer: AdoptionAnswer = {"sealed": len(writes)}
    return WritePlan(writes=writes, events=(), response=answer, tail=after)
