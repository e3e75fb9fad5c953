"""A 0.x ledger's log sealed again in the one format 1.0 writes (`aios-ledger upgrade`). The old
Merkle tree and what was signed of it are recorded in a `LEDGER_UPGRADED` event, so that a
witness's cosignature of the 0.x tree stays checkable against that record.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence

import attrs
from aios_ledger.core.actors import Actor
from aios_ledger.core.jsonvalue import JsonObject, JsonValue
from aios_ledger.core.log.plan import WritePlan, sealed_plan
from aios_ledger.core.log.records import SEAL_VERSION_5, EventRow, SealRow
from aios_ledger.core.log.rows import RowImage
from aios_ledger.core.log.seals import GENESIS_SEAL, ChainedRow, seal_to_store
from aios_ledger.core.log.tail import EventAppend, LogTail
from aios_ledger.core.timestamps import Timestamp

LEDGER_UPGRADED = "LEDGER_UPGRADED"


def resealed(log: Iterable[tuple[EventRow, SealRow, Sequence[RowImage]]]) -> Iterator[SealRow]:
    """Each event's seal row sealed again as v5, in event id order: the same chain, place, rows
    and chained task row, built on the chain's new seals."""
    tips: dict[str, str] = {}
    for event, seal, rows in log:
        chained = ChainedRow(seal.row_changes, seal.chained_row_digest)
        prev_seal = tips.get(seal.chain, GENESIS_SEAL)
        new = seal_to_store(event, seal.chain_seq, prev_seal, rows, chained=chained)
        tips[seal.chain] = new
        yield attrs.evolve(seal, prev_seal=prev_seal, seal=new, seal_version=SEAL_VERSION_5)


def decide_upgraded(
    tail: LogTail,
    tree_size: int,
    root: bytes,
    signed: Sequence[JsonObject],
    *,
    now: Timestamp,
    actor: Actor,
) -> WritePlan[None]:
    """The `LEDGER_UPGRADED` event on the ledger chain: the 0.x tree's size and root (hex) and
    its `signed` checkpoints, each with its note and cosignatures as they were stored."""
    payload: JsonObject = {
        "tree_size": tree_size,
        "root": root.hex(),
        "checkpoints": list[JsonValue](signed),
    }
    event = EventAppend(None, None, LEDGER_UPGRADED, payload, now.text, actor=actor)
    return sealed_plan((), [event], None, tail=tail)
