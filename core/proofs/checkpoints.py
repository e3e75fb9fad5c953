"""Checkpoints (C2SP `tlog-checkpoint`) and a witness's decision: it cosigns only what is consistent
with its last cosigned checkpoint, so a log that rewrote its history gets no cosignature."""

from __future__ import annotations

import base64
import re
from collections.abc import Iterable, Sequence
from typing import Any

import attrs
from aios_ledger.core.errors import LedgerError
from aios_ledger.core.log.merkle import HASH_SIZE, verify_consistency
from aios_ledger.core.proofs.cosignatures import (
    MAX_TIMESTAMP,
    cosigned_message,
    split_cosignature,
    timestamped_signature,
)
from aios_ledger.core.proofs.notes import (
    COSIGNATURE_V1,
    ED25519,
    NoteSignature,
    OpenedNote,
    SignatureCheck,
    SignedNote,
    VerifierKey,
    b64decode_canonical,
    ed25519_signature,
    note_text,
    open_note,
    parse_note,
)
from aios_ledger.core.timestamps import Timestamp, require_timestamp

CHECKPOINT_SCHEMA = "aios.checkpoint.v1"
WITNESS_STATE_SCHEMA = "aios.witness_state.v1"
_SIZE = re.compile(r"0|[1-9][0-9]*")
# A tree size is a uint64 in every implementation of the format.
MAX_TREE_SIZE = (1 << 64) - 1


@attrs.frozen
class Checkpoint:
    """A log's tree head as a checkpoint body: origin, size, root, extension lines."""

    origin: str
    size: int
    root: bytes
    extensions: tuple[str, ...] = ()

    def __attrs_post_init__(self) -> None:
        if not isinstance(self.origin, str) or not self.origin or "\n" in self.origin:
            raise LedgerError("CHECKPOINT_INVALID", "a checkpoint's origin is one non-empty line")
        if isinstance(self.size, bool) or not isinstance(self.size, int):
            raise LedgerError("CHECKPOINT_INVALID", "a checkpoint's size is an integer")
        if not 0 <= self.size <= MAX_TREE_SIZE:
            raise LedgerError("CHECKPOINT_INVALID", "a checkpoint's size is 0 to 2**64 - 1")
        if not isinstance(self.root, bytes) or len(self.root) != HASH_SIZE:
            raise LedgerError("CHECKPOINT_INVALID", "a checkpoint's root is 32 bytes")
        if any(not line or "\n" in line for line in self.extensions):
            raise LedgerError("CHECKPOINT_INVALID", "an extension line is one non-empty line")

    def body(self) -> str:
        """The note text: origin, size, base64 root, extension lines, each ending in \\n."""
        lines = [self.origin, str(self.size), base64.b64encode(self.root).decode()]
        return note_text("".join(line + "\n" for line in (*lines, *self.extensions)))

    def public(self) -> dict[str, Any]:
        return {
            "schema": CHECKPOINT_SCHEMA,
            "origin": self.origin,
            "size": self.size,
            "root": self.root.hex(),
        }

    @classmethod
    def parse(cls, text: str) -> Checkpoint:
        """A checkpoint from a note's text, else CHECKPOINT_INVALID."""
        if not isinstance(text, str) or not text.endswith("\n"):
            raise LedgerError("CHECKPOINT_INVALID", "a checkpoint's text ends in a newline")
        lines = text[:-1].split("\n")
        if len(lines) < 3 or any(not line for line in lines):
            raise LedgerError("CHECKPOINT_INVALID", "a checkpoint is 3 or more non-empty lines")
        origin, size, root, *extensions = lines
        if not _SIZE.fullmatch(size):
            raise LedgerError("CHECKPOINT_INVALID", f"tree size {size[:30]!r} is not decimal")
        decoded = b64decode_canonical(root)
        if decoded is None or len(decoded) != HASH_SIZE:
            raise LedgerError("CHECKPOINT_INVALID", "the root line is not base64 of 32 bytes")
        return cls(origin, int(size), decoded, tuple(extensions))


def checkpoint_message(checkpoint: Checkpoint) -> bytes:
    """What the log signs (Ed25519, type 0x01): the checkpoint body."""
    return checkpoint.body().encode()


def signed_checkpoint(checkpoint: Checkpoint, log_key: VerifierKey, signature: bytes) -> SignedNote:
    """The checkpoint's note signed by the log's key, named as its origin."""
    if log_key.name != checkpoint.origin or log_key.key_type != ED25519:
        raise LedgerError("CHECKPOINT_INVALID", "the log's Ed25519 key is named as its origin")
    return SignedNote(checkpoint.body(), (ed25519_signature(log_key, signature),))


def cosignature_message(checkpoint_body: str, timestamp: int) -> bytes:
    """What a witness signs (cosignature/v1) for a checkpoint body at `timestamp`."""
    Checkpoint.parse(checkpoint_body)
    _require_timestamp(timestamp)
    return cosigned_message(timestamp, checkpoint_body)


def cosignature(witness_key: VerifierKey, timestamp: int, signature: bytes) -> NoteSignature:
    """The witness's signature line over `cosignature_message`, under its cosignature key ID."""
    _require_timestamp(timestamp)
    key = witness_key.as_type(COSIGNATURE_V1)
    if len(signature) != 64:
        raise LedgerError("COSIGNATURE_INVALID", "an Ed25519 signature is 64 bytes")
    return NoteSignature(key.name, key.key_id, timestamped_signature(timestamp, signature))


def cosignature_time(signature: NoteSignature) -> int:
    """The timestamp of a cosignature line (COSIGNATURE_INVALID when it is not one)."""
    split = split_cosignature(signature.signature)
    if split is None:
        raise LedgerError("COSIGNATURE_INVALID", "a cosignature is a timestamp and 64 bytes")
    return split[0]


def _require_timestamp(timestamp: object) -> None:
    if isinstance(timestamp, bool) or not isinstance(timestamp, int):
        raise LedgerError("COSIGNATURE_INVALID", "a cosignature's time is an integer")
    if not 0 <= timestamp <= MAX_TIMESTAMP:
        raise LedgerError("COSIGNATURE_INVALID", "a cosignature's time is 0 to 2**63 - 1")


def checkpoint_root(checkpoint: Checkpoint, size: int) -> bytes:
    """The root a proof of `size` leaves is checked against, else PROOF_REJECTED."""
    if checkpoint.size != size:
        raise LedgerError(
            "PROOF_REJECTED",
            f"the proof is of a tree of {size} leaves; the checkpoint signs {checkpoint.size}",
        )
    return checkpoint.root


@attrs.frozen
class OpenedCheckpoint:
    """A checkpoint whose log signature verified, and its note as received."""

    checkpoint: Checkpoint
    opened: OpenedNote


def open_checkpoint(
    message: str | bytes | SignedNote,
    log_key: VerifierKey,
    check: SignatureCheck,
    *,
    origin: str | None = None,
) -> OpenedCheckpoint:
    """A checkpoint of `origin` (default: the key's name) that `log_key` signed."""
    if log_key.key_type != ED25519:
        raise LedgerError("NOTE_KEY_INVALID", "a log's key is an Ed25519 (0x01) key")
    opened = open_note(message, [log_key], check)
    checkpoint = Checkpoint.parse(opened.text)
    expected = log_key.name if origin is None else origin
    if checkpoint.origin != expected:
        raise LedgerError(
            "CHECKPOINT_INVALID",
            f"origin {checkpoint.origin[:80]!r} is not the log's, {expected!r}",
        )
    return OpenedCheckpoint(checkpoint, opened)


def verified_cosignatures(
    note: SignedNote, witnesses: Iterable[VerifierKey], check: SignatureCheck
) -> tuple[NoteSignature, ...]:
    """The cosignatures on `note` by one of `witnesses`, each checked; others ignored."""
    keys = [key.as_type(COSIGNATURE_V1) for key in witnesses]
    found: list[NoteSignature] = []
    for signature in note.signatures:
        key = next((key for key in keys if signature.by(key)), None)
        if key is None or signature in found:
            continue
        split = split_cosignature(signature.signature)
        if split is None or not check(
            key.public_key, cosigned_message(split[0], note.text), split[1]
        ):
            raise LedgerError(
                "COSIGNATURE_INVALID", f"the cosignature of {key.name} does not verify"
            )
        found.append(signature)
    return tuple(found)


def cosigned_note(stored: str, cosignatures: Sequence[NoteSignature]) -> str:
    """A checkpoint note with one cosignature line per witness key, the newest."""
    note = parse_note(stored)
    for signature in cosignatures:
        note = note.with_signature(signature)
    return note.encode()


@attrs.frozen
class CheckpointRow:
    """One row of `checkpoints`: a checkpoint the ledger signed, as the note it served."""

    checkpoint_id: int
    origin: str
    tree_size: int
    root_hash: bytes
    key_id: str
    note: str
    signed_at: str

    def public(self, cosignature_lines: Sequence[str] = ()) -> dict[str, Any]:
        return {
            "schema": CHECKPOINT_SCHEMA,
            "checkpoint_id": self.checkpoint_id,
            "origin": self.origin,
            "size": self.tree_size,
            "root": bytes(self.root_hash).hex(),
            "key_id": self.key_id,
            "signed_at": self.signed_at,
            "note": self.note + "".join(cosignature_lines),
        }


# -- the witness --------------------------------------------------------------------------------


@attrs.frozen
class WitnessState:
    """What a witness keeps of a log: the last checkpoint it cosigned (None: it saw none)."""

    origin: str
    size: int
    root: bytes

    def public(self) -> dict[str, Any]:
        return {
            "schema": WITNESS_STATE_SCHEMA,
            "origin": self.origin,
            "size": self.size,
            "root": self.root.hex(),
        }

    @classmethod
    def from_mapping(cls, document: object) -> WitnessState:
        if not isinstance(document, dict) or set(document) != {"schema", "origin", "size", "root"}:
            raise LedgerError(
                "WITNESS_STATE_INVALID", "a witness state has schema, origin, size, root"
            )
        if document["schema"] != WITNESS_STATE_SCHEMA:
            raise LedgerError("WITNESS_STATE_INVALID", f"schema is not {WITNESS_STATE_SCHEMA}")
        origin, size, root = document["origin"], document["size"], document["root"]
        try:
            decoded = bytes.fromhex(root) if isinstance(root, str) else b""
        except ValueError:
            decoded = b""
        try:
            Checkpoint(origin, size, decoded)
        except LedgerError as refused:
            raise LedgerError("WITNESS_STATE_INVALID", refused.detail) from None
        return cls(origin, size, decoded)


@attrs.frozen
class CosignPlan:
    """What the witness does next: sign `message` at `timestamp`, add the line, keep `state`."""

    checkpoint: Checkpoint
    message: bytes
    timestamp: int
    state: WitnessState

    @classmethod
    def of(cls, checkpoint: Checkpoint, timestamp: int) -> CosignPlan:
        """Cosign `checkpoint` at `timestamp`, and keep it as the last one cosigned."""
        message = cosignature_message(checkpoint.body(), timestamp)
        state = WitnessState(checkpoint.origin, checkpoint.size, checkpoint.root)
        return cls(checkpoint, message, timestamp, state)


def consistency_proof_needed(last: WitnessState | None, checkpoint: Checkpoint) -> int | None:
    """The old size the witness needs a consistency proof from, or None when it needs none."""
    if last is None or checkpoint.size <= last.size or last.size == 0:
        return None
    return last.size


@attrs.frozen
class CosignRequest:
    """A checkpoint verified as the log's, and the consistency proof asked for."""

    checkpoint: Checkpoint
    proof: tuple[bytes, ...] | None = None


def decide_cosign(
    state: WitnessState | None, request: CosignRequest, *, now: Timestamp
) -> CosignPlan:
    """Whether a witness that last cosigned `state` cosigns the checkpoint at `now`."""
    timestamp = require_timestamp(now).epoch_ms // 1000
    _require_timestamp(timestamp)
    last, checkpoint, proof = state, request.checkpoint, request.proof
    if last is not None:
        if last.origin != checkpoint.origin:
            raise LedgerError(
                "WITNESS_ORIGIN_MISMATCH",
                f"this witness keeps {last.origin!r}, not {checkpoint.origin[:80]!r}",
            )
        if checkpoint.size < last.size:
            raise LedgerError(
                "CHECKPOINT_ROLLBACK",
                f"the log's tree of {checkpoint.size} is smaller than the {last.size} cosigned",
            )
        consistent = verify_consistency(
            last.size, checkpoint.size, last.root, checkpoint.root, tuple(proof or ())
        )
        if not consistent:
            raise LedgerError(
                "CHECKPOINT_INCONSISTENT",
                f"the tree of {checkpoint.size} (root {checkpoint.root.hex()}) does not extend "
                f"the tree of {last.size} (root {last.root.hex()}) this witness cosigned",
            )
    return CosignPlan.of(checkpoint, timestamp)
