"""The Merkle log beside the chains (RFC 6962 / RFC 9162): every event is a leaf, in commit
order, whose data is its stored seal text, so the leaf is the same whatever seal version wrote it.
As in Go's `sumdb/tlog`, each complete subtree's hash is stored once, in the row of the leaf that
completes it, so any root or proof needs O(log n) reads: the core names the nodes it needs
(`*_nodes`), the shell reads them, and the core builds the answer.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import attrs
from aios_ledger.core.errors import LedgerError
from aios_ledger.core.statements import SqlParam, SqlWrite, Statement

HASH_SIZE = 32
LEAF_PREFIX = b"\x00"
NODE_PREFIX = b"\x01"
# MTH({}) = SHA-256() (RFC 6962 §2.1, RFC 9162 §2.1.1).
EMPTY_ROOT = hashlib.sha256(b"").digest()

INCLUSION_PROOF_SCHEMA = "aios.merkle_inclusion_proof.v1"
CONSISTENCY_PROOF_SCHEMA = "aios.merkle_consistency_proof.v1"
TREE_HEAD_SCHEMA = "aios.merkle_tree_head.v1"

# A stored seal: `sha256:` and 64 lower-case hex digits.
SEAL_TEXT = re.compile(r"sha256:[0-9a-f]{64}")
_HEX_HASH = re.compile(r"[0-9a-f]{64}")


def leaf_hash(data: bytes) -> bytes:
    """SHA-256(0x00 || data): the hash of a leaf whose data is `data`."""
    return hashlib.sha256(LEAF_PREFIX + data).digest()


def node_hash(left: bytes, right: bytes) -> bytes:
    """SHA-256(0x01 || left || right): an interior node over two subtrees' hashes."""
    return hashlib.sha256(NODE_PREFIX + left + right).digest()


def event_leaf_data(seal: str) -> bytes:
    """An event's leaf data: its seal's text as stored, in ASCII (71 bytes)."""
    if not isinstance(seal, str) or not SEAL_TEXT.fullmatch(seal):
        raise LedgerError("SEAL_INVALID", f"{str(seal)[:80]!r} is not a stored seal")
    return seal.encode("ascii")


def event_leaf_hash(seal: str) -> bytes:
    return leaf_hash(event_leaf_data(seal))


@attrs.frozen(order=True)
class NodeId:
    """A complete subtree covering leaves [index * 2**level, (index + 1) * 2**level)."""

    level: int
    index: int


def _largest_power_below(n: int) -> int:
    """k, the largest power of two smaller than n (n > 1), as RFC 6962 splits D[n]."""
    return 1 << ((n - 1).bit_length() - 1)


def range_nodes(lo: int, hi: int) -> tuple[NodeId, ...]:
    """The complete subtrees, left to right, whose hashes folded from the right (`fold_range`)
    make MTH(D[lo:hi]) for a range of the RFC's recursion: one per binary digit of its length."""
    nodes = []
    while lo < hi:
        level = (hi - lo).bit_length() - 1
        nodes.append(NodeId(level, lo >> level))
        lo += 1 << level
    return tuple(nodes)


def fold_range(hashes: Sequence[bytes]) -> bytes:
    """MTH of a range from its `range_nodes` hashes: as the RFC splits it."""
    if not hashes:
        return EMPTY_ROOT
    folded = hashes[-1]
    for left in reversed(hashes[:-1]):
        folded = node_hash(left, folded)
    return folded


def _hash_of(lo: int, hi: int, nodes: Mapping[NodeId, bytes]) -> bytes:
    try:
        return fold_range([nodes[node] for node in range_nodes(lo, hi)])
    except KeyError as missing:
        raise LedgerError("MERKLE_NODE_MISSING", f"the tree has no node {missing}") from None


@attrs.frozen
class TreeHead:
    """The tree of the first `size` leaves, named by its root hash (what a checkpoint signs)."""

    size: int
    root: bytes

    def public(self) -> dict[str, Any]:
        return {"schema": TREE_HEAD_SCHEMA, "size": self.size, "root": self.root.hex()}


def root_nodes(size: int) -> tuple[NodeId, ...]:
    """The nodes a tree head of `size` leaves is made of."""
    _check_size(size, "size")
    return range_nodes(0, size)


def tree_head(size: int, nodes: Mapping[NodeId, bytes]) -> TreeHead:
    return TreeHead(size, _hash_of(0, size, nodes))


@attrs.frozen
class StoredNode:
    """A node to store: a leaf's hash (level 0) or a subtree a leaf completed."""

    node: NodeId
    hash: bytes


@attrs.frozen
class Frontier:
    """The right edge of a tree (the hashes of `range_nodes(0, size)`): all an append needs."""

    size: int
    hashes: tuple[bytes, ...] = ()

    def __attrs_post_init__(self) -> None:
        _check_size(self.size, "size")
        if len(self.hashes) != self.size.bit_count():
            raise LedgerError(
                "MERKLE_FRONTIER_INVALID",
                f"a tree of {self.size} leaves has {self.size.bit_count()} edge subtrees, "
                f"not {len(self.hashes)}",
            )

    @classmethod
    def decode(cls, size: int, stored: bytes) -> Frontier:
        if len(stored) % HASH_SIZE:
            raise LedgerError("MERKLE_FRONTIER_INVALID", "the stored frontier is not whole hashes")
        hashes = tuple(stored[at : at + HASH_SIZE] for at in range(0, len(stored), HASH_SIZE))
        return cls(size, hashes)

    def encode(self) -> bytes:
        return b"".join(self.hashes)

    def head(self) -> TreeHead:
        return TreeHead(self.size, fold_range(self.hashes))

    def append(self, leaf_hashes: Iterable[bytes]) -> tuple[Frontier, tuple[StoredNode, ...]]:
        """The frontier after `leaf_hashes`, and each leaf then every subtree it completes."""
        edge = list(self.hashes)
        size = self.size
        stored: list[StoredNode] = []
        for leaf in leaf_hashes:
            if not _all_hashes((leaf,)):
                raise LedgerError("MERKLE_HASH_INVALID", f"a leaf hash is not {HASH_SIZE} bytes")
            hashed, level, index = leaf, 0, size
            stored.append(StoredNode(NodeId(0, index), hashed))
            while index & 1:
                hashed = node_hash(edge.pop(), hashed)
                level, index = level + 1, index >> 1
                stored.append(StoredNode(NodeId(level, index), hashed))
            edge.append(hashed)
            size += 1
        return Frontier(size, tuple(edge)), tuple(stored)


@attrs.frozen
class MerkleTreeRow:
    """The tree's head row; `size` is None until the leaves of the events before the tree exist."""

    size: int | None
    frontier: bytes
    revision: int

    def frontier_of(self) -> Frontier:
        if self.size is None:
            raise LedgerError("MERKLE_TREE_NOT_BUILT", "the tree of the events is not built yet")
        return Frontier.decode(int(self.size), bytes(self.frontier))


@attrs.frozen
class MerkleHashRow:
    """One stored hash (a leaf's or a subtree's), as the proofs read them."""

    hash: bytes


def append_writes(
    tree: MerkleTreeRow, leaves: Sequence[tuple[int, str]]
) -> tuple[tuple[SqlWrite, ...], MerkleTreeRow]:
    """The writes appending (event id, seal) leaves and moving the head row on by compare-and-swap.
    It repeats `Frontier.append` without its records because it is on every write's path."""
    if tree.size is None:
        raise LedgerError("MERKLE_TREE_NOT_BUILT", "the tree of the events is not built yet")
    size, stored = int(tree.size), bytes(tree.frontier)
    if len(stored) != HASH_SIZE * size.bit_count():
        raise LedgerError("MERKLE_FRONTIER_INVALID", f"the stored edge does not fit {size} leaves")
    edge = [stored[at : at + HASH_SIZE] for at in range(0, len(stored), HASH_SIZE)]
    sha256 = hashlib.sha256
    writes = []
    for event_id, seal in leaves:
        leaf_hashed = hashed = sha256(LEAF_PREFIX + event_leaf_data(seal)).digest()
        completed = []
        index = size
        while index & 1:
            hashed = sha256(NODE_PREFIX + edge.pop() + hashed).digest()
            completed.append(hashed)
            index >>= 1
        leaf: dict[str, SqlParam] = {
            "leaf_index": size,
            "event_id": event_id,
            "leaf_hash": leaf_hashed,
            "nodes": b"".join(completed),
        }
        writes.append(SqlWrite(Statement.MERKLE_LEAF_INSERT, leaf))
        edge.append(hashed)
        size += 1
    after = MerkleTreeRow(size, b"".join(edge), tree.revision + 1)
    head: dict[str, SqlParam] = {
        "only_row": 1,
        "expected_revision": tree.revision,
        "size": size,
        "frontier": after.frontier,
    }
    writes.append(SqlWrite(Statement.MERKLE_TREE_CAS_UPDATE, head))
    return tuple(writes), after


@attrs.frozen
class ScanFloor:
    """How far an integrator knows every event id to be settled (integrated or never committed):
    ids come from a sequence while writers run beside each other, so an id can commit after a
    higher one, or never. A sequence value read before a snapshot of the transactions in
    progress (`waiting`) is settled once none of those still runs; the value read after the
    last snapshot (`unpaired`) waits for the next pass's snapshot."""

    floor: int = 0
    unpaired: int | None = None
    waiting: tuple[int, tuple[str, ...]] | None = None

    def settle(self, bound: IntegrationBound) -> tuple[int, ScanFloor]:
        """The id every event up to which is settled now, and the floor to keep for the pass
        after this one (`after_pass` then names what that pass appended)."""
        settled = self.floor
        waiting = self.waiting
        if waiting is not None and not bound.still_running:
            settled, waiting = max(settled, waiting[0]), None
        if waiting is None and self.unpaired is not None:
            # Nothing was in progress when this pass's snapshot was taken: the pair is settled
            # now, and the pass's scan (read after) sees every one of its commits.
            if bound.in_progress:
                waiting = (self.unpaired, bound.in_progress)
            else:
                settled = max(settled, self.unpaired)
        return settled, ScanFloor(self.floor, bound.sequence, waiting)

    def after_pass(self, settled: int, appended: Sequence[int], batch: int) -> ScanFloor:
        """The floor once a pass over ids above `self.floor` appended `appended` (in id order):
        a full batch may have left higher ids behind, so the floor stops at its last one."""
        reached = min(settled, appended[-1]) if len(appended) >= batch else settled
        return attrs.evolve(self, floor=max(self.floor, reached))


@attrs.frozen
class IntegrationBound:
    """What one pass reads of the id sequence and the transactions in progress: how many of
    the floor's `waiting` ones still run, the sequence's last value, and those in progress at
    the pass's snapshot (their ids as text). A single writer's store has none."""

    still_running: int
    sequence: int
    in_progress: tuple[str, ...] = ()


@attrs.frozen
class PendingLeaf:
    """A committed event without a leaf yet, as an integration pass reads it."""

    event_id: int
    seal: str
    created_at: str | None


def _inclusion_ranges(index: int, size: int) -> list[tuple[int, int]]:
    """PATH(m, D[n])'s subtrees as leaf ranges, the leaf's sibling first (§2.1.3.1)."""
    lo, hi = 0, size
    path = []
    while hi - lo > 1:
        k = _largest_power_below(hi - lo)
        if index - lo < k:
            path.append((lo + k, hi))
            hi = lo + k
        else:
            path.append((lo, lo + k))
            lo += k
    path.reverse()
    return path


def inclusion_proof_nodes(index: int, size: int) -> tuple[NodeId, ...]:
    """The stored nodes the inclusion proof of leaf `index` in a tree of `size` needs."""
    _check_index(index, size)
    return tuple(node for lo, hi in _inclusion_ranges(index, size) for node in range_nodes(lo, hi))


def inclusion_proof(index: int, size: int, nodes: Mapping[NodeId, bytes]) -> tuple[bytes, ...]:
    """PATH(index, D[size]) from the nodes `inclusion_proof_nodes` named."""
    _check_index(index, size)
    return tuple(_hash_of(lo, hi, nodes) for lo, hi in _inclusion_ranges(index, size))


def verify_inclusion(
    index: int, size: int, leaf: bytes, proof: Sequence[bytes], root: bytes
) -> bool:
    """Whether `proof` shows `leaf` at `index` of the tree whose root is `root` (§2.1.3.2)."""
    if not _all_hashes((leaf, root, *proof)) or not 0 <= index < size:
        return False
    fn, sn, r = index, size - 1, leaf
    for p in proof:
        if sn == 0:
            return False
        if fn & 1 or fn == sn:
            r = node_hash(p, r)
            while not fn & 1 and fn != 0:
                fn, sn = fn >> 1, sn >> 1
        else:
            r = node_hash(r, p)
        fn, sn = fn >> 1, sn >> 1
    return sn == 0 and r == root


def _consistency_ranges(old: int, new: int) -> list[tuple[int, int]]:
    """PROOF(m, D[n])'s subtrees as leaf ranges (§2.1.4.1); none for m = 0 or m = n."""
    if old in (0, new):
        return []
    lo, hi, m, whole = 0, new, old, True
    siblings = []
    while m != hi - lo:
        k = _largest_power_below(hi - lo)
        if m <= k:
            siblings.append((lo + k, hi))
            hi = lo + k
        else:
            siblings.append((lo, lo + k))
            lo, m, whole = lo + k, m - k, False
    siblings.reverse()
    return siblings if whole else [(lo, hi), *siblings]


def _check_sizes(old: int, new: int) -> None:
    _check_size(old, "old size")
    _check_size(new, "new size")
    if old > new:
        raise LedgerError("TREE_SIZE_INVALID", f"the old size {old} is beyond the new {new}")


def consistency_proof_nodes(old: int, new: int) -> tuple[NodeId, ...]:
    """The stored nodes the consistency proof from `old` leaves to `new` needs."""
    _check_sizes(old, new)
    return tuple(node for lo, hi in _consistency_ranges(old, new) for node in range_nodes(lo, hi))


def consistency_proof(old: int, new: int, nodes: Mapping[NodeId, bytes]) -> tuple[bytes, ...]:
    """PROOF(old, D[new]) from the nodes `consistency_proof_nodes` named."""
    _check_sizes(old, new)
    return tuple(_hash_of(lo, hi, nodes) for lo, hi in _consistency_ranges(old, new))


def verify_consistency(
    old: int, new: int, old_root: bytes, new_root: bytes, proof: Sequence[bytes]
) -> bool:
    """Whether `proof` shows the tree (`new`, `new_root`) extends (`old`, `old_root`) (§2.1.4.2)."""
    if not _all_hashes((old_root, new_root, *proof)) or not 0 <= old <= new:
        return False
    if old == new:
        return not proof and old_root == new_root
    if old == 0:
        return not proof
    if not proof:
        return False
    path = list(proof)
    if old & (old - 1) == 0:  # an exact power of two: the old tree is a node of the new
        path.insert(0, old_root)
    fn, sn = old - 1, new - 1
    while fn & 1:
        fn, sn = fn >> 1, sn >> 1
    fr = sr = path[0]
    for c in path[1:]:
        if sn == 0:
            return False
        if fn & 1 or fn == sn:
            fr, sr = node_hash(c, fr), node_hash(c, sr)
            while not fn & 1 and fn != 0:
                fn, sn = fn >> 1, sn >> 1
        else:
            sr = node_hash(sr, c)
        fn, sn = fn >> 1, sn >> 1
    return fr == old_root and sr == new_root and sn == 0


@attrs.frozen
class InclusionProof:
    """An event's inclusion proof as `aios-ledger prove` writes it (RFC 9162's
    `InclusionProofDataV2`, with the leaf's seal and the tree's root)."""

    event_id: int
    seal: str
    leaf_index: int
    tree_size: int
    root: bytes
    hashes: tuple[bytes, ...]

    def public(self) -> dict[str, Any]:
        return {
            "schema": INCLUSION_PROOF_SCHEMA,
            "event_id": self.event_id,
            "seal": self.seal,
            "leaf_index": self.leaf_index,
            "tree_size": self.tree_size,
            "leaf_hash": event_leaf_hash(self.seal).hex(),
            "root": self.root.hex(),
            "hashes": [hashed.hex() for hashed in self.hashes],
        }

    @classmethod
    def from_mapping(cls, document: object) -> InclusionProof:
        fields = _document(
            document,
            INCLUSION_PROOF_SCHEMA,
            ("event_id", "seal", "leaf_index", "tree_size", "leaf_hash", "root", "hashes"),
        )
        seal = fields["seal"]
        if not isinstance(seal, str) or not SEAL_TEXT.fullmatch(seal):
            raise LedgerError("PROOF_INVALID", "seal is not a stored seal (sha256: and 64 hex)")
        proof = cls(
            event_id=_count(fields, "event_id"),
            seal=seal,
            leaf_index=_count(fields, "leaf_index"),
            tree_size=_count(fields, "tree_size"),
            root=_hex(fields["root"], "root"),
            hashes=_hex_list(fields["hashes"]),
        )
        if _hex(fields["leaf_hash"], "leaf_hash") != event_leaf_hash(seal):
            raise LedgerError("PROOF_INVALID", "leaf_hash is not the hash of the seal's leaf")
        return proof

    def check(self, root: bytes) -> None:
        """Refuse (`PROOF_REJECTED`) unless the proof leads from the seal's leaf to `root`."""
        if root != self.root:
            raise LedgerError("PROOF_REJECTED", "the proof is for another root than the one given")
        leaf = event_leaf_hash(self.seal)
        if not verify_inclusion(self.leaf_index, self.tree_size, leaf, self.hashes, root):
            raise LedgerError(
                "PROOF_REJECTED",
                f"the path does not lead from leaf {self.leaf_index} to the root of a tree of "
                f"{self.tree_size}",
            )


@attrs.frozen
class ConsistencyProof:
    """A consistency proof between two tree heads (RFC 9162's `ConsistencyProofDataV2`)."""

    old_size: int
    new_size: int
    old_root: bytes
    new_root: bytes
    hashes: tuple[bytes, ...]

    def public(self) -> dict[str, Any]:
        return {
            "schema": CONSISTENCY_PROOF_SCHEMA,
            "old_size": self.old_size,
            "new_size": self.new_size,
            "old_root": self.old_root.hex(),
            "new_root": self.new_root.hex(),
            "hashes": [hashed.hex() for hashed in self.hashes],
        }

    @classmethod
    def from_mapping(cls, document: object) -> ConsistencyProof:
        fields = _document(
            document,
            CONSISTENCY_PROOF_SCHEMA,
            ("old_size", "new_size", "old_root", "new_root", "hashes"),
        )
        return cls(
            old_size=_count(fields, "old_size"),
            new_size=_count(fields, "new_size"),
            old_root=_hex(fields["old_root"], "old_root"),
            new_root=_hex(fields["new_root"], "new_root"),
            hashes=_hex_list(fields["hashes"]),
        )

    def check(self, new_root: bytes, old_root: bytes | None = None) -> None:
        """Refuse (`PROOF_REJECTED`) unless the proof shows trusted `new_root` extends the old tree
        (whose root must be `old_root` when the checker holds one)."""
        if new_root != self.new_root or (old_root is not None and old_root != self.old_root):
            raise LedgerError("PROOF_REJECTED", "the proof is for other roots than the ones given")
        if not verify_consistency(
            self.old_size, self.new_size, self.old_root, self.new_root, self.hashes
        ):
            raise LedgerError(
                "PROOF_REJECTED",
                f"the tree of {self.new_size} does not extend the tree of {self.old_size}",
            )


def parse_proof(document: object) -> InclusionProof | ConsistencyProof:
    """A proof document of either kind, by its `schema`."""
    schema = document.get("schema") if isinstance(document, Mapping) else None
    if schema == CONSISTENCY_PROOF_SCHEMA:
        return ConsistencyProof.from_mapping(document)
    if schema == INCLUSION_PROOF_SCHEMA:
        return InclusionProof.from_mapping(document)
    raise LedgerError(
        "PROOF_INVALID",
        f"not a proof: its schema is neither {INCLUSION_PROOF_SCHEMA} nor "
        f"{CONSISTENCY_PROOF_SCHEMA}",
    )


def parse_root(text: object, what: str = "root") -> bytes:
    """A root as given on a command line or in a query: 64 lower-case hex digits."""
    return _hex(text, what, code="ROOT_INVALID")


def _check_size(size: object, what: str) -> None:
    if type(size) is not int or size < 0:
        raise LedgerError("TREE_SIZE_INVALID", f"{what} must be a whole number, not {size!r}")


def _check_index(index: int, size: int) -> None:
    _check_size(size, "size")
    if type(index) is not int or not 0 <= index < size:
        raise LedgerError("TREE_SIZE_INVALID", f"leaf {index!r} is not in a tree of {size}")


def _all_hashes(hashes: Iterable[object]) -> bool:
    return all(isinstance(hashed, bytes) and len(hashed) == HASH_SIZE for hashed in hashes)


def _document(document: object, schema: str, names: tuple[str, ...]) -> dict[str, Any]:
    if not isinstance(document, Mapping):
        raise LedgerError("PROOF_INVALID", "a proof is a JSON object")
    expected = {"schema", *names}
    if set(document) != expected:
        missing = sorted(expected - set(document))
        extra = sorted(str(key) for key in set(document) - expected)
        raise LedgerError("PROOF_INVALID", f"fields missing {missing}, unknown {extra[:10]}")
    if document["schema"] != schema:
        raise LedgerError("PROOF_INVALID", f"schema is not {schema}")
    return dict(document)


def _count(fields: Mapping[str, Any], name: str) -> int:
    value = fields[name]
    if type(value) is not int or not 0 <= value < 2**63:
        raise LedgerError("PROOF_INVALID", f"{name} is not a whole number")
    return value


def _hex(text: object, what: str, *, code: str = "PROOF_INVALID") -> bytes:
    if not isinstance(text, str) or not _HEX_HASH.fullmatch(text):
        raise LedgerError(code, f"{what} is not 64 lower-case hex digits")
    return bytes.fromhex(text)


def _hex_list(value: object) -> tuple[bytes, ...]:
    if not isinstance(value, list) or len(value) > 128:
        raise LedgerError("PROOF_INVALID", "hashes is not a list of at most 128 hashes")
    return tuple(_hex(item, "a hash of the path") for item in value)
