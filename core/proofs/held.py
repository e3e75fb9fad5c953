"""`verify`'s check of the stored checkpoints and their known witnesses' cosignatures, each held to
the tree's right edge as the walk reaches its size, so that no proof and no extra read is needed."""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence

import attrs
from aios_ledger.core.errors import LedgerError
from aios_ledger.core.log.merkle import Frontier
from aios_ledger.core.log.verification import (
    CHECKPOINT_FORGED,
    CHECKPOINT_MISMATCH,
    COSIGNATURE_FORGED,
    Finding,
)
from aios_ledger.core.proofs.checkpoints import (
    Checkpoint,
    CheckpointRow,
    cosignature_time,
    verified_cosignatures,
)
from aios_ledger.core.proofs.notes import (
    COSIGNATURE_V1,
    SignatureCheck,
    VerifierKey,
    open_note,
    parse_note,
)

TABLE = "checkpoints"
COSIGNATURES_TABLE = "checkpoint_cosignatures"


@attrs.frozen
class StoredCosignature:
    """One row of `checkpoint_cosignatures` as `verify` reads it."""

    checkpoint_id: object
    witness_name: object
    witness_key_id: object
    cosigned_at: object
    line: object


class CheckpointHold:
    """The check of one walk's stored checkpoints: `reached` at each size, then `finish`."""

    def __init__(
        self,
        rows: Iterator[CheckpointRow],
        keys: Sequence[VerifierKey],
        check: SignatureCheck,
        *,
        cosignatures: Iterable[StoredCosignature] = (),
        witnesses: Sequence[VerifierKey] = (),
    ) -> None:
        self._rows = rows
        self._keys = tuple(keys)
        self._check = check
        # The stored cosignatures, in the checkpoints' order (each checkpoint's in a run).
        self._cosignatures = iter(cosignatures)
        self._next_cosignature = next(self._cosignatures, None)
        self._witnesses = {
            (key.name, key.key_id.hex()): key
            for key in (witness.as_type(COSIGNATURE_V1) for witness in witnesses)
        }
        self.findings: list[Finding] = []
        self._next: CheckpointRow | None = None
        self.checked = 0
        self.signatures_checked = 0
        self.cosignatures_checked = 0
        self._advance()

    @property
    def next_size(self) -> int | None:
        return None if self._next is None else self._next.tree_size

    def _note(self, code: str, row: CheckpointRow, detail: str) -> None:
        self.findings.append(Finding(code, None, detail, table=TABLE, key=str(row.checkpoint_id)))

    def _advance(self) -> None:
        """The next row whose size is a tree size, reporting a row with none."""
        self._next = next(self._rows, None)
        while self._next is not None and not _is_size(self._next.tree_size):
            self._note(CHECKPOINT_MISMATCH, self._next, "the checkpoint's size is not a tree size")
            self._held_cosignatures(self._next, None)
            self._next = next(self._rows, None)

    def reached(self, frontier: Frontier) -> None:
        """Hold the checkpoints of `frontier.size` to the tree's root."""
        root: bytes | None = None
        while (row := self._next) is not None and row.tree_size == frontier.size:
            root = frontier.head().root if root is None else root
            self.checked += 1
            self._signed(row)
            if bytes(row.root_hash) != root:
                self._note(
                    CHECKPOINT_MISMATCH,
                    row,
                    f"the checkpoint signs root {bytes(row.root_hash).hex()} for {row.tree_size} "
                    f"leaves; the stored leaves make {root.hex()}: the tree was rewritten under "
                    "it, or its root edited",
                )
            self._advance()

    def finish(self, size: int) -> list[Finding]:
        """After the last leaf: a checkpoint left signs a larger tree than the one stored."""
        while (row := self._next) is not None:
            self._signed(row)
            self._note(
                CHECKPOINT_MISMATCH,
                row,
                f"the checkpoint signs a tree of {row.tree_size} leaves; the stored tree has "
                f"{size}: leaves it signed are gone",
            )
            self._advance()
        return self.findings

    def _signed(self, row: CheckpointRow) -> None:
        """The note says what the row says and verifies when the key is known."""
        try:
            if not isinstance(row.note, str):
                raise LedgerError("NOTE_INVALID", "the stored note is not text")
            note = parse_note(row.note)
            body = Checkpoint.parse(note.text)
        except LedgerError as refused:
            self._note(CHECKPOINT_MISMATCH, row, f"the stored note is not a checkpoint: {refused}")
            self._held_cosignatures(row, None)
            return
        self._held_cosignatures(row, note.text)
        said = (body.origin, body.size, body.root)
        if said != (row.origin, row.tree_size, bytes(row.root_hash)):
            self._note(
                CHECKPOINT_MISMATCH,
                row,
                f"the note signs size {body.size} and root {body.root.hex()} of "
                f"{body.origin[:80]!r}; its row says size {row.tree_size} and root "
                f"{bytes(row.root_hash).hex()} of {row.origin[:80]!r}",
            )
        keys = [key for key in self._keys if key.name == body.origin]
        if keys:
            try:
                open_note(note, keys, self._check)
                self.signatures_checked += 1
            except LedgerError as refused:
                detail = f"the note does not verify under the ledger's key: {refused}"
                self._note(CHECKPOINT_FORGED, row, detail)

    def _held_cosignatures(self, row: CheckpointRow, body: str | None) -> None:
        """The stored cosignatures of `row`, held to its checkpoint `body`."""
        while (
            self._next_cosignature is not None
            and self._next_cosignature.checkpoint_id == row.checkpoint_id
        ):
            stored = self._next_cosignature
            self._next_cosignature = next(self._cosignatures, None)
            if body is None:
                continue
            key = self._witnesses.get((str(stored.witness_name), str(stored.witness_key_id)))
            if key is None:
                continue
            problem = _cosignature_problem(stored, body, key, self._check)
            self.cosignatures_checked += problem is None
            if problem is not None:
                self.findings.append(
                    Finding(
                        COSIGNATURE_FORGED,
                        None,
                        f"the cosignature of {key.name[:80]!r} on checkpoint "
                        f"{row.checkpoint_id}: {problem}",
                        table=COSIGNATURES_TABLE,
                        key=f"{row.checkpoint_id} {key.name} {stored.witness_key_id}",
                    )
                )


def _cosignature_problem(
    stored: StoredCosignature, body: str, key: VerifierKey, check: SignatureCheck
) -> str | None:
    """What is wrong with a stored cosignature by the witness `key` (None: nothing)."""
    if not isinstance(stored.line, str):
        return "the stored line is not text"
    try:
        note = parse_note(body + "\n" + stored.line)
        (signature,) = note.signatures
        if not signature.by(key):
            return "the line is not by the witness its row names"
        verified_cosignatures(note, [key], check)
        if cosignature_time(signature) != stored.cosigned_at:
            return "the line's time is not the time its row says"
    except LedgerError as refused:
        return f"it does not verify over the checkpoint's body ({refused.code})"
    except ValueError:
        return "the stored line is not one signature line"
    return None


def _is_size(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0
