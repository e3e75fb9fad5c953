"""Following the log: which events a poll delivers, and where the next poll reads from.
On PostgreSQL an event may become visible after one with a higher id, so the cursor reads back
from the highest id of `settle_polls` polls ago and delivers each id once.
"""

from __future__ import annotations

from collections.abc import Sequence

import attrs
from aios_ledger.core.errors import LedgerError


@attrs.frozen
class FollowCursor:
    """Where a follower stands: the next read asks for ids above `after`, `delivered` printed."""

    after: int
    settle_polls: int = 1
    delivered: frozenset[int] = frozenset()
    recent_maxima: tuple[int, ...] = ()  # the highest id seen by each of the last polls

    def __attrs_post_init__(self) -> None:
        if self.after < 0 or self.settle_polls < 1:
            raise LedgerError("FIELDS_INVALID", "after must be >= 0 and settle_polls >= 1")

    def advance(self, seen: Sequence[int]) -> tuple[tuple[int, ...], FollowCursor]:
        """The new ids of one read, in order, and the cursor after delivering them."""
        fresh = tuple(sorted({i for i in seen if i > self.after and i not in self.delivered}))
        highest = max((self.after, *self.recent_maxima[-1:], *seen))
        maxima = (*self.recent_maxima, highest)[-self.settle_polls :]
        after = maxima[0] if len(maxima) == self.settle_polls else self.after
        delivered = frozenset(i for i in (*self.delivered, *fresh) if i > after)
        return fresh, attrs.evolve(self, after=after, delivered=delivered, recent_maxima=maxima)
