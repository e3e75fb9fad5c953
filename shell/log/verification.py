"""Streaming the sealed log from the database into the core's verifier.

Memory does not grow with the log: rows come straight off apsw cursors (one read transaction, so
every row belongs to one snapshot), the verifier holds O(1) state, and each event's chain
predecessor is joined by SQL through the `(chain, chain_seq)` unique index.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import apsw
from aios_ledger.core import (
    ChainLink,
    EventRow,
    LedgerError,
    LedgerHead,
    LogVerifier,
    SealRow,
    VerificationReport,
)
from aios_ledger.core.log.verification import head_of_rows
from aios_ledger.shell.db.connection import Database, fetch_value
from aios_ledger.shell.db.statements import sql

PROGRESS_EVERY = 16384


# `(done, total)`: told every PROGRESS_EVERY events and at the end (the CLI draws a bar with it).
ProgressHook = Callable[[int, int], None]


class ProgressCounter:
    """Counts the events of a walk for an optional progress hook."""

    def __init__(self, hook: ProgressHook | None, total: int) -> None:
        self._hook = hook
        self._total = total
        self._done = 0

    def step(self) -> None:
        self._done += 1
        if self._hook is not None and self._done % PROGRESS_EVERY == 0:
            self._hook(self._done, self._total)

    def close(self) -> None:
        if self._hook is not None:
            self._hook(self._done, self._total)


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
Item = tuple[int, EventRow | None, SealRow | None, ChainLink | None]


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
        SealRow(event_id, chain, chain_seq, prev_seal, seal, adoption == 1),
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
            EventRow(event_id, task_id, agent_id, event_type, payload_json, created_at),
            None
            if seal_event_id is None
            else SealRow(event_id, chain, chain_seq, prev_seal, seal, adoption == 1),
            None if pred_event_id is None else ChainLink(pred_event_id, pred_chain_seq, pred_seal),
        )
    while orphan is not None:
        yield _orphan(orphan)
        orphan = next(orphans, None)


def verify_log(
    db: Database, *, head: LedgerHead | None = None, progress: ProgressHook | None = None
) -> VerificationReport:
    """Walk the whole log once and report every finding by event id."""

    def work(conn: apsw.Connection) -> VerificationReport:
        counter = ProgressCounter(progress, int(fetch_value(conn, "log_max_event_id")))
        verifier = LogVerifier(head=head)
        feed, step = verifier.feed, counter.step
        with (
            _tuples(conn, "log_verify_rows", VERIFY_COLUMNS) as events,
            _tuples(conn, "log_orphan_seals", ORPHAN_COLUMNS) as orphans,
        ):
            for event_id, event, seal, predecessor in _merged(events, orphans):
                feed(event_id, event, seal, predecessor)
                step()
        counter.close()
        handed_out = fetch_value(conn, "log_id_counter")
        return verifier.finish(id_counter=handed_out if isinstance(handed_out, int) else None)

    return db.read(work)


def ledger_head(db: Database) -> LedgerHead:
    """The current head: count, last event id and rolling digest over every event's seal."""

    def work(conn: apsw.Connection) -> LedgerHead:
        with db.cursor_rows("log_head_rows") as rows:
            return head_of_rows((row["event_id"], row["seal"]) for row in rows)

    return db.read(work)
