"""Seals that make the event log tamper-evident: a digest over the event's content, its actor,
the seal before it in its chain (one per task, one for the ledger) and the state rows its
transition wrote, so an edit shows unless the rest of the chain is re-sealed too. A seal covers
the event's place in its chain but not its global id, so that an engine may number events after
sealing them and writers of different chains need not wait for each other.
"""

from __future__ import annotations

from collections.abc import Sequence
from json.encoder import encode_basestring_ascii as _ascii
from typing import cast

import attrs
from aios_ledger.core.digests import digest_bytes, digest_json
from aios_ledger.core.jsonvalue import JsonObject
from aios_ledger.core.log.records import EventRow
from aios_ledger.core.log.rows import RowImage

SEAL_SCHEMA = "aios.event_seal.v5"
GENESIS_SEAL = "sha256:" + "0" * 64
LEDGER_CHAIN = "ledger"


def chain_of(task_id: str | None) -> str:
    return LEDGER_CHAIN if task_id is None else "task:" + task_id


@attrs.frozen
class ChainTip:
    """The last seal of a chain, which the next event's seal builds on (an empty chain's is at
    position 0, the genesis seal)."""

    chain: str
    chain_seq: int
    seal: str
    # The chain's last chained row digest, None before its first.
    chained_row_digest: str | None = None


def empty_chain_tip(chain: str) -> ChainTip:
    return ChainTip(chain=chain, chain_seq=0, seal=GENESIS_SEAL)


@attrs.frozen
class ChainedRow:
    """What a seal covers of the chain's task row: the columns its transition changed (None: it
    wrote no task row) and the chain's chained row digest after it."""

    changes: str | None
    digest: str | None


def seal_document(
    event: EventRow, chain_seq: int, prev_seal: str, chained: ChainedRow | None = None
) -> JsonObject:
    """The seal's document without its rows: the event's content, actor and place, and the
    chain's task row."""
    document: JsonObject = {
        "task_id": event.task_id,
        "agent_id": event.agent_id,
        "event_type": event.event_type,
        "payload_json": event.payload_json,
        "created_at": event.created_at,
        "chain": chain_of(event.task_id),
        "chain_seq": chain_seq,
        "prev_seal": prev_seal,
    }
    if event.actor is not None:
        document["actor"] = event.actor
    chained = chained or ChainedRow(None, None)
    document["row_changes"] = chained.changes
    document["chained_row_digest"] = chained.digest
    return document


def seal_of(
    event: EventRow,
    chain_seq: int,
    prev_seal: str,
    rows: Sequence[RowImage] = (),
    *,
    chained: ChainedRow | None = None,
) -> str:
    """The seal of `event` at `chain_seq` of its chain, built on `prev_seal`, over `rows` and the
    `chained` task row; checks every field as untrusted JSON."""
    document = seal_document(event, chain_seq, prev_seal, chained)
    document["rows"] = [cast(JsonObject, image.public()) for image in rows]
    return digest_json(SEAL_SCHEMA, document)


def seal_to_store(
    event: EventRow,
    chain_seq: int,
    prev_seal: str,
    rows: Sequence[RowImage] = (),
    *,
    chained: ChainedRow | None = None,
) -> str:
    """The seal written beside an event: `seal_of_stored` when every field is plainly typed, as
    in every event the core plans, else `seal_of` (an adopted row's). Both give the same seal."""
    if _plainly_typed(event, chain_seq, prev_seal, rows, chained):
        return seal_of_stored(event, chain_seq, prev_seal, rows, chained=chained)
    return seal_of(event, chain_seq, prev_seal, rows, chained=chained)


def _plainly_typed(
    event: EventRow,
    chain_seq: object,
    prev_seal: object,
    rows: Sequence[RowImage],
    chained: ChainedRow | None,
) -> bool:
    texts: tuple[object, ...] = (
        event.actor,
        event.task_id,
        event.agent_id,
        event.event_type,
        event.payload_json,
        event.created_at,
    )
    if rows:
        texts += tuple(text for image in rows for text in (image.table, image.key, image.digest))
    if chained is not None:
        texts += (chained.changes, chained.digest)
    return (
        type(chain_seq) is int
        and type(prev_seal) is str
        and prev_seal.isascii()
        and all(text is None or (type(text) is str and text.isascii()) for text in texts)
    )


def seal_of_stored(
    event: EventRow,
    chain_seq: int,
    prev_seal: str,
    rows: Sequence[RowImage] = (),
    *,
    chained: ChainedRow | None = None,
) -> str:
    """`seal_of` for fields whose types the caller has checked: the same canonical JSON written
    out field by field, because walking an untrusted value was most of the verifier's time."""
    changes, digest = (None, None) if chained is None else (chained.changes, chained.digest)
    rows_text = ",".join(
        f'{{"digest":{_ascii(row.digest)},"key":{_ascii(row.key)},"table":{_ascii(row.table)}}}'
        for row in rows
    )
    text = (
        ("{" if event.actor is None else f'{{"actor":{_ascii(event.actor)},')
        + f'"agent_id":{_nullable(event.agent_id)},"chain":{_ascii(chain_of(event.task_id))}'
        + f',"chain_seq":{int.__repr__(chain_seq)},"chained_row_digest":{_nullable(digest)}'
        + f',"created_at":{_ascii(event.created_at)},"event_type":{_ascii(event.event_type)}'
        + f',"payload_json":{_ascii(event.payload_json)},"prev_seal":{_ascii(prev_seal)}'
        + f',"row_changes":{_nullable(changes)},"rows":[{rows_text}]'
        + f',"task_id":{_nullable(event.task_id)}}}'
    )
    return digest_bytes(SEAL_SCHEMA, text.encode("ascii"))


def _nullable(text: str | None) -> str:
    return "null" if text is None else _ascii(text)
