"""The Merkle log on the database: appending each plan's leaves, building the leaves of a log
older than the tree, and reading tree heads and proofs (the hashing is `core/log/merkle.py`'s).
Leaves are appended under the lock of the tree's head row, so on PostgreSQL leaf indexes follow
commit order even though event ids do not.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from aios_ledger.core import LedgerError
from aios_ledger.core.log.merkle import (
    ConsistencyProof,
    Frontier,
    InclusionProof,
    MerkleHashRow,
    MerkleTreeRow,
    NodeId,
    TreeHead,
    append_writes,
    consistency_proof,
    consistency_proof_nodes,
    inclusion_proof,
    inclusion_proof_nodes,
    root_nodes,
    tree_head,
)
from aios_ledger.core.log.tail import AppendedEvent
from aios_ledger.core.statements import SqlWrite
from aios_ledger.shell.db.connection import Database
from aios_ledger.shell.db.run import Connection, fetch_one, fetch_record, fetch_records_together

# Leaves built per plan when a log older than the tree gets its leaves.
BUILD_BATCH = 2000
# The head row, read under its lock.
TREE_FOR_UPDATE = "merkle_tree_for_update"


def leaf_writes(
    conn: Connection, events: Sequence[AppendedEvent], tree: MerkleTreeRow | None = None
) -> tuple[tuple[SqlWrite, ...], MerkleTreeRow | None]:
    """The writes appending the leaves of a plan's `events`, and the head row after them.
    `tree` is the head row this transaction's previous append left (already locked); None reads
    it under its lock, and first builds a tree that is not built yet."""
    if not events:
        return (), tree
    if tree is None:
        tree = _locked_tree(conn)
        if tree.size is None:
            build_tree(conn, tree)  # the events before these
            tree = _locked_tree(conn)
    return append_writes(tree, [(event.event.event_id, event.seal.seal) for event in events])


def _locked_tree(conn: Connection) -> MerkleTreeRow:
    """The head row under its lock."""
    tree = fetch_record(conn, TREE_FOR_UPDATE, None, MerkleTreeRow)
    if tree is None:
        # Tables emptied by hand (the migration inserts the row): a tree not built yet.
        conn.run_write("merkle_tree_insert_unbuilt", {"frontier": b""})
        tree = fetch_record(conn, TREE_FOR_UPDATE, None, MerkleTreeRow)
    if tree is None:
        raise LedgerError("DATABASE_CORRUPT", "the Merkle tree's head row is missing")
    return tree


def build_tree(conn: Connection, tree: MerkleTreeRow | None = None) -> int:
    """Give every sealed or archived event its leaf, in id order, when the tree is not built yet
    (a log from before it existed); how many leaves it built."""
    tree = _locked_tree(conn) if tree is None else tree
    if tree.size is not None:
        return 0
    grown = MerkleTreeRow(0, b"", tree.revision)
    batch: list[tuple[int, str]] = []
    built = 0
    for row in conn.fetch_all("merkle_sealed_in_id_order", None):
        batch.append((int(row["event_id"]), str(row["seal"])))
        if len(batch) == BUILD_BATCH:
            grown = _append_batch(conn, grown, batch)
            built += len(batch)
            batch = []
    _append_batch(conn, grown, batch)  # the last leaves, or the empty tree's size
    return built + len(batch)


def _append_batch(
    conn: Connection, tree: MerkleTreeRow, batch: Sequence[tuple[int, str]]
) -> MerkleTreeRow:
    writes, after = append_writes(tree, batch)
    conn.run_plan(writes, LedgerError)
    return after


def _tree(conn: Connection) -> Frontier:
    tree = fetch_record(conn, "merkle_tree", None, MerkleTreeRow)
    if tree is None:
        raise LedgerError("DATABASE_CORRUPT", "the Merkle tree's head row is missing")
    return tree.frontier_of()


def _read_nodes(conn: Connection, nodes: Iterable[NodeId]) -> dict[NodeId, bytes]:
    """The stored hashes of `nodes`, in one round trip where the engine has them."""
    wanted = sorted(set(nodes))
    reads: list[tuple[str, Any, type[Any]]] = [
        (
            "merkle_leaf_hash" if node.level == 0 else "merkle_node_hash",
            {"node_index": node.index}
            if node.level == 0
            else {"level": node.level, "node_index": node.index},
            MerkleHashRow,
        )
        for node in wanted
    ]
    found = fetch_records_together(conn, reads) if reads else []
    hashes = {}
    for node, row in zip(wanted, found, strict=True):
        if row is None:
            raise LedgerError("MERKLE_NODE_MISSING", f"the tree has no stored node {node}")
        hashes[node] = bytes(row.hash)
    return hashes


def _size_within(conn: Connection, size: int | None) -> tuple[int, Frontier]:
    current = _tree(conn)
    if size is None:
        return current.size, current
    if type(size) is not int or not 0 <= size <= current.size:
        raise LedgerError(
            "TREE_SIZE_INVALID", f"the tree has {current.size} leaves: no tree of {size!r}"
        )
    return size, current


def current_tree_head(db: Database) -> TreeHead:
    """The tree head of the ledger now; no writer need be waited for, since a committed head
    row always names a whole prefix of the leaves."""
    return db.read(tree_head_in)


def tree_head_in(conn: Connection) -> TreeHead:
    """`current_tree_head` inside the caller's transaction (a checkpoint signer's)."""
    return _tree(conn).head()


def tree_head_at(db: Database, size: int | None = None) -> TreeHead:
    """The head of the tree of the first `size` leaves (None: all of them)."""

    def work(conn: Connection) -> TreeHead:
        size_now, current = _size_within(conn, size)
        return _head(size_now, current, _read_nodes(conn, _root_nodes(size_now, current)))

    return db.read(work)


def prove_inclusion(db: Database, event_id: int, size: int | None = None) -> InclusionProof:
    """The inclusion proof of event `event_id` in the tree of `size` leaves (None: now)."""

    def work(conn: Connection) -> InclusionProof:
        tree_size, current = _size_within(conn, size)
        leaf = fetch_one(conn, "merkle_leaf_of_event", {"event_id": event_id})
        seal = fetch_one(conn, "merkle_event_seal", {"event_id": event_id})
        if leaf is None or seal is None:
            raise LedgerError("EVENT_NOT_FOUND", f"no event {event_id} has a leaf in the tree")
        index = int(leaf["leaf_index"])
        if index >= tree_size:
            raise LedgerError(
                "TREE_SIZE_INVALID",
                f"event {event_id} is leaf {index}, not in a tree of {tree_size}",
            )
        nodes = _read_nodes(
            conn, (*inclusion_proof_nodes(index, tree_size), *_root_nodes(tree_size, current))
        )
        head = _head(tree_size, current, nodes)
        path = inclusion_proof(index, tree_size, nodes)
        return InclusionProof(event_id, str(seal["seal"]), index, tree_size, head.root, path)

    return db.read(work)


def prove_consistency(db: Database, old: int, new: int | None = None) -> ConsistencyProof:
    """The consistency proof from the tree of `old` leaves to the tree of `new` (None: now)."""

    def work(conn: Connection) -> ConsistencyProof:
        new_size, current = _size_within(conn, new)
        if type(old) is not int or not 0 <= old <= new_size:
            raise LedgerError("TREE_SIZE_INVALID", f"the old size {old!r} is not within {new_size}")
        nodes = _read_nodes(
            conn,
            (
                *consistency_proof_nodes(old, new_size),
                *root_nodes(old),
                *_root_nodes(new_size, current),
            ),
        )
        path = consistency_proof(old, new_size, nodes)
        old_root = tree_head(old, nodes).root
        return ConsistencyProof(old, new_size, old_root, _head(new_size, current, nodes).root, path)

    return db.read(work)


def _root_nodes(size: int, current: Frontier) -> tuple[NodeId, ...]:
    """The nodes a head of `size` needs beyond the edge the head row holds."""
    return () if size == current.size else root_nodes(size)


def _head(size: int, current: Frontier, nodes: dict[NodeId, bytes]) -> TreeHead:
    return current.head() if size == current.size else tree_head(size, nodes)
