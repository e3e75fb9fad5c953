"""The end of the event log a decision appends to, and sealing events onto it in the core, so
that a plan holds every event's id, place and seal and the shell only inserts them.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

import attrs
from aios_ledger.core.actors import Actor
from aios_ledger.core.digests import canonical_json
from aios_ledger.core.jsonvalue import JsonObject
from aios_ledger.core.log.records import (
    SEAL_VERSION_5,
    EventRow,
    SealedRow,
    SealRow,
    sealed_rows,
)
from aios_ledger.core.log.rows import TASKS, RowImage, RowWrite, chained_row_digest
from aios_ledger.core.log.seals import (
    ChainedRow,
    ChainTip,
    chain_of,
    empty_chain_tip,
    seal_to_store,
)
from aios_ledger.core.statements import SqlWrite


@attrs.frozen
class EventAppend:
    """An event a decision appends, before it has a place in the log: `written`, the task row
    of its chain as its transition wrote it (its seal covers what changed of it), and `rows`,
    the images of the other state rows it wrote."""

    task_id: str | None
    agent_id: str | None
    event_type: str
    payload: JsonObject
    created_at: str
    rows: tuple[RowImage, ...] = ()
    written: RowWrite | None = None
    # Who caused it: every event a decision appends names its actor.
    actor: Actor = attrs.field(kw_only=True)

    def __attrs_post_init__(self) -> None:
        written = self.written
        if written is not None and (written.table != TASKS or written.key != self.task_id):
            raise ValueError("an event's written row is its own task's")

    def payload_json(self) -> str:
        """Checked, then encoded: a key that is not text must stay a refusal rather than be
        turned into text by the encoder."""
        return canonical_json(self.payload)


@attrs.frozen
class AppendedEvent:
    """An event placed at the end of its chain: its row, its seal's row and the rows of the
    state rows the seal covers, as a plan inserts them."""

    event: EventRow
    seal: SealRow
    rows: tuple[SealedRow, ...] = ()

    def writes(self) -> tuple[SqlWrite, ...]:
        return (self.event.insert(), self.seal.insert(), *(row.insert() for row in self.rows))

    def numbered(self, event_id: int) -> AppendedEvent:
        """The same event at `event_id`: only for a seal that does not cover the id (v5)."""
        if self.seal.seal_version != SEAL_VERSION_5:
            raise ValueError(f"a v{self.seal.seal_version} seal covers its event's id")
        return AppendedEvent(
            attrs.evolve(self.event, event_id=event_id),
            attrs.evolve(self.seal, event_id=event_id),
            tuple(attrs.evolve(row, event_id=event_id) for row in self.rows),
        )


@attrs.frozen
class LogTail:
    """The next event id and the tip of every chain a decision may extend (where the store
    numbers events after the decision, `next_event_id` only orders a plan's events)."""

    next_event_id: int
    tips: Mapping[str, ChainTip]

    @classmethod
    def read(cls, next_event_id: int, chains: Iterable[str], found: Iterable[ChainTip]) -> LogTail:
        """The tail from the tip rows the shell `found`; every other chain of `chains` is empty."""
        tips = {tip.chain: tip for tip in found}
        for chain in chains:
            if chain not in tips:
                tips[chain] = empty_chain_tip(chain)
        return cls(next_event_id, tips)

    def append(self, events: Sequence[EventAppend]) -> tuple[tuple[AppendedEvent, ...], LogTail]:
        """`events` sealed in order at the end of their chains, and the tail after them."""
        tips = dict(self.tips)
        event_id = self.next_event_id
        appended = []
        for event in events:
            row = EventRow(
                event_id,
                event.task_id,
                event.agent_id,
                event.event_type,
                event.payload_json(),
                event.created_at,
                event.actor.stored(),
            )
            seal = _sealed(tips, row, event.rows, written=event.written)
            appended.append(AppendedEvent(row, seal, sealed_rows(event_id, event.rows)))
            event_id += 1
        return tuple(appended), LogTail(event_id, tips)

    def seal_in_place(self, events: Sequence[EventRow]) -> tuple[tuple[SqlWrite, ...], LogTail]:
        """Seals, over no rows, for events the older runtime stored unsealed (at adoption)."""
        tips = dict(self.tips)
        writes = tuple(_sealed(tips, event, (), adoption=True).insert() for event in events)
        return writes, LogTail(self.next_event_id, tips)


def _sealed(
    tips: dict[str, ChainTip],
    event: EventRow,
    rows: Sequence[RowImage],
    *,
    adoption: bool = False,
    written: RowWrite | None = None,
) -> SealRow:
    """The seal row of `event` on its chain's tip in `tips`, which moves on to it, over `rows`
    and what changed of the `written` task row."""
    chain = chain_of(event.task_id)
    tip = tips.get(chain)
    if tip is None:
        # The shell reads the tip of every chain a decision names; a chain it did not read
        # would fork (the store's unique (chain, chain_seq) would refuse it later).
        raise ValueError(f"the log tail holds no tip of chain {chain!r}")
    chain_seq = tip.chain_seq + 1
    chained = _chained(tip.chained_row_digest, written)
    seal = seal_to_store(event, chain_seq, tip.seal, rows, chained=chained)
    tips[chain] = ChainTip(chain, chain_seq, seal, chained.digest)
    return SealRow(
        event.event_id,
        chain,
        chain_seq,
        tip.seal,
        seal,
        adoption,
        SEAL_VERSION_5,
        chained.changes,
        chained.digest,
    )


def _chained(previous: str | None, written: RowWrite | None) -> ChainedRow:
    """The chained row of a seal after the chain's `previous` digest: carried on when the event
    wrote no task row; else the row's changes (every column before the chain's first digest)
    and the digest over them."""
    if written is None:
        return ChainedRow(None, previous)
    changes = written.changes(full=previous is None)
    return ChainedRow(changes, chained_row_digest(previous, written.table, written.key, changes))
