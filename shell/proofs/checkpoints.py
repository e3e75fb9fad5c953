"""Signed checkpoints of the ledger's tree head, stored as the notes served, with witnesses'
cosignatures beside them (docs/checkpoints.md). Neither is an event, which would grow the very
tree it signs: each carries its own proof, a signature anyone checks with the public key.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Sequence
from datetime import datetime

import attrs
from aios_ledger.core import LedgerError, Timestamp
from aios_ledger.core.proofs import (
    Checkpoint,
    VerifierKey,
    checkpoint_message,
    parse_note,
    signed_checkpoint,
    verified_cosignatures,
)
from aios_ledger.core.proofs.checkpoints import CheckpointRow
from aios_ledger.core.proofs.cosignatures import split_cosignature
from aios_ledger.shell.clock import read_clock
from aios_ledger.shell.db.connection import Database
from aios_ledger.shell.db.merkle import current_tree_head, tree_head_in
from aios_ledger.shell.db.run import Connection, fetch_all, fetch_record
from aios_ledger.shell.proofs.keys import Signer, check_ed25519

LOG = logging.getLogger("aios_ledger.checkpoints")
POLL_SECONDS = 1.0


@attrs.frozen
class ServedCheckpoint:
    """A stored checkpoint and the cosignature lines stored with it."""

    row: CheckpointRow
    cosignature_lines: tuple[str, ...]

    @property
    def note(self) -> str:
        """The note as served: the log's signature line, then each witness's."""
        return self.row.note + "".join(self.cosignature_lines)

    def public(self) -> dict[str, object]:
        return self.row.public(self.cosignature_lines)


def _served(conn: Connection, row: CheckpointRow) -> ServedCheckpoint:
    lines = fetch_all(conn, "checkpoint_cosignature_lines", {"checkpoint_id": row.checkpoint_id})
    # PostgreSQL reads bytea as memoryview; the record holds bytes on both engines.
    row = attrs.evolve(row, root_hash=bytes(row.root_hash))
    return ServedCheckpoint(row, tuple(str(line["line"]) for line in lines))


def _of_size(conn: Connection, size: int) -> list[CheckpointRow]:
    """The checkpoints of `size` leaves, newest first (few: each by another key)."""
    return list(conn.stream_records("checkpoint_by_body", {"tree_size": size}, CheckpointRow))


def sign_checkpoint(db: Database, signer: Signer, now: Timestamp) -> ServedCheckpoint:
    """Sign and store the ledger's tree head now, unless the same key signed that head last: a
    checkpoint has no time, so a second signature would say nothing new. Signers take turns
    (servers of a fleet on one PostgreSQL database among them) and each reads the head and the
    latest checkpoint inside its turn, so a stale head is never stored after a larger one."""
    key_id = signer.verifier.key_id.hex()

    def work(conn: Connection) -> ServedCheckpoint:
        conn.fetch_record("checkpoint_signer_lock", None, None)
        head = tree_head_in(conn)
        checkpoint = Checkpoint(signer.verifier.name, head.size, head.root)
        note = signed_checkpoint(
            checkpoint, signer.verifier, signer.sign(checkpoint_message(checkpoint))
        ).encode()
        latest = fetch_record(conn, "latest_checkpoint", None, CheckpointRow)
        if latest is None or (latest.note, latest.key_id) != (note, key_id):
            conn.run_write(
                "insert_checkpoint",
                {
                    "origin": checkpoint.origin,
                    "tree_size": checkpoint.size,
                    "root_hash": checkpoint.root,
                    "key_id": key_id,
                    "note": note,
                    "signed_at": now.text,
                },
            )
            latest = fetch_record(conn, "latest_checkpoint", None, CheckpointRow)
        assert latest is not None
        return _served(conn, latest)

    # Row-locked: a signature takes no event id, so tasks' transitions go on beside it.
    return db.write(work, row_locked=True)


def latest_checkpoint(db: Database, size: int | None = None) -> ServedCheckpoint:
    """The checkpoint signed last, of `size` leaves when given."""

    def work(conn: Connection) -> ServedCheckpoint:
        if size is None:
            row = fetch_record(conn, "latest_checkpoint", None, CheckpointRow)
        else:
            row = next(iter(_of_size(conn, size)), None)
        if row is None:
            which = "" if size is None else f" of {size} leaves"
            raise LedgerError("CHECKPOINT_NOT_FOUND", f"no checkpoint{which} was signed")
        return _served(conn, row)

    return db.read(work)


def add_cosignatures(
    db: Database, cosigned: str | bytes, witnesses: Sequence[VerifierKey], now: Timestamp
) -> ServedCheckpoint:
    """Store the cosignatures the configured `witnesses` added to a checkpoint note the ledger
    served; nothing is stored unless every line by a configured witness verifies."""
    note = parse_note(cosigned)
    checkpoint = Checkpoint.parse(note.text)
    lines = verified_cosignatures(note, witnesses, check_ed25519)
    if not lines:
        raise LedgerError(
            "WITNESS_UNKNOWN", "no cosignature on the note is by a witness this ledger accepts"
        )

    def work(conn: Connection) -> ServedCheckpoint:
        rows = _of_size(conn, checkpoint.size)
        stored = next((row for row in rows if parse_note(row.note).text == note.text), None)
        if stored is None:
            raise LedgerError(
                "CHECKPOINT_NOT_FOUND",
                f"this ledger signed no checkpoint with that body (size {checkpoint.size})",
            )
        for line in lines:
            split = split_cosignature(line.signature)
            assert split is not None  # verified_cosignatures checked its shape
            conn.run_write(
                "upsert_checkpoint_cosignature",
                {
                    "checkpoint_id": stored.checkpoint_id,
                    "witness_name": line.name,
                    "witness_key_id": line.key_id.hex(),
                    "cosigned_at": split[0],
                    "line": line.line(),
                    "received_at": now.text,
                },
            )
        return _served(conn, stored)

    return db.write(work)


class PeriodicCheckpoints:
    """A thread beside the server that signs a checkpoint at once, then when the tree grew and
    `every_seconds` passed, or when it grew by `every_events`; `after_sign` is told of each."""

    def __init__(
        self,
        db_path: str,
        signer: Signer,
        *,
        every_seconds: float | None,
        every_events: int | None,
        clock: Callable[[], datetime],
        after_sign: Callable[[Database, ServedCheckpoint, Timestamp], object] | None = None,
    ) -> None:
        self._db_path = db_path
        self._signer = signer
        self._every_seconds = every_seconds
        self._every_events = every_events
        self._clock = clock
        self._poll = min(POLL_SECONDS, every_seconds or POLL_SECONDS)
        self._after_sign = after_sign
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="checkpoints", daemon=True)
        self.signed = 0

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=30)

    def _due(self, size: int, last_size: int | None, last_at: float) -> bool:
        if last_size is None:
            return True
        grown = size - last_size
        if self._every_events is not None and grown >= self._every_events:
            return True
        return (
            self._every_seconds is not None
            and grown > 0
            and time.monotonic() - last_at >= self._every_seconds
        )

    def _loop(self) -> None:
        last_size: int | None = None
        last_at = time.monotonic()
        with Database(self._db_path, migrate=False) as db:
            while not self._stop.is_set():
                try:
                    size = current_tree_head(db).size
                    if self._due(size, last_size, last_at):
                        now = read_clock(self._clock)
                        served = sign_checkpoint(db, self._signer, now)
                        last_size, last_at = served.row.tree_size, time.monotonic()
                        self.signed += 1
                        if self._after_sign is not None:
                            self._after_sign(db, served, now)
                except LedgerError as refused:
                    LOG.error("checkpoint: %s", refused)
                self._stop.wait(self._poll)
