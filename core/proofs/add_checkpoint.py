"""The C2SP tlog-witness `add-checkpoint` call: the request body and what a witness decides, each
refusal a `LedgerError` whose code `WITNESS_STATUS` maps to the spec's status."""

from __future__ import annotations

import base64
import re
from collections.abc import Iterable

import attrs
from aios_ledger.core.errors import LedgerError
from aios_ledger.core.log.merkle import HASH_SIZE, verify_consistency
from aios_ledger.core.proofs.checkpoints import (
    MAX_TREE_SIZE,
    Checkpoint,
    CosignPlan,
    WitnessState,
)
from aios_ledger.core.proofs.notes import (
    ED25519,
    MAX_NOTE_BYTES,
    SignatureCheck,
    SignedNote,
    VerifierKey,
    b64decode_canonical,
    open_note,
    parse_note,
)
from aios_ledger.core.timestamps import Timestamp, require_timestamp

MAX_PROOF_LINES = 63
# The body: an old size line, proof lines, an empty line, and a note of at most MAX_NOTE_BYTES.
MAX_BODY_BYTES = MAX_NOTE_BYTES + len("old \n\n") + 20 + MAX_PROOF_LINES * 45
SIZE_MEDIA_TYPE = "text/x.tlog.size"
_OLD = re.compile(r"old (0|[1-9][0-9]*)")

WITNESS_REQUEST_INVALID = "WITNESS_REQUEST_INVALID"
WITNESS_ORIGIN_UNKNOWN = "WITNESS_ORIGIN_UNKNOWN"
WITNESS_UNTRUSTED = "WITNESS_UNTRUSTED"
WITNESS_CONFLICT = "WITNESS_CONFLICT"
WITNESS_PROOF_INVALID = "WITNESS_PROOF_INVALID"
WITNESS_STATUS = {
    WITNESS_REQUEST_INVALID: 400,
    WITNESS_UNTRUSTED: 403,
    WITNESS_ORIGIN_UNKNOWN: 404,
    WITNESS_CONFLICT: 409,
    WITNESS_PROOF_INVALID: 422,
}


@attrs.frozen
class AddCheckpointRequest:
    """An `add-checkpoint` body, its note's signatures unchecked."""

    old_size: int
    proof: tuple[bytes, ...]
    note: SignedNote
    checkpoint: Checkpoint

    def body(self) -> bytes:
        lines = [f"old {self.old_size}", *(base64.b64encode(h).decode() for h in self.proof)]
        return ("".join(line + "\n" for line in lines) + "\n" + self.note.encode()).encode()

    @classmethod
    def parse(cls, body: bytes) -> AddCheckpointRequest:
        """The request from its body; WITNESS_REQUEST_INVALID (400) for any other shape."""
        if not isinstance(body, bytes) or len(body) > MAX_BODY_BYTES:
            raise LedgerError(WITNESS_REQUEST_INVALID, "the body is not an add-checkpoint request")
        try:
            text = body.decode("utf-8")
        except UnicodeDecodeError:
            raise LedgerError(WITNESS_REQUEST_INVALID, "the body is not UTF-8") from None
        head, separator, note_text = text.partition("\n\n")
        if not separator:
            raise LedgerError(WITNESS_REQUEST_INVALID, "no empty line before the checkpoint")
        old_line, *proof_lines = head.split("\n")
        matched = _OLD.fullmatch(old_line)
        if matched is None or int(matched[1]) > MAX_TREE_SIZE:
            raise LedgerError(WITNESS_REQUEST_INVALID, "the first line is `old SIZE`, in decimal")
        if len(proof_lines) > MAX_PROOF_LINES:
            raise LedgerError(
                WITNESS_REQUEST_INVALID, f"at most {MAX_PROOF_LINES} consistency proof lines"
            )
        proof = tuple(_hash_line(line) for line in proof_lines)
        try:
            note = parse_note(note_text)
            checkpoint = Checkpoint.parse(note.text)
        except LedgerError as refused:
            raise LedgerError(WITNESS_REQUEST_INVALID, str(refused)) from None
        return cls(int(matched[1]), proof, note, checkpoint)


def _hash_line(line: str) -> bytes:
    decoded = b64decode_canonical(line)
    if decoded is None or len(decoded) != HASH_SIZE:
        raise LedgerError(WITNESS_REQUEST_INVALID, "a proof line is not base64 of 32 bytes")
    return decoded


def trusted_checkpoint(
    request: AddCheckpointRequest, log_keys: Iterable[VerifierKey], check: SignatureCheck
) -> Checkpoint:
    """The checkpoint, when a key trusted for its origin signed it; else 404 or 403."""
    checkpoint = request.checkpoint
    keys = [key for key in log_keys if key.name == checkpoint.origin and key.key_type == ED25519]
    if not keys:
        raise LedgerError(
            WITNESS_ORIGIN_UNKNOWN, f"this witness does not witness {checkpoint.origin[:80]!r}"
        )
    try:
        open_note(request.note, keys, check)
    except LedgerError as refused:
        raise LedgerError(WITNESS_UNTRUSTED, str(refused)) from None
    return checkpoint


def resumed_size(cosigned_sizes: Iterable[int | None]) -> int:
    """The old size for a witness a restarted log knows nothing of; a wrong one costs a 409."""
    return max((size for size in cosigned_sizes if size is not None), default=0)


def decide_add_checkpoint(
    state: WitnessState | None, request: AddCheckpointRequest, *, now: Timestamp
) -> CosignPlan:
    """Whether a witness that last cosigned `state` cosigns the trusted checkpoint at `now`."""
    checkpoint, old = request.checkpoint, request.old_size
    if old > checkpoint.size:
        raise LedgerError(
            WITNESS_REQUEST_INVALID,
            f"the old size {old} is larger than the checkpoint's, {checkpoint.size}",
        )
    if old == 0 and request.proof:
        raise LedgerError(WITNESS_REQUEST_INVALID, "a proof from the old size 0 is empty")
    cosigned = 0 if state is None else state.size
    if old != cosigned:
        raise LedgerError(
            WITNESS_CONFLICT, f"the old size is {old}; this witness cosigned {cosigned} last"
        )
    if state is not None and old > 0:
        if old == checkpoint.size and state.root != checkpoint.root:
            raise LedgerError(
                WITNESS_CONFLICT,
                f"another root at the size {old} this witness cosigned: the log forked",
            )
        if not verify_consistency(old, checkpoint.size, state.root, checkpoint.root, request.proof):
            raise LedgerError(
                WITNESS_PROOF_INVALID,
                f"the proof does not show the tree of {checkpoint.size} extends the tree of "
                f"{old} this witness cosigned",
            )
    return CosignPlan.of(checkpoint, require_timestamp(now).epoch_ms // 1000)
