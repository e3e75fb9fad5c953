"""Streaming the sealed log from the database into the core's verifier.

Memory does not grow with the log: rows come straight off apsw cursors (one read transaction, so
every row belongs to one snapshot), the verifier holds O(1) state, and each event's chain
predecessor is joined by SQL through the `(chain, chain_seq)` unique index.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from typing import IO, Any

import apsw
from aios_ledger.core import (
    ChainLink,
    EventRecord,
    LedgerHead,
    LogVerifier,
    SealRecord,
    VerificationReport,
    head_of_rows,
)

from .database import Database, Row, fetch_value

PROGRESS_EVERY = 16384


class Progress:
    """A one-line progress bar on stderr, drawn only when stderr is a terminal."""

    def __init__(self, label: str, total: int, stream: IO[str] | None = None) -> None:
        self._stream = sys.stderr if stream is None else stream
        self._label = label
        self._total = max(total, 1)
        self._done = 0
        self.enabled = _is_terminal(self._stream)

    def step(self) -> None:
        self._done += 1
        if self.enabled and self._done % PROGRESS_EVERY == 0:
            self._draw()

    def close(self) -> None:
        if self.enabled:
            self._draw()
            self._stream.write("\n")
            self._stream.flush()

    def _draw(self) -> None:
        fraction = min(self._done / self._total, 1.0)
        filled = int(fraction * 30)
        bar = "#" * filled + "-" * (30 - filled)
        self._stream.write(f"\r{self._label} [{bar}] {self._done}/{self._total} events")
        self._stream.flush()


def _is_terminal(stream: IO[str]) -> bool:
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError):
        return False


def seal_of_row(row: Row) -> SealRecord | None:
    if row["seal_event_id"] is None:
        return None
    return SealRecord(
        event_id=row["event_id"],
        chain=row["chain"],
        chain_seq=row["chain_seq"],
        prev_seal=row["prev_seal"],
        seal=row["seal"],
        sealed_at_adoption=row["sealed_at_adoption"] == 1,
    )


def _predecessor(row: Row) -> ChainLink | None:
    if row["pred_event_id"] is None:
        return None
    return ChainLink(
        event_id=row["pred_event_id"], chain_seq=row["pred_chain_seq"], seal=row["pred_seal"]
    )


def _merged(
    events: Iterator[Row], orphans: Iterator[Row]
) -> Iterator[tuple[int, EventRecord | None, SealRecord | None, ChainLink | None]]:
    """Events (with seal and predecessor) and orphaned seals, merged in event id order."""
    orphan = next(orphans, None)
    for row in events:
        event_id = row["event_id"]
        while orphan is not None and orphan["event_id"] < event_id:
            yield orphan["event_id"], None, SealRecord.from_row(orphan), None
            orphan = next(orphans, None)
        yield event_id, EventRecord.from_row(row), seal_of_row(row), _predecessor(row)
    while orphan is not None:
        yield orphan["event_id"], None, SealRecord.from_row(orphan), None
        orphan = next(orphans, None)


def verify_log(
    db: Database, *, head: LedgerHead | None = None, progress_stream: IO[str] | None = None
) -> VerificationReport:
    """Walk the whole log once and report every finding by event id."""

    def work(conn: apsw.Connection) -> VerificationReport:
        progress = Progress("verify", int(fetch_value(conn, "log_max_event_id")), progress_stream)
        verifier = LogVerifier(head=head)
        with (
            db.cursor_rows("log_verify_rows") as events,
            db.cursor_rows("log_orphan_seals") as orphans,
        ):
            for event_id, event, seal, predecessor in _merged(events, orphans):
                verifier.feed(event_id, event, seal, predecessor)
                progress.step()
        counter = fetch_value(conn, "log_id_counter")
        progress.close()
        return verifier.finish(id_counter=counter if isinstance(counter, int) else None)

    return db.read(work)


def ledger_head(db: Database) -> LedgerHead:
    """The current head: count, last event id and rolling digest over every event's seal."""

    def work(conn: apsw.Connection) -> LedgerHead:
        with db.cursor_rows("log_head_rows") as rows:
            return head_of_rows((row["event_id"], row["seal"]) for row in rows)

    return db.read(work)


def report_view(report: VerificationReport) -> dict[str, Any]:
    return report.public()
