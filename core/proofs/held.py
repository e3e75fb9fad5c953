"""`verify`'s check of the checkpoints the ledger stored, against its own tree, without I/O.

`verify` rebuilds the Merkle tree from the stored leaves, one leaf at a time
(`core.log.merkle_check`); each stored checkpoint, streamed smallest tree first, is held to
the tree's edge when the walk reaches its size: the root of those leaves (the edge's hashes
folded, O(log n)) must be the root the checkpoint signs, so no proof and no read beyond the
walk's own is needed. A checkpoint of more leaves than the tree holds signs a tree that is
gone. Each checkpoint's note must also say what its row says (origin, size, root), and,
when the verifier knows a key named as its origin (the ledger's key), verify under it.

So a root edited in its row or its note, a tree rewritten (or cut short) under a signed
checkpoint, and a checkpoint the ledger's key never signed are findings, by checkpoint id:
`CHECKPOINT_MISMATCH` (the checkpoint and the tree disagree, or the note and its row) and
`CHECKPOINT_FORGED` (not the ledger key's signature).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

from aios_ledger.core.errors import LedgerError
from aios_ledger.core.log.merkle import Frontier
from aios_ledger.core.log.verification import CHECKPOINT_FORGED, CHECKPOINT_MISMATCH, Finding
from aios_ledger.core.proofs.checkpoints import Checkpoint, CheckpointRow
from aios_ledger.core.proofs.notes import SignatureCheck, VerifierKey, open_note, parse_note

TABLE = "checkpoints"


class CheckpointHold:
    """The check of one walk's stored checkpoints (ordered by tree size, then id): `reached`
    with the tree's edge at each size the walk passes, from 0, then `finish` with its size.
    `findings` grows as it goes; `checked` counts the checkpoints held to the tree and
    `signatures_checked` those whose signature was verified with a known key."""

    def __init__(
        self,
        rows: Iterator[CheckpointRow],
        keys: Sequence[VerifierKey],
        check: SignatureCheck,
    ) -> None:
        self._rows = rows
        self._keys = tuple(keys)
        self._check = check
        self.findings: list[Finding] = []
        self._next: CheckpointRow | None = None
        self._advance()
        self.checked = 0
        self.signatures_checked = 0

    @property
    def next_size(self) -> int | None:
        """The tree size the next checkpoint signs (None: no checkpoint is left)."""
        return None if self._next is None else self._next.tree_size

    def _note(self, code: str, row: CheckpointRow, detail: str) -> None:
        self.findings.append(Finding(code, None, detail, table=TABLE, key=str(row.checkpoint_id)))

    def _advance(self) -> None:
        """The next row whose size is a tree size; a row whose size is none (a value written
        behind the ledger's back, past the table's checks) is reported as it goes by."""
        self._next = next(self._rows, None)
        while self._next is not None and not _is_size(self._next.tree_size):
            self._note(CHECKPOINT_MISMATCH, self._next, "the checkpoint's size is not a tree size")
            self._next = next(self._rows, None)

    def reached(self, frontier: Frontier) -> None:
        """The walk holds the tree of `frontier.size` leaves: hold the checkpoints of that
        size to its root (the walk tells every size from 0, so none is passed over)."""
        root: bytes | None = None
        while self._next is not None and self._next.tree_size == frontier.size:
            root = frontier.head().root if root is None else root
            self._hold(self._next, root)
            self._advance()

    def finish(self, size: int) -> list[Finding]:
        """After the last leaf (`size` of them): a checkpoint left signs a larger tree than
        the one stored."""
        while self._next is not None:
            row = self._next
            self._signed(row)
            self._note(
                CHECKPOINT_MISMATCH,
                row,
                f"the checkpoint signs a tree of {row.tree_size} leaves; the stored tree has "
                f"{size}: leaves it signed are gone",
            )
            self._advance()
        return self.findings

    def _hold(self, row: CheckpointRow, root: bytes) -> None:
        self.checked += 1
        self._signed(row)
        if bytes(row.root_hash) != root:
            self._note(
                CHECKPOINT_MISMATCH,
                row,
                f"the checkpoint signs root {bytes(row.root_hash).hex()} for {row.tree_size} "
                f"leaves; the stored leaves make {root.hex()}: the tree was rewritten under it, "
                "or its root edited",
            )

    def _signed(self, row: CheckpointRow) -> None:
        """The note says what the row says, and verifies under the ledger's key when known."""
        try:
            if not isinstance(row.note, str):
                raise LedgerError("NOTE_INVALID", "the stored note is not text")
            note = parse_note(row.note)
            body = Checkpoint.parse(note.text)
        except LedgerError as refused:
            self._note(CHECKPOINT_MISMATCH, row, f"the stored note is not a checkpoint: {refused}")
            return
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
        if not keys:
            return
        try:
            open_note(note, keys, self._check)
        except LedgerError as refused:
            self._note(
                CHECKPOINT_FORGED,
                row,
                f"the note does not verify under the ledger's key: {refused}",
            )
            return
        self.signatures_checked += 1


def _is_size(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0
