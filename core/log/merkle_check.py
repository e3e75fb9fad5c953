"""`verify`'s check of the Merkle log against the seals: fed every leaf in order, it rebuilds
the tree from the stored leaf hashes and holds every stored subtree and the head row to it,
keeping only the tree's edge in memory.
"""

from __future__ import annotations

from aios_ledger.core.log.merkle import HASH_SIZE, SEAL_TEXT, Frontier, event_leaf_hash
from aios_ledger.core.log.verification import MERKLE_MISMATCH, Finding


class MerkleCheck:
    """The check of one walk; `findings` grows as it goes."""

    def __init__(self) -> None:
        self.frontier = Frontier(0)
        self.findings: list[Finding] = []

    def _note(self, detail: str, event_id: int | None = None, *, table: str, key: str) -> None:
        self.findings.append(Finding(MERKLE_MISMATCH, event_id, detail, table=table, key=key))

    def leaf(
        self, leaf_index: int, event_id: int, leaf_hash: bytes, seal: object, nodes: bytes
    ) -> None:
        """The next leaf, with the subtrees its row holds (`nodes`) and its event's seal (or its
        archive listing's; None: the event is gone)."""

        def note(detail: str) -> None:
            self._note(detail, event_id, table="merkle_leaves", key=str(leaf_index))

        if leaf_index != self.frontier.size:
            note(f"leaf {leaf_index} comes where leaf {self.frontier.size} belongs")
        if seal is None:
            note("the leaf's event is gone, and no archive lists it")
        elif (
            not isinstance(seal, str)
            or not SEAL_TEXT.fullmatch(seal)
            or event_leaf_hash(seal) != leaf_hash
        ):
            note("the leaf's hash is not the hash of its event's seal")
        if not isinstance(leaf_hash, bytes) or len(leaf_hash) != HASH_SIZE:
            note("the leaf's hash is malformed")
            leaf_hash = b"\0" * HASH_SIZE
        self.frontier, stored = self.frontier.append([leaf_hash])
        completed = stored[1:]
        if len(nodes) != HASH_SIZE * len(completed):
            note(
                f"the leaf's row holds {len(nodes) / HASH_SIZE:g} subtrees; it completes "
                f"{len(completed)}"
            )
        for place, item in enumerate(completed):
            held = nodes[place * HASH_SIZE : (place + 1) * HASH_SIZE]
            if len(held) == HASH_SIZE and held != item.hash:
                note(
                    f"the stored subtree {item.node.level}/{item.node.index} is not the hash "
                    "of the leaves under it"
                )

    def event_without_leaf(self, event_id: int) -> None:
        self._note(
            "a sealed event that no leaf is of", event_id, table="merkle_leaves", key=str(event_id)
        )

    def finish(self, size: int | None, frontier: bytes) -> list[Finding]:
        """After the last leaf: the head row (`size` None: the tree was never built)."""
        if size is None:
            if self.frontier.size:
                self._note(
                    "the head row says the tree is not built, but it has leaves",
                    table="merkle_tree",
                    key="1",
                )
        elif size != self.frontier.size or bytes(frontier) != self.frontier.encode():
            self._note(
                f"the head row says {size} leaves with another edge; the leaves make "
                f"{self.frontier.size}",
                table="merkle_tree",
                key="1",
            )
        return self.findings
