"""Reading the log's tail, which a decision that appends events seals them onto."""

from __future__ import annotations

from collections.abc import Iterable

from aios_ledger.core import ChainTip, LogTail
from aios_ledger.core.log.seals import empty_chain_tip
from aios_ledger.shell.db.run import Connection, fetch_records_together


def read_next_event_id(conn: Connection) -> int:
    """The id the next event gets, inside the caller's write transaction (drawn from
    PostgreSQL's sequence: see `PlanExecutor`), or as far as a read can tell (a preview)."""
    return conn.next_event_id()


def read_chain_tips(conn: Connection, chains: Iterable[str]) -> dict[str, ChainTip]:
    """The tip of each of `chains`: its last seal, or the empty tip of a chain with no event;
    read together (one round trip on PostgreSQL, however many chains)."""
    wanted = list(dict.fromkeys(chains))
    found = fetch_records_together(conn, [("chain_tip", {"chain": c}, ChainTip) for c in wanted])
    return {
        chain: empty_chain_tip(chain) if tip is None else tip
        for chain, tip in zip(wanted, found, strict=True)
    }


def read_log_tail(conn: Connection, chains: Iterable[str]) -> LogTail:
    """The tail at `chains`, inside the caller's write transaction."""
    return LogTail(read_next_event_id(conn), read_chain_tips(conn, dict.fromkeys(chains)))
