"""The end of the event log a decision appends to, and sealing events onto it.

A decision reads the tail of the log (the next event id, the tip of each chain it extends) like
any other row, and seals its events onto it here in the core, so that a plan holds every event's
id, place and seal and the shell only inserts them. The tail a plan leaves behind is where the
next decision in the same transaction starts.

The seal version follows how the store numbers events (`LogTail.seal_version`): v2 covers the
id, where SQLite hands it out before the decision; v3 does not, where PostgreSQL's writers draw
ids from a sequence after it, so that writers of different tasks never wait for one another; v4
(SQLite) is v2 but covers only the task row's changed columns and a chained digest of the row
(`ChainTip.chained_row_digest`). Events sealed at adoption get v1 seals, over their content only.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

import attrs
from aios_ledger.core.actors import Actor
from aios_ledger.core.digests import canonical_json
from aios_ledger.core.jsonvalue import JsonObject
from aios_ledger.core.log.records import (
    SEAL_VERSION_1,
    SEAL_VERSION_2,
    SEAL_VERSION_3,
    SEAL_VERSION_4,
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
    seal_version_of,
)
from aios_ledger.core.statements import SqlWrite


@attrs.frozen
class EventAppend:
    """An event a decision appends, before it has a place in the log: `written`, the task row
    of its chain as its transition wrote it (a v2 or v3 seal covers its image first, before
    `rows`; a v4 seal what changed of it), and `rows`, the images of the other state rows it
    wrote."""

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
        """Checked, then encoded: payloads come from every part of the core (tasks, runs,
        auxiliary runs, projections), and a key that is not text must stay a refusal rather
        than be turned into text by the encoder."""
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
        """The same event at `event_id`: only for a v3 seal, which does not cover the id."""
        if self.seal.seal_version != SEAL_VERSION_3:
            raise ValueError(f"a v{self.seal.seal_version} seal covers its event's id")
        return AppendedEvent(
            attrs.evolve(self.event, event_id=event_id),
            attrs.evolve(self.seal, event_id=event_id),
            tuple(attrs.evolve(row, event_id=event_id) for row in self.rows),
        )


@attrs.frozen
class LogTail:
    """The next event id, the tip of every chain a decision may extend, and the version of the
    seals appended events get: v2 (over their ids) where `next_event_id` is the id the store
    hands out next, v3 where the store numbers a plan's events after the decision and
    `next_event_id` only orders them within the transaction."""

    next_event_id: int
    tips: Mapping[str, ChainTip]
    seal_version: int = SEAL_VERSION_2

    @classmethod
    def read(
        cls,
        next_event_id: int,
        chains: Iterable[str],
        found: Iterable[ChainTip],
        *,
        seal_version: int = SEAL_VERSION_2,
    ) -> LogTail:
        """The tail from what the shell read: `found` holds the tip rows there were; every
        other chain of `chains` is still empty."""
        version = seal_version_of((), seal_version)  # the versions a seal over rows may take
        return cls(next_event_id, _known({}, chains, found), version)

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
            images = event.rows
            if event.written is not None and self.seal_version != SEAL_VERSION_4:
                images = (event.written.image(), *images)
            seal = _sealed(tips, row, images, version=self.seal_version, written=event.written)
            appended.append(AppendedEvent(row, seal, sealed_rows(event_id, images)))
            event_id += 1
        return tuple(appended), LogTail(event_id, tips, self.seal_version)

    def seal_in_place(self, events: Sequence[EventRow]) -> tuple[tuple[SqlWrite, ...], LogTail]:
        """Seals for events already stored unsealed (the older runtime's, at adoption), in
        event order, at the end of their chains; their ids and content stay as they are."""
        tips = dict(self.tips)
        writes = tuple(_sealed(tips, event, None, adoption=True).insert() for event in events)
        return writes, LogTail(self.next_event_id, tips, self.seal_version)


def _known(
    tips: dict[str, ChainTip], chains: Iterable[str], found: Iterable[ChainTip]
) -> dict[str, ChainTip]:
    """`tips` with the tip rows `found`, and every other chain of `chains` empty."""
    for tip in found:
        tips[tip.chain] = tip
    for chain in chains:
        if chain not in tips:
            tips[chain] = empty_chain_tip(chain)
    return tips


def _sealed(
    tips: dict[str, ChainTip],
    event: EventRow,
    rows: Sequence[RowImage] | None,
    *,
    adoption: bool = False,
    version: int = SEAL_VERSION_2,
    written: RowWrite | None = None,
) -> SealRow:
    """The seal row of `event` on its chain's tip in `tips`, which moves on to it: `version`
    over `rows` (and, v4, what changed of the `written` task row), or v1 when `rows` is None.
    An adopted row may hold what no plan writes (its types are checked by `seal_to_store`)."""
    chain = chain_of(event.task_id)
    tip = tips.get(chain)
    if tip is None:
        # The shell reads the tip of every chain a decision names; a chain it did not read
        # would fork (the store's unique (chain, chain_seq) would refuse it later).
        raise ValueError(f"the log tail holds no tip of chain {chain!r}")
    chain_seq = tip.chain_seq + 1
    version = SEAL_VERSION_1 if rows is None else version
    chained = None
    if version == SEAL_VERSION_4:
        chained = _chained(tip.chained_row_digest, written)
    seal = seal_to_store(event, chain_seq, tip.seal, rows, version=version, chained=chained)
    digest = None if chained is None else chained.digest
    tips[chain] = ChainTip(chain, chain_seq, seal, digest)
    return SealRow(
        event.event_id,
        chain,
        chain_seq,
        tip.seal,
        seal,
        adoption,
        version,
        None if chained is None else chained.changes,
        digest,
    )


def _chained(previous: str | None, written: RowWrite | None) -> ChainedRow:
    """The chained row of a v4 seal after the chain's `previous` digest: the tip's digest
    carried on when the event wrote no task row; else the row's changes (every column when the
    chain has no digest yet: before its first v4 write, the row's columns are no seal's) and
    the digest over them."""
    if written is None:
        return ChainedRow(None, previous)
    changes = written.changes(full=previous is None)
    return ChainedRow(changes, chained_row_digest(previous, written.table, written.key, changes))
