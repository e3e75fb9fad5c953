"""Applying decisions' plans: the one executor of every write in the project."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TypeVar

from aios_ledger.core import ChainTip, LedgerError, LogTail, Replay, SqlWrite, WritePlan
from aios_ledger.core.log.merkle import MerkleTreeRow
from aios_ledger.core.log.seals import empty_chain_tip
from aios_ledger.shell.db.merkle import leaf_writes
from aios_ledger.shell.db.run import Connection
from aios_ledger.shell.db.tail import read_chain_tips

R = TypeVar("R")


def apply_decision(
    conn: Connection,
    decision: WritePlan[R] | Replay[R],
    *,
    error: type[LedgerError] = LedgerError,
    leaves: Sequence[SqlWrite] = (),
) -> R:
    """Execute a plan's statements (and `leaves`, its events' Merkle writes) in the caller's
    write transaction; a replay writes nothing. The answer is the decision's."""
    if isinstance(decision, Replay):
        return decision.response
    conn.run_plan([*decision.statements(), *leaves] if leaves else decision.statements(), error)
    return decision.response


class PlanExecutor:
    """The decisions of one write transaction: the next starts from the tail the last plan left,
    so a batch reads each chain's tip once and never reads back what it wrote. Each decision gets
    the tips of its own chains only (a batch of a hundred tasks must not copy them all into every
    plan), and its plan is renumbered with the ids the engine gives its events."""

    def __init__(self, conn: Connection, *, error: type[LedgerError] = LedgerError) -> None:
        self.conn = conn
        self._error = error
        self._next_event_id: int | None = None
        self._chain_tips: dict[str, ChainTip] = {}
        self._tree: MerkleTreeRow | None = None

    def tail(self, *chains: str, appending: int = 0) -> LogTail:
        """The tail at `chains`; the chain tips not known yet are read together."""
        if self._next_event_id is None:
            self._next_event_id = self.conn.first_event_id(chains)
        missing = [chain for chain in chains if chain not in self._chain_tips]
        if missing:
            self._chain_tips.update(read_chain_tips(self.conn, missing, appending=appending))
        tips = {chain: self._chain_tips[chain] for chain in chains}
        return LogTail(self._next_event_id, tips)

    def know_tip(self, chain: str, tip: ChainTip | None) -> None:
        """The tip of `chain` as the caller read it with its rows (None: no event yet)."""
        if chain not in self._chain_tips:
            self._chain_tips[chain] = empty_chain_tip(chain) if tip is None else tip

    def apply(self, decision: WritePlan[R] | Replay[R]) -> R:
        leaves: Sequence[SqlWrite] = ()
        if isinstance(decision, WritePlan) and decision.tail is not None:
            decision, leaves = self._appended(decision)
        answer = apply_decision(self.conn, decision, error=self._error, leaves=leaves)
        if isinstance(decision, WritePlan) and decision.tail is not None:
            self._next_event_id = decision.tail.next_event_id
            self._chain_tips.update(decision.tail.tips)
        return answer

    def _appended(self, plan: WritePlan[R]) -> tuple[WritePlan[R], Sequence[SqlWrite]]:
        """The plan with its events at the ids the engine gives them, and their Merkle leaves'
        writes (inline engines only); the head row an append leaves is the next plan's."""
        assert plan.tail is not None
        first = plan.events[0].event.event_id if plan.events else plan.tail.next_event_id
        ids = self.conn.number_events(first, len(plan.events))
        if ids != [event.event.event_id for event in plan.events]:
            plan = plan.numbered(ids)
        if not plan.events or not self.conn.integrates_inline:
            return plan, ()
        leaves, self._tree = leaf_writes(self.conn, plan.events, self._tree)
        return plan, leaves
