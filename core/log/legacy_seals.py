"""The seal formats of 0.x ledgers, which `upgrade` verifies before it seals the log again as v5.

Each is the v5 document under its own schema: v1 with `event_id` and without `rows` and the
chained row columns; v2, v1 plus `rows`; v3 (PostgreSQL's), v2 without `event_id`; v4, v5 plus
`event_id`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import cast

from aios_ledger.core.digests import digest_json
from aios_ledger.core.errors import LedgerError
from aios_ledger.core.jsonvalue import JsonObject
from aios_ledger.core.log.records import EventRow, SealRow
from aios_ledger.core.log.rows import RowImage
from aios_ledger.core.log.seals import ChainedRow, seal_document

SEAL_VERSION_1 = 1
SEAL_VERSION_2 = 2
SEAL_VERSION_3 = 3
SEAL_VERSION_4 = 4
LEGACY_SEAL_VERSIONS = (SEAL_VERSION_1, SEAL_VERSION_2, SEAL_VERSION_3, SEAL_VERSION_4)


def legacy_seal_of(
    event: EventRow,
    chain_seq: int,
    prev_seal: str,
    rows: Sequence[RowImage],
    version: int,
    chained: ChainedRow | None = None,
) -> str:
    """The 0.x seal of `version` of `event` at `chain_seq` of its chain after `prev_seal`, over
    `rows` (none for v1) and, v4, the `chained` task row. Checks every field as untrusted JSON."""
    if version not in LEGACY_SEAL_VERSIONS:
        raise ValueError(f"no 0.x seal has version {version}")
    if version == SEAL_VERSION_1 and rows:
        raise ValueError("a v1 seal covers no rows")
    document = seal_document(event, chain_seq, prev_seal, chained)
    if version != SEAL_VERSION_4:
        del document["row_changes"], document["chained_row_digest"]
    if version != SEAL_VERSION_3:
        document["event_id"] = event.event_id
    if version != SEAL_VERSION_1:
        document["rows"] = [cast(JsonObject, image.public()) for image in rows]
    return digest_json(f"aios.event_seal.v{version}", document)


def legacy_seal_verifies(event: EventRow, seal: SealRow, rows: Sequence[RowImage]) -> bool:
    """Does a 0.x `seal` (its types already checked) verify over `event` and `rows`? Chained row
    columns beside a seal other than v4, which does not cover them, are a forgery."""
    version = seal.seal_version
    chained = ChainedRow(seal.row_changes, seal.chained_row_digest)
    if version != SEAL_VERSION_4 and chained != ChainedRow(None, None):
        return False
    try:
        found = legacy_seal_of(event, seal.chain_seq, seal.prev_seal, rows, version, chained)
    except (LedgerError, ValueError):
        return False
    return found == seal.seal
