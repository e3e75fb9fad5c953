"""`serve --witness-url URL`: each checkpoint the server signs is pushed to C2SP tlog-witnesses,
and the cosignature lines they answer are stored beside it. The first push after a start resumes
from the largest size a witness's stored cosignature names; a 409 tells the right size for one
more try, and any other refusal is logged, never stopping the ledger's own work.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

import httpx
from aios_ledger.core import LedgerError, Timestamp
from aios_ledger.core.proofs import Checkpoint, VerifierKey, parse_note
from aios_ledger.core.proofs.add_checkpoint import (
    SIZE_MEDIA_TYPE,
    AddCheckpointRequest,
    resumed_size,
)
from aios_ledger.core.proofs.notes import COSIGNATURE_V1
from aios_ledger.shell.db.connection import Database
from aios_ledger.shell.db.merkle import prove_consistency
from aios_ledger.shell.db.run import Connection, fetch_value
from aios_ledger.shell.proofs.checkpoints import ServedCheckpoint, add_cosignatures

LOG = logging.getLogger("aios_ledger.checkpoints")
TIMEOUT_SECONDS = 30.0


class WitnessPush:
    """The witnesses a server pushes its checkpoints to, and what it knows of each."""

    def __init__(self, urls: Sequence[str], witness_keys: Sequence[VerifierKey]) -> None:
        self._urls = tuple(url.rstrip("/") for url in urls)
        self._keys = tuple(witness_keys)
        # None: not known yet (resumed from the stored cosignatures at its first push).
        self.cosigned: dict[str, int | None] = dict.fromkeys(self._urls, None)
        # The 409 answers met (each a round trip spent learning a witness's size).
        self.conflicts = 0

    def push(self, db: Database, served: ServedCheckpoint, now: Timestamp) -> int:
        """Push `served` to every witness; how many cosigned it (each line stored)."""
        cosigned = 0
        with httpx.Client(timeout=TIMEOUT_SECONDS) as client:
            for url in self._urls:
                try:
                    lines = self._push_one(client, db, url, served)
                    add_cosignatures(db, served.row.note + lines, self._keys, now)
                    cosigned += 1
                except LedgerError as refused:
                    LOG.error("witness %s: %s", url, refused)
        return cosigned

    def _push_one(
        self, client: httpx.Client, db: Database, url: str, served: ServedCheckpoint
    ) -> str:
        note = parse_note(served.row.note)
        checkpoint = Checkpoint.parse(note.text)
        for _ in range(2):  # once more after a 409 told the witness's size
            old = self.cosigned[url]
            if old is None:
                old = self.cosigned[url] = self._stored_size(db, checkpoint.size)
            if old > checkpoint.size:
                raise LedgerError(
                    "CHECKPOINT_ROLLBACK",
                    f"the witness cosigned {old} leaves; this checkpoint has {checkpoint.size}",
                )
            proof = () if old == 0 else prove_consistency(db, old, checkpoint.size).hashes
            body = AddCheckpointRequest(old, tuple(proof), note, checkpoint).body()
            try:
                answer = client.post(f"{url}/add-checkpoint", content=body)
            except httpx.HTTPError as failed:
                raise LedgerError("WITNESS_UNREACHABLE", f"{url}: {failed}") from None
            if answer.status_code == 200:
                self.cosigned[url] = checkpoint.size
                return answer.text
            if answer.status_code == 409 and answer.headers.get("content-type", "").startswith(
                SIZE_MEDIA_TYPE
            ):
                self.cosigned[url] = _size(answer.text)
                self.conflicts += 1
                LOG.info("witness %s cosigned %d leaves last", url, self.cosigned[url])
                continue
            raise LedgerError(
                "WITNESS_REFUSED", f"{url} answered {answer.status_code}: {answer.text[:200]}"
            )
        raise LedgerError("WITNESS_REFUSED", f"{url} answered 409 twice")

    def _stored_size(self, db: Database, size: int) -> int:
        def cosigned_size(conn: Connection, key: VerifierKey) -> int | None:
            key_id = key.as_type(COSIGNATURE_V1).key_id.hex()
            found = {"witness_name": key.name, "witness_key_id": key_id, "tree_size": size}
            cosigned: int | None = fetch_value(conn, "witness_cosigned_size", found)
            return cosigned

        return resumed_size(db.read(lambda conn: [cosigned_size(conn, k) for k in self._keys]))


def _size(text: str) -> int:
    line = text.removesuffix("\n")
    if not line.isdigit() or line != str(int(line)):
        raise LedgerError("WITNESS_REFUSED", f"a 409 whose body is not a tree size: {text[:40]!r}")
    return int(line)
