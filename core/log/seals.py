"""Seals that make the event log tamper-evident.

Each event is sealed with a digest over its own content, its actor and the seal before it in its
chain (one chain per task, and one for ledger-level events), so an edit shows unless the rest of
the chain is re-sealed too. Later seal versions also cover the state rows their transition wrote
(`core.log.rows`), so the current rows are provable from the log:

- v2 also covers the event's global id, which SQLite's single writer knows when it seals;
- v3 covers only the event's place in its chain, so that PostgreSQL's writers of different
  chains need not wait for each other to learn the next id (the head still proves the order);
- v4 (SQLite) is v2, but covers only the columns the transition changed and a digest chained
  over them (`core.log.rows.chained_row_digest`), rather than the whole task row.

v1 seals, written when an older runtime's log was adopted, keep verifying as they are.
"""

from __future__ import annotations

from collections.abc import Sequence
from json.encoder import encode_basestring_ascii as _ascii
from typing import cast

import attrs
from aios_ledger.core.digests import digest_bytes, digest_json
from aios_ledger.core.jsonvalue import JsonObject
from aios_ledger.core.log.records import (
    SEAL_VERSION_1,
    SEAL_VERSION_2,
    SEAL_VERSION_3,
    SEAL_VERSION_4,
    EventRow,
)
from aios_ledger.core.log.rows import RowImage

SEAL_SCHEMA = "aios.event_seal.v1"
SEAL_SCHEMA_V2 = "aios.event_seal.v2"
SEAL_SCHEMA_V3 = "aios.event_seal.v3"
SEAL_SCHEMA_V4 = "aios.event_seal.v4"
SEAL_SCHEMAS = {
    SEAL_VERSION_1: SEAL_SCHEMA,
    SEAL_VERSION_2: SEAL_SCHEMA_V2,
    SEAL_VERSION_3: SEAL_SCHEMA_V3,
    SEAL_VERSION_4: SEAL_SCHEMA_V4,
}
# The versions a seal over rows may take.
ROW_SEAL_VERSIONS = (SEAL_VERSION_2, SEAL_VERSION_3, SEAL_VERSION_4)
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
    # The chain's last chained row digest (v4), None before its first.
    chained_row_digest: str | None = None


def empty_chain_tip(chain: str) -> ChainTip:
    return ChainTip(chain=chain, chain_seq=0, seal=GENESIS_SEAL)


# A seal's rows: None for a v1 seal (it covers no rows), else the images in the order written.
SealedImages = Sequence[RowImage] | None


def seal_version_of(rows: SealedImages, version: int | None) -> int:
    """The version a seal over `rows` takes: v1 when it covers no rows, else `version`, v2 by
    default (a store that numbers events after sealing them asks for v3, SQLite's store for v4)."""
    if rows is None:
        return SEAL_VERSION_1
    if version is None:
        return SEAL_VERSION_2
    if version not in ROW_SEAL_VERSIONS:
        raise ValueError(f"a seal over rows is v2, v3 or v4, not v{version}")
    return version


@attrs.frozen
class ChainedRow:
    """What a v4 seal covers of the chain's task row: the columns its transition changed
    (None: it wrote no task row) and the chain's chained row digest after it."""

    changes: str | None
    digest: str | None


def _seal_document(
    event: EventRow,
    chain_seq: int,
    prev_seal: str,
    rows: SealedImages,
    version: int,
    chained: ChainedRow | None,
) -> JsonObject:
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
    if version != SEAL_VERSION_3:
        document["event_id"] = event.event_id
    if rows is not None:
        document["rows"] = [cast(JsonObject, image.public()) for image in rows]
    if version == SEAL_VERSION_4:
        chained = chained or ChainedRow(None, None)
        document["row_changes"] = chained.changes
        document["chained_row_digest"] = chained.digest
    return document


def seal_of(
    event: EventRow,
    chain_seq: int,
    prev_seal: str,
    rows: SealedImages = None,
    *,
    version: int | None = None,
    chained: ChainedRow | None = None,
) -> str:
    """The seal of `event` at `chain_seq` of its chain, built on `prev_seal`: a digest over its
    content, its chain and its place there, and (v2, v3 and v4, when `rows` is given) over the
    state rows its transition wrote, of which v4 covers the chain's task row as `chained`;
    v1, v2 and v4 cover its `event_id` too (`seal_version_of`). Checks every field as
    untrusted JSON."""
    version = seal_version_of(rows, version)
    document = _seal_document(event, chain_seq, prev_seal, rows, version, chained)
    return digest_json(SEAL_SCHEMAS[version], document)


def seal_to_store(
    event: EventRow,
    chain_seq: int,
    prev_seal: str,
    rows: SealedImages = None,
    *,
    version: int | None = None,
    chained: ChainedRow | None = None,
) -> str:
    """The seal written beside an event: `seal_of_stored` when every field is plainly typed
    (exact ASCII text or None, exact ints), as in every event the core plans; any other row (an
    adopted one, say) is checked as untrusted JSON by `seal_of`. Both give the same seal."""
    if _plainly_typed(event, chain_seq, prev_seal, rows, chained):
        return seal_of_stored(event, chain_seq, prev_seal, rows, version=version, chained=chained)
    return seal_of(event, chain_seq, prev_seal, rows, version=version, chained=chained)


def _plainly_typed(
    event: EventRow,
    chain_seq: object,
    prev_seal: object,
    rows: SealedImages,
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
    if rows is not None:
        texts += tuple(text for image in rows for text in (image.table, image.key, image.digest))
    if chained is not None:
        texts += (chained.changes, chained.digest)
    return (
        type(event.event_id) is int
        and type(chain_seq) is int
        and type(prev_seal) is str
        and prev_seal.isascii()
        and all(text is None or (type(text) is str and text.isascii()) for text in texts)
    )


def seal_of_stored(
    event: EventRow,
    chain_seq: int,
    prev_seal: str,
    rows: SealedImages = None,
    *,
    version: int | None = None,
    chained: ChainedRow | None = None,
) -> str:
    """`seal_of` for fields whose types the caller has already checked (text or None, and int
    event_id / chain_seq): the same canonical JSON (sorted keys, compact, ASCII-escaped by the
    json module's own encoder), written out field by field instead of walking an untrusted
    value, which was most of the verifier's time. Tests hold it equal to `seal_of`."""
    version = seal_version_of(rows, version)
    task = event.task_id
    agent = event.agent_id
    changes = digest = None
    if version == SEAL_VERSION_4 and chained is not None:
        changes, digest = chained.changes, chained.digest
    text = "".join(
        (
            "{" if event.actor is None else '{"actor":' + _ascii(event.actor) + ",",
            '"agent_id":',
            "null" if agent is None else _ascii(agent),
            ',"chain":',
            _ascii(chain_of(task)),
            ',"chain_seq":',
            int.__repr__(chain_seq),
            ""
            if version != SEAL_VERSION_4
            else ',"chained_row_digest":' + ("null" if digest is None else _ascii(digest)),
            ',"created_at":',
            _ascii(event.created_at),
            "" if version == SEAL_VERSION_3 else ',"event_id":' + int.__repr__(event.event_id),
            ',"event_type":',
            _ascii(event.event_type),
            ',"payload_json":',
            _ascii(event.payload_json),
            ',"prev_seal":',
            _ascii(prev_seal),
            ""
            if version != SEAL_VERSION_4
            else ',"row_changes":' + ("null" if changes is None else _ascii(changes)),
            "" if rows is None else ',"rows":[' + ",".join(map(_row_text, rows)) + "]",
            ',"task_id":',
            "null" if task is None else _ascii(task),
            "}",
        )
    )
    return digest_bytes(SEAL_SCHEMAS[version], text.encode("ascii"))


def _row_text(image: RowImage) -> str:
    return "".join(
        (
            '{"digest":',
            _ascii(image.digest),
            ',"key":',
            _ascii(image.key),
            ',"table":',
            _ascii(image.table),
            "}",
        )
    )
