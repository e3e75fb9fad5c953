"""Folding a chain's seals, each holding the columns its transition changed of the task row, into
the row they say was written last, which the verifier holds against the stored row. A seal with
neither changes nor a digest ends the chained digest: the next write holds every column again.
"""

from __future__ import annotations

from typing import Any

from aios_ledger.core.errors import LedgerError
from aios_ledger.core.jsonvalue import loads_document
from aios_ledger.core.log.rows import TASKS, chained_row_digest, row_digest

BROKEN_LINK = "the chained row digest does not follow from the chain's previous one and the changes"
BROKEN_CHANGES = "the changes a seal holds are not an object of columns"


class ChainedRowFold:
    """The task row `key`'s chain folded seal by seal (`add`, in chain order)."""

    def __init__(self, key: str) -> None:
        self.key = key
        self._digest: str | None = None
        self._columns: dict[str, Any] | None = None
        self._event_id: int | None = None
        self._problem: tuple[int, str] | None = None

    def add(self, event_id: int, changes: object, digest: object) -> None:
        """One seal of the chain: its event id and chained row columns."""
        if self._problem is not None:
            return
        if changes is None:
            if digest is None:
                self._digest = None  # carried none on: the next write holds every column
            elif digest != self._digest:
                self._problem = (event_id, BROKEN_LINK)
            return
        if not isinstance(changes, str) or not isinstance(digest, str):
            self._problem = (event_id, BROKEN_CHANGES)
            return
        try:
            expected = chained_row_digest(self._digest, TASKS, self.key, changes)
            parsed = loads_document(changes, what="row changes")
        except (LedgerError, ValueError):
            self._problem = (event_id, BROKEN_CHANGES)
            return
        if expected != digest:
            self._problem = (event_id, BROKEN_LINK)
            return
        if not isinstance(parsed, dict):
            self._problem = (event_id, BROKEN_CHANGES)
            return
        if self._digest is None or self._columns is None:
            self._columns = dict(parsed)  # the chain's first: every column
        else:
            self._columns.update(parsed)
        self._digest = digest
        self._event_id = event_id

    @property
    def event_id(self) -> int | None:
        """The last event whose seal's changes wrote the row (None: none did)."""
        return self._event_id if self._problem is None else self._problem[0]

    @property
    def problem(self) -> tuple[int, str] | None:
        """(event id, detail) of the first seal the fold could not follow."""
        return self._problem

    def columns(self) -> dict[str, Any] | None:
        return None if self._columns is None else dict(self._columns)

    def sealed(self) -> tuple[int, str | None] | None:
        """(the last chained writer's event id, the digest of the row it left) as `check_row`
        takes it; None when no seal's changes wrote the row, no digest when the fold broke."""
        if self._problem is not None:
            return self._problem[0], None
        if self._event_id is None or self._columns is None:
            return None
        return self._event_id, row_digest(TASKS, self.key, self._columns)
