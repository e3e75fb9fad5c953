"""Seals that make the event log tamper-evident.

Each event is sealed with a digest over its own content and the seal before it in its chain.
There is one chain per task (and one for ledger-level events without a task): a writer only
extends the chain of the task it already holds the row of, so sealing adds no queueing beyond
the store's own, and a PostgreSQL backend can keep the same chains under row locks.
"""

from __future__ import annotations

from json.encoder import encode_basestring_ascii as _ascii

import attrs
from aios_ledger.core.digests import digest_bytes, digest_json
from aios_ledger.core.jsonvalue import JsonObject
from aios_ledger.core.log.records import EventRow

SEAL_SCHEMA = "aios.event_seal.v1"
GENESIS_SEAL = "sha256:" + "0" * 64
LEDGER_CHAIN = "ledger"


def chain_of(task_id: str | None) -> str:
    return LEDGER_CHAIN if task_id is None else "task:" + task_id


@attrs.frozen
class ChainTip:
    """The last seal of a chain, which the next event's seal builds on: three columns of the
    chain's last `SealRow`, as `chain_tip` reads them (an empty chain's tip is
    `empty_chain_tip`: position 0, the genesis seal)."""

    chain: str
    chain_seq: int
    seal: str


def empty_chain_tip(chain: str) -> ChainTip:
    return ChainTip(chain=chain, chain_seq=0, seal=GENESIS_SEAL)


def _seal_document(event: EventRow, chain_seq: int, prev_seal: str) -> JsonObject:
    return {
        "event_id": event.event_id,
        "task_id": event.task_id,
        "agent_id": event.agent_id,
        "event_type": event.event_type,
        "payload_json": event.payload_json,
        "created_at": event.created_at,
        "chain": chain_of(event.task_id),
        "chain_seq": chain_seq,
        "prev_seal": prev_seal,
    }


def seal_of(event: EventRow, chain_seq: int, prev_seal: str) -> str:
    """The seal of `event` at `chain_seq` of its chain, built on `prev_seal`: a digest over its
    content, its chain and its place there. Checks every field as untrusted JSON."""
    return digest_json(SEAL_SCHEMA, _seal_document(event, chain_seq, prev_seal))


def seal_to_store(event: EventRow, chain_seq: int, prev_seal: str) -> str:
    """The seal written beside an event: `seal_of_stored` when every field is plainly typed
    (exact ASCII text or None, exact ints), as in every event the core plans; any other row (an
    adopted one, say) is checked as untrusted JSON by `seal_of`. Both give the same seal."""
    if _plainly_typed(event, chain_seq, prev_seal):
        return seal_of_stored(event, chain_seq, prev_seal)
    return seal_of(event, chain_seq, prev_seal)


def _plainly_typed(event: EventRow, chain_seq: object, prev_seal: object) -> bool:
    texts = (event.task_id, event.agent_id, event.event_type, event.payload_json, event.created_at)
    return (
        type(event.event_id) is int
        and type(chain_seq) is int
        and type(prev_seal) is str
        and prev_seal.isascii()
        and all(text is None or (type(text) is str and text.isascii()) for text in texts)
    )


def seal_of_stored(event: EventRow, chain_seq: int, prev_seal: str) -> str:
    """`seal_of` for fields whose types the caller has already checked (text or None, and int
    event_id / chain_seq): the same canonical JSON (sorted keys, compact, ASCII-escaped by the
    json module's own encoder), written out field by field instead of walking an untrusted
    value, which was most of the verifier's time. Tests hold it equal to `seal_of`."""
    task = event.task_id
    agent = event.agent_id
    text = "".join(
        (
            '{"agent_id":',
            "null" if agent is None else _ascii(agent),
            ',"chain":',
            _ascii(chain_of(task)),
            ',"chain_seq":',
            int.__repr__(chain_seq),
            ',"created_at":',
            _ascii(event.created_at),
            ',"event_id":',
            int.__repr__(event.event_id),
            ',"event_type":',
            _ascii(event.event_type),
            ',"payload_json":',
            _ascii(event.payload_json),
            ',"prev_seal":',
            _ascii(prev_seal),
            ',"task_id":',
            "null" if task is None else _ascii(task),
            "}",
        )
    )
    return digest_bytes(SEAL_SCHEMA, text.encode("ascii"))
