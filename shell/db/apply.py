"""Applying decisions' plans: the one executor of every write in the project."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TypeVar

from aios_ledger.core import ChainTip, LedgerError, LogTail, Replay, SqlWrite, WritePlan
from aios_ledger.core.log.merkle import MerkleTreeRow
from aios_ledger.core.log.seals import LEDGER_CHAIN, empty_chain_tip
from aios_ledger.shell.db.merkle import TREE_FOR_UPDATE, leaf_writes
from aios_ledger.shell.db.run import Connection
from aios_ledger.shell.db.tail import read_chain_tips

# Where the store numbers a plan's events after the decision (a row-locked write: PostgreSQL's),
# the tail's ids only order them within the transaction.
PROVISIONAL_EVENT_ID = 1

R = TypeVar("R")


def apply_decision(
    conn: Connection,
    decision: WritePlan[R] | Replay[R],
    *,
    error: type[LedgerError] = LedgerError,
    leaves: Sequence[SqlWrite] = (),
) -> R:
    """Execute a plan's statements in order inside the caller's write transaction (the
    engine's `run_plan`: SQLite one after the other, PostgreSQL in one pipeline); a guarded
    write that changes any other number of rows than one is a REVISION_CONFLICT (the caller's
    transaction then rolls back). A replay writes nothing. The answer is the decision's.
    `leaves`: the Merkle log's writes for the plan's events (`leaf_writes`), run after its own
    in the same call."""
    if isinstance(decision, Replay):
        return decision.response
    conn.run_plan([*decision.statements(), *leaves] if leaves else decision.statements(), error)
    return decision.response


class PlanExecutor:
    """The decisions of one write transaction: the log's tail each one reads, and their plans
    applied in order. After a plan, the next decision starts from the tail that plan left (the
    core's), so a batch reads each chain's tip once and never reads back what it wrote. Each
    decision is handed the tips of its own chains only: a batch of a hundred tasks must not
    copy a hundred tips into every plan.

    Each event is sealed at the engine's `seal_version`. On PostgreSQL (v3) its id comes from
    a sequence: under the exclusive ledger lock the tail's next id is drawn before the decision
    and the sequence set past the plan's events after it (`Connection.event_ids_used`); in a
    row-locked write (beside other writers) the plan is decided on provisional ids and
    numbered with ids drawn once it is known (`Connection.reserve_event_ids`,
    `WritePlan.numbered`), and it may extend only the chains of tasks it holds the rows of.
    Each plan draws its own ids once decided, never ids left over from an earlier plan of the
    batch: drawn after its rows were locked, they exceed every id of those chains committed
    before, so ids rise along each chain (an exporter and the offline check rely on it)."""

    def __init__(self, conn: Connection, *, error: type[LedgerError] = LedgerError) -> None:
        self.conn = conn
        self._error = error
        self._next_event_id: int | None = None
        self._tips: dict[str, ChainTip] = {}
        self._row_locked = conn.row_locked
        self._seal_version = conn.seal_version
        self._tree: MerkleTreeRow | None = None

    def tail(self, *chains: str) -> LogTail:
        if self._row_locked and LEDGER_CHAIN in chains:
            # Ledger-level events are serialized on their chain's tip by the exclusive lock.
            raise LedgerError("STORAGE_ERROR", "a row-locked write may not extend the ledger chain")
        if self._next_event_id is None:
            self._next_event_id = (
                PROVISIONAL_EVENT_ID if self._row_locked else self.conn.next_event_id()
            )
        missing = [chain for chain in chains if chain not in self._tips]
        if missing:
            self._tips.update(read_chain_tips(self.conn, missing))
        tips = {chain: self._tips[chain] for chain in chains}
        return LogTail(self._next_event_id, tips, self._seal_version)

    def expect_events(self, count: int) -> None:
        """The next plan will likely append `count` events: in a row-locked write their ids
        are drawn with the next reads (`Connection.draw_event_ids_ahead`), after the rows
        those lock; a plan that needs more draws them when decided, as before."""
        if self._row_locked:
            self.conn.draw_event_ids_ahead(count)
            if count and self._tree is None:
                # The Merkle tree's head row, locked last in the same flight (after the rows
                # the decision locks): its leaves need no round trip of their own either.
                self.conn.read_record_ahead(TREE_FOR_UPDATE, MerkleTreeRow)

    def know_tip(self, chain: str, tip: ChainTip | None) -> None:
        """The tip of `chain` as the caller read it with the rows it decides on (one round
        trip for all of them); None: the chain has no event yet."""
        if chain not in self._tips:
            self._tips[chain] = empty_chain_tip(chain) if tip is None else tip

    def apply(self, decision: WritePlan[R] | Replay[R]) -> R:
        if self._row_locked and isinstance(decision, WritePlan) and decision.events:
            decision = decision.numbered(self.conn.reserve_event_ids(len(decision.events)))
        leaves: Sequence[SqlWrite] = ()
        if isinstance(decision, WritePlan) and decision.events:
            # Their Merkle leaves, run with the plan: on PostgreSQL the tree's head row is
            # locked from here to COMMIT, after the decision's reads and row locks, so leaf
            # order is commit order (`shell/db/merkle.py`). The head row an append leaves is
            # the next plan's: a batch reads it once (its revision is compared-and-swapped on
            # every append all the same).
            leaves, self._tree = leaf_writes(self.conn, decision.events, self._tree)
        answer = apply_decision(self.conn, decision, error=self._error, leaves=leaves)
        if isinstance(decision, WritePlan) and decision.tail is not None:
            self._next_event_id = decision.tail.next_event_id
            self._tips.update(decision.tail.tips)
            self.conn.event_ids_used(self._next_event_id)
        return answer
