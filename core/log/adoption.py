"""Sealing, at adoption, the events the older runtime stored without seals."""

from __future__ import annotations

from collections.abc import Sequence

from aios_ledger.core.log.records import EventRow
from aios_ledger.core.log.tail import LogTail
from aios_ledger.core.plan import WritePlan


def decide_adoption_seals(unsealed: Sequence[EventRow], *, tail: LogTail) -> WritePlan:
    """A seal for each of `unsealed` (in event order), marked as sealed at adoption: the log
    cannot vouch for what happened before it was taken over, only that nothing changed since."""
    writes, after = tail.seal_in_place(unsealed)
    return WritePlan(writes=writes, events=(), response={"sealed": len(writes)}, tail=after)
