"""Seals that make the event log tamper-evident.

Each event is sealed with a digest over its own content and the seal before it in its chain.
There is one chain per task (and one for ledger-level events without a task): a writer only
extends the chain of the task it already holds the row of, so sealing adds no queueing beyond
the store's own, and a PostgreSQL backend can keep the same chains under row locks.
"""

from __future__ import annotations

import json

import attrs

from .digests import digest_bytes, digest_json
from .jsonvalue import JsonObject

SEAL_SCHEMA = "aios.event_seal.v1"
GENESIS_SEAL = "sha256:" + "0" * 64
LEDGER_CHAIN = "ledger"


def chain_of(task_id: str | None) -> str:
    return LEDGER_CHAIN if task_id is None else "task:" + task_id


@attrs.frozen
class SealedEvent:
    """An event as stored, with its place in its chain."""

    event_id: int
    task_id: str | None
    agent_id: str | None
    event_type: str
    payload_json: str
    created_at: str
    chain_seq: int
    prev_seal: str


def _seal_document(event: SealedEvent) -> JsonObject:
    return {
        "event_id": event.event_id,
        "task_id": event.task_id,
        "agent_id": event.agent_id,
        "event_type": event.event_type,
        "payload_json": event.payload_json,
        "created_at": event.created_at,
        "chain": chain_of(event.task_id),
        "chain_seq": event.chain_seq,
        "prev_seal": event.prev_seal,
    }


def seal_of(event: SealedEvent) -> str:
    return digest_json(SEAL_SCHEMA, _seal_document(event))


def seal_of_stored(event: SealedEvent) -> str:
    """`seal_of` for fields whose types the caller has already checked (str, int, None): the
    same canonical JSON (`json.dumps` with sorted keys, compact, ASCII) without the untrusted-JSON
    walk, which is most of the verifier's time. Text the ledger could not have sealed (a lone
    surrogate) gets a digest no genuine seal can equal."""
    text = json.dumps(_seal_document(event), sort_keys=True, separators=(",", ":"), allow_nan=False)
    return digest_bytes(SEAL_SCHEMA, text.encode("ascii"))
