"""Reading the log's tail, which a decision that appends events seals them onto."""

from __future__ import annotations

from collections.abc import Iterable

import apsw
from aios_ledger.core import ChainTip, LogTail
from aios_ledger.shell.db.run import fetch_record, fetch_value


def read_log_tail(
    conn: apsw.Connection, chains: Iterable[str], known: LogTail | None = None
) -> LogTail:
    """The tail at `chains`, inside the caller's write transaction: what `known` (the tail a
    plan of this transaction left) holds already, and the rest read."""
    wanted = list(chains)
    if known is None:
        next_event_id = int(fetch_value(conn, "log_next_event_id"))
        return LogTail.read(next_event_id, wanted, _tips(conn, wanted))
    missing = known.missing(wanted)
    return known.with_chains(missing, _tips(conn, missing)) if missing else known


def _tips(conn: apsw.Connection, chains: Iterable[str]) -> list[ChainTip]:
    """The tip rows of those of `chains` that hold events."""
    found = []
    for chain in chains:
        tip = fetch_record(conn, "chain_tip", {"chain": chain}, ChainTip)
        if tip is not None:
            found.append(tip)
    return found
