"""Streaming the sealed log from the database into the core's verifier.

Memory does not grow with the log: rows come straight off apsw cursors (one read transaction, so
every row belongs to one snapshot), the verifier holds O(1) state, and each event's chain
predecessor is joined by SQL through the `(chain, chain_seq)` unique index.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import IO, Any

import apsw
from aios_ledger.core import (
    ChainLink,
    EventRecord,
    LedgerError,
    LedgerHead,
    LogVerifier,
    SealRecord,
    VerificationReport,
)
from aios_ledger.core.log.verification import head_of_rows
from aios_ledger.shell.db.connection import Database, Row, fetch_value
from aios_ledger.shell.db.statements import sql

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


VERIFY_COLUMNS = (
    "event_id",
    "task_id",
    "agent_id",
    "event_type",
    "payload_json",
    "created_at",
    "seal_event_id",
    "chain",
    "chain_seq",
    "prev_seal",
    "seal",
    "sealed_at_adoption",
    "pred_event_id",
    "pred_chain_seq",
    "pred_seal",
)
ORPHAN_COLUMNS = ("event_id", "chain", "chain_seq", "prev_seal", "seal", "sealed_at_adoption")
Item = tuple[int, EventRecord | None, SealRecord | None, ChainLink | None]


@contextmanager
def _tuples(
    conn: apsw.Connection, name: str, columns: tuple[str, ...]
) -> Iterator[Iterator[tuple[Any, ...]]]:
    """Stream a named statement's rows as tuples (the verifier's hot loop skips the dicts of
    `Database.cursor_rows`), after checking that its columns are the ones expected."""
    cursor = conn.cursor()
    try:
        cursor.execute(sql(name))
        try:
            found = tuple(column[0] for column in cursor.get_description())
        except apsw.ExecutionCompleteError:
            found = columns
        if found != columns:
            raise LedgerError("STATEMENT_INVALID", f"{name} returns {found}, expected {columns}")
        yield iter(cursor)
    finally:
        cursor.close()


def _orphan(row: tuple[Any, ...]) -> Item:
    event_id, chain, chain_seq, prev_seal, seal, adoption = row
    return (
        event_id,
        None,
        SealRecord(event_id, chain, chain_seq, prev_seal, seal, adoption == 1),
        None,
    )


def _merged(
    events: Iterator[tuple[Any, ...]], orphans: Iterator[tuple[Any, ...]]
) -> Iterator[Item]:
    """Events (with seal and predecessor) and orphaned seals, merged in event id order."""
    orphan = next(orphans, None)
    for row in events:
        event_id = row[0]
        while orphan is not None and orphan[0] < event_id:
            yield _orphan(orphan)
            orphan = next(orphans, None)
        (
            _,
            task_id,
            agent_id,
            event_type,
            payload_json,
            created_at,
            seal_event_id,
            chain,
            chain_seq,
            prev_seal,
            seal,
            adoption,
            pred_event_id,
            pred_chain_seq,
            pred_seal,
        ) = row
        yield (
            event_id,
            EventRecord(event_id, task_id, agent_id, event_type, payload_json, created_at),
            None
            if seal_event_id is None
            else SealRecord(event_id, chain, chain_seq, prev_seal, seal, adoption == 1),
            None if pred_event_id is None else ChainLink(pred_event_id, pred_chain_seq, pred_seal),
        )
    while orphan is not None:
        yield _orphan(orphan)
        orphan = next(orphans, None)


def verify_log(
    db: Database, *, head: LedgerHead | None = None, progress_stream: IO[str] | None = None
) -> VerificationReport:
    """Walk the whole log once and report every finding by event id."""

    def work(conn: apsw.Connection) -> VerificationReport:
        progress = Progress("verify", int(fetch_value(conn, "log_max_event_id")), progress_stream)
        verifier = LogVerifier(head=head)
        feed, step = verifier.feed, progress.step
        with (
            _tuples(conn, "log_verify_rows", VERIFY_COLUMNS) as events,
            _tuples(conn, "log_orphan_seals", ORPHAN_COLUMNS) as orphans,
        ):
            for event_id, event, seal, predecessor in _merged(events, orphans):
                feed(event_id, event, seal, predecessor)
                step()
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
