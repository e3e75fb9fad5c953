"""Reading the log's tail, which a decision that appends events seals them onto."""

from __future__ import annotations

from collections.abc import Iterable

from aios_ledger.core import ChainTip, LogTail
from aios_ledger.core.log.seals import empty_chain_tip
from aios_ledger.shell.db.run import Connection, fetch_records_together


def read_chain_tips(
    conn: Connection, chains: Iterable[str], *, appending: int = 0
) -> dict[str, ChainTip]:
    """The tip of each of `chains` (empty for a chain with no event), read in one round trip."""
    wanted = list(dict.fromkeys(chains))
    found = fetch_records_together(
        conn, [("chain_tip", {"chain": c}, ChainTip) for c in wanted], appending=appending
    )
    return {
        chain: empty_chain_tip(chain) if tip is None else tip
        for chain, tip in zip(wanted, found, strict=True)
    }


def read_log_tail(conn: Connection, chains: Iterable[str]) -> LogTail:
    """The tail at `chains`, inside the caller's transaction."""
    wanted = list(dict.fromkeys(chains))
    return LogTail(conn.first_event_id(wanted), read_chain_tips(conn, wanted))
