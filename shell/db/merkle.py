"""The Merkle log on the database: appending committed events as leaves, and reading tree heads
and proofs (the hashing is `core/log/merkle.py`'s). SQLite's one writer appends a plan's leaves in
the plan's own transaction (`leaf_writes`); on PostgreSQL writers commit ids out of order, so an
`Integrator` appends what committed, in passes, one at a time per ledger.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from typing import Any

import attrs
from aios_ledger.core import LedgerError, RetryLaterError, Timestamp
from aios_ledger.core.log.merkle import (
    SEAL_TEXT,
    ConsistencyProof,
    Frontier,
    InclusionProof,
    MerkleHashRow,
    MerkleTreeRow,
    NodeId,
    PendingLeaf,
    ScanFloor,
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

# Leaves appended per transaction: a pass's batch, or a step of building an older log's tree.
BUILD_BATCH = 2000
TREE_FOR_UPDATE = "merkle_tree_for_update"
PENDING = "merkle_events_to_integrate"
NOT_INTEGRATED = "EVENT_NOT_INTEGRATED"
# How long `prove_integrated` waits between tries for an event not integrated yet.
WAIT_PAUSE_SECONDS = 0.05


def leaf_writes(
    conn: Connection, events: Sequence[AppendedEvent], tree: MerkleTreeRow | None = None
) -> tuple[tuple[SqlWrite, ...], MerkleTreeRow | None]:
    """The writes appending the leaves of a plan's `events` in its own transaction, and the head
    row after them. `tree`: the head row this transaction's previous append left (None: read)."""
    if not events:
        return (), tree
    if tree is None:
        tree = _built_tree(conn)
    return append_writes(tree, [(event.event.event_id, event.seal.seal) for event in events])


def _locked_tree(conn: Connection) -> MerkleTreeRow:
    tree = fetch_record(conn, TREE_FOR_UPDATE, None, MerkleTreeRow)
    if tree is None:
        # Tables emptied by hand (the migration inserts the row): a tree not built yet.
        conn.run_write("merkle_tree_insert_unbuilt", {"frontier": b""})
        tree = fetch_record(conn, TREE_FOR_UPDATE, None, MerkleTreeRow)
    if tree is None:
        raise LedgerError("DATABASE_CORRUPT", "the Merkle tree's head row is missing")
    return tree


def _built_tree(conn: Connection) -> MerkleTreeRow:
    """The head row under its lock, once the leaves of the events before it are built."""
    tree = _locked_tree(conn)
    if tree.size is None:
        build_tree(conn, tree)
        tree = _locked_tree(conn)
    return tree


def build_tree(conn: Connection, tree: MerkleTreeRow | None = None) -> int:
    """Give every sealed or archived event its leaf when the tree is not built yet (a log from
    before it existed); how many leaves it built."""
    tree = _locked_tree(conn) if tree is None else tree
    return 0 if tree.size is not None else integrate_in(conn, tree)


def integrate_in(conn: Connection, tree: MerkleTreeRow | None = None) -> int:
    """Every committed event without a leaf appended (each one, to a tree not built yet), in
    the caller's exclusive write transaction (`upgrade`'s); how many leaves it appended.
    `tree`: the head row under its lock (None: read it)."""
    tree = _locked_tree(conn) if tree is None else tree
    unbuilt = tree.size is None
    if unbuilt:
        tree = MerkleTreeRow(0, b"", tree.revision)
    appended, after = 0, 0
    while True:
        batch = _pending(conn, after, BUILD_BATCH)
        if batch or unbuilt:  # an unbuilt tree's head row gets its size, 0 when empty
            tree = _append_batch(conn, tree, [(leaf.event_id, leaf.seal) for leaf in batch])
            unbuilt = False
        appended += len(batch)
        if len(batch) < BUILD_BATCH:
            return appended
        after = batch[-1].event_id


def _pending(conn: Connection, after: int, limit: int) -> list[PendingLeaf]:
    return [
        PendingLeaf(int(row["event_id"]), str(row["seal"]), row["created_at"])
        for row in conn.fetch_all(PENDING, {"after": after, "limit": limit})
    ]


@attrs.frozen
class IntegrationPass:
    """What one pass did: `floor`, below which every committed event has its leaf, and
    `lag_seconds`, how long the oldest event it appended had waited (None: none written)."""

    appended: int
    size: int
    floor: int
    lag_seconds: float | None
    more: bool  # a full batch: more events may be waiting

    def public(self) -> dict[str, Any]:
        return {
            "appended": self.appended,
            "tree_size": self.size,
            "settled_event_id": self.floor,
            "lag_seconds": self.lag_seconds,
            "more": self.more,
        }


class Integrator:
    """Appends committed events to the tree in passes, each one transaction under the
    integrators' lock, writers never waiting on it. The scan floor rises only as the ids below
    it settle (`ScanFloor`), so an event committed late with a lower id is still found."""

    def __init__(self, db: Database, *, batch: int = BUILD_BATCH) -> None:
        self.db = db
        self.batch = batch
        self._floor = ScanFloor()
        self.last: IntegrationPass | None = None
        self.last_at: float | None = None  # `time.monotonic()` at the end of the last pass
        # A server's background passes and its on-demand ones share one floor.
        self._turn = threading.Lock()

    @property
    def floor(self) -> int:
        return self._floor.floor

    def run_pass(self, now: Timestamp | None = None) -> IntegrationPass:
        """One pass; `now` (the shell's clock) measures the lag of what it appended."""
        with self._turn:
            return self._pass(now)

    def _pass(self, now: Timestamp | None) -> IntegrationPass:
        start = self._floor

        def work(conn: Connection) -> tuple[list[PendingLeaf], int, int, ScanFloor]:
            waiting = () if start.waiting is None else start.waiting[1]
            settled, floor = start.settle(conn.integration_bound(waiting))
            # Locked only to change it: an idle server's passes need not pay for a lock.
            tree = fetch_record(conn, "merkle_tree", None, MerkleTreeRow)
            if tree is None or tree.size is None:
                tree = _built_tree(conn)
            batch = _pending(conn, start.floor, self.batch)
            size = int(tree.size or 0)
            # A forged seal gets no leaf (nor stops those after it): `verify` reports it.
            leaves = [
                (leaf.event_id, leaf.seal) for leaf in batch if SEAL_TEXT.fullmatch(leaf.seal)
            ]
            if leaves:
                size = int(_append_batch(conn, _locked_tree(conn), leaves).size or 0)
            return batch, size, settled, floor

        batch, size, settled, floor = self.db.write(work, row_locked=True)
        self._floor = floor.after_pass(settled, [leaf.event_id for leaf in batch], self.batch)
        written = [Timestamp.parse(leaf.created_at) for leaf in batch if leaf.created_at]
        lag = None
        if now is not None and written:
            lag = max(0.0, (now.epoch_ms - min(written).epoch_ms) / 1000)
        appended = sum(1 for leaf in batch if SEAL_TEXT.fullmatch(leaf.seal))
        self.last = IntegrationPass(appended, size, self.floor, lag, len(batch) >= self.batch)
        self.last_at = time.monotonic()
        return self.last

    def status(self) -> dict[str, Any]:
        """The integration lag as the last pass measured it, for `/v1/status` and `/v1/ready`."""
        last, at = self.last, self.last_at
        return {
            "inline": False,
            "tree_size": None if last is None else last.size,
            "settled_event_id": self.floor,
            "lag_events": None if last is None else last.appended,
            "lag_seconds": None if last is None else last.lag_seconds,
            "more_waiting": None if last is None else last.more,
            "seconds_since_pass": None if at is None else round(time.monotonic() - at, 3),
        }

    def catch_up(self, now: Timestamp | None = None) -> IntegrationPass:
        """Passes until every event committed before the call is a leaf."""
        done = self.run_pass(now)
        appended = done.appended
        while done.more:
            done = self.run_pass(now)
            appended += done.appended
        self.last = attrs.evolve(done, appended=appended)
        return self.last


def integrate(db: Database, now: Timestamp | None = None) -> IntegrationPass | None:
    """Everything committed so far integrated by a one-off integrator (a command without a
    server); None where writes append their leaves themselves."""
    return None if db.integrates_inline else Integrator(db).catch_up(now)


def prove_integrated(
    db: Database,
    event_id: int,
    size: int | None = None,
    *,
    integrator: Integrator | None = None,
    wait_seconds: float = 0.0,
    pause: Callable[[float], None] = time.sleep,
) -> InclusionProof:
    """`prove_inclusion` once the event is integrated (a pass now where an integrator runs);
    with `wait_seconds`, an event not there yet is waited for that long."""
    deadline = time.monotonic() + wait_seconds
    integrator = integrator or (None if db.integrates_inline else Integrator(db))
    while True:
        try:
            return prove_inclusion(db, event_id, size)
        except LedgerError as refused:
            if refused.code not in (NOT_INTEGRATED, "EVENT_NOT_FOUND"):
                raise
            if refused.code == NOT_INTEGRATED and integrator is not None:
                integrator.run_pass()
                with contextlib.suppress(LedgerError):
                    return prove_inclusion(db, event_id, size)
            if time.monotonic() >= deadline:
                if refused.code == NOT_INTEGRATED and integrator is not None:
                    raise _not_integrated(event_id, integrator.last) from None
                raise
        pause(WAIT_PAUSE_SECONDS)


def _not_integrated(event_id: int, last: IntegrationPass | None) -> LedgerError:
    lag = ""
    if last is not None:
        waited = "" if last.lag_seconds is None else f", {last.lag_seconds:.3f} s behind"
        lag = f" (the last pass appended {last.appended} events{waited})"
    return RetryLaterError(
        NOT_INTEGRATED, f"event {event_id} is committed but not in the tree yet{lag}"
    )


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
        ("merkle_leaf_hash", {"node_index": node.index}, MerkleHashRow)
        if node.level == 0
        else ("merkle_node_hash", {"level": node.level, "node_index": node.index}, MerkleHashRow)
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
    """The tree head now (a committed head row always names a whole prefix of the leaves)."""
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
        if seal is None:
            raise LedgerError("EVENT_NOT_FOUND", f"the ledger has no event {event_id}")
        if leaf is None:
            raise _not_integrated(event_id, None)
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
