"""The end of the event log a decision appends to, and sealing events onto it.

A decision that appends events reads the tail of the log like any other row it decides on: the
id the next event gets and the tip of each chain it extends. It seals its events onto that tail
here, in the core, so that a plan holds every event's id, place in its chain and seal, and the
shell only inserts them; the tail the plan leaves behind is where the next decision of a batch
in the same transaction starts from.

Ids are the store's: SQLite hands out `events.event_id` with AUTOINCREMENT, never reusing one,
and the shell reads the next one under the write lock (`log_next_event_id`). Seals are
`seal_to_store`'s, over the same fields as ever, so that every log, older ones included,
verifies as it did.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import attrs
from aios_ledger.core.digests import canonical_json
from aios_ledger.core.jsonvalue import JsonObject
from aios_ledger.core.log.seals import (
    ChainTip,
    SealedEvent,
    chain_of,
    empty_chain_tip,
    seal_to_store,
)
from aios_ledger.core.log.verification import EventRecord
from aios_ledger.core.statements import SqlWrite, Statement


@attrs.frozen
class EventAppend:
    """An event a decision appends, before it has a place in the log."""

    task_id: str | None
    agent_id: str | None
    event_type: str
    payload: JsonObject
    created_at: str

    def payload_json(self) -> str:
        """Checked, then encoded: payloads come from every part of the core (tasks, runs,
        auxiliary runs, projections), and a key that is not text must stay a refusal rather
        than be turned into text by the encoder."""
        return canonical_json(self.payload)


@attrs.frozen
class AppendedEvent:
    """An event placed at the end of its chain: its row and its seal, as they are inserted."""

    event_id: int
    task_id: str | None
    agent_id: str | None
    event_type: str
    payload_json: str
    created_at: str
    chain: str
    chain_seq: int
    prev_seal: str
    seal: str

    def writes(self) -> tuple[SqlWrite, SqlWrite]:
        row = SqlWrite(
            Statement.INSERT_EVENT,
            {
                "event_id": self.event_id,
                "task_id": self.task_id,
                "agent_id": self.agent_id,
                "event_type": self.event_type,
                "payload_json": self.payload_json,
                "created_at": self.created_at,
            },
        )
        return row, seal_write(self.event_id, self.chain, self.chain_seq, self.prev_seal, self.seal)


def seal_write(
    event_id: int, chain: str, chain_seq: int, prev_seal: str, seal: str, *, adoption: bool = False
) -> SqlWrite:
    return SqlWrite(
        Statement.INSERT_SEAL,
        {
            "event_id": event_id,
            "chain": chain,
            "chain_seq": chain_seq,
            "prev_seal": prev_seal,
            "seal": seal,
            "sealed_at_adoption": int(adoption),
        },
    )


@attrs.frozen
class LogTail:
    """The next event id and the tip of every chain a decision may extend."""

    next_event_id: int
    tips: Mapping[str, ChainTip]

    @classmethod
    def read(cls, next_event_id: int, chains: Iterable[str], found: Iterable[ChainTip]) -> LogTail:
        """The tail from what the shell read: `found` holds the tip rows there were; every
        other chain of `chains` is still empty."""
        return cls(next_event_id, _known({}, chains, found))

    def append(self, events: Sequence[EventAppend]) -> tuple[tuple[AppendedEvent, ...], LogTail]:
        """`events` sealed in order at the end of their chains, and the tail after them."""
        tips = dict(self.tips)
        event_id = self.next_event_id
        appended = []
        for event in events:
            appended.append(
                _placed(
                    tips,
                    event_id,
                    event.task_id,
                    event.agent_id,
                    event.event_type,
                    event.payload_json(),
                    event.created_at,
                )
            )
            event_id += 1
        return tuple(appended), LogTail(event_id, tips)

    def seal_in_place(self, events: Sequence[EventRecord]) -> tuple[tuple[SqlWrite, ...], LogTail]:
        """Seals for events already stored unsealed (the older runtime's, at adoption), in
        event order, at the end of their chains; their ids and content stay as they are."""
        tips = dict(self.tips)
        writes = []
        for event in events:
            placed = _placed(
                tips,
                event.event_id,
                event.task_id,
                event.agent_id,
                event.event_type,
                event.payload_json,
                event.created_at,
            )
            writes.append(
                seal_write(
                    placed.event_id,
                    placed.chain,
                    placed.chain_seq,
                    placed.prev_seal,
                    placed.seal,
                    adoption=True,
                )
            )
        return tuple(writes), LogTail(self.next_event_id, tips)


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


def _placed(
    tips: dict[str, ChainTip],
    event_id: int,
    task_id: Any,
    agent_id: Any,
    event_type: Any,
    payload_json: Any,
    created_at: Any,
) -> AppendedEvent:
    """The event sealed onto its chain's tip in `tips`, which moves on to it. The content is
    typed loosely for adopted rows, which `seal_to_store` checks as untrusted."""
    chain = chain_of(task_id)
    tip = tips.get(chain)
    if tip is None:
        # The shell reads the tip of every chain a decision names; a chain it did not read
        # would fork (the store's unique (chain, chain_seq) would refuse it later).
        raise ValueError(f"the log tail holds no tip of chain {chain!r}")
    chain_seq = tip.chain_seq + 1
    seal = seal_to_store(
        SealedEvent(
            event_id, task_id, agent_id, event_type, payload_json, created_at, chain_seq, tip.seal
        )
    )
    tips[chain] = ChainTip(chain=chain, chain_seq=chain_seq, seal=seal)
    return AppendedEvent(
        event_id=event_id,
        task_id=task_id,
        agent_id=agent_id,
        event_type=event_type,
        payload_json=payload_json,
        created_at=created_at,
        chain=chain,
        chain_seq=chain_seq,
        prev_seal=tip.seal,
        seal=seal,
    )
