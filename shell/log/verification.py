"""Streaming the sealed log from the database into the core's verifier: rows come straight off
the engine's cursors in one read transaction, merged by event id, so memory does not grow with
the log. A second pass streams every state row joined to its last sealed row.
"""

from __future__ import annotations

import hashlib
import heapq
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import attrs
from aios_ledger.core import EventRow, SealRow
from aios_ledger.core.log import ChainLink, LedgerHead, LogVerifier, VerificationReport
from aios_ledger.core.log.archived import archive_removed, payload_of, removed_by_archives
from aios_ledger.core.log.chained import ChainedRowFold
from aios_ledger.core.log.merkle import MerkleTreeRow
from aios_ledger.core.log.merkle_check import MerkleCheck
from aios_ledger.core.log.records import SealedRow
from aios_ledger.core.log.rows import (
    TASKS,
    RowImage,
)
from aios_ledger.core.log.state import stored_row_state
from aios_ledger.core.log.verification import (
    ARCHIVE_MISMATCH,
    FORGED_EVENT,
    STATE_MISMATCH,
    Finding,
    LegacyCheck,
    bundle_finding,
    head_of_rows,
)
from aios_ledger.core.proofs import VerifierKey
from aios_ledger.core.proofs.checkpoints import CheckpointRow
from aios_ledger.core.proofs.held import CheckpointHold, StoredCosignature
from aios_ledger.core.records import record_columns
from aios_ledger.core.sealed_tables import SEALED_TABLES, STATE_TABLES
from aios_ledger.shell.db.connection import Database, fetch_value
from aios_ledger.shell.db.merkle import integrate
from aios_ledger.shell.db.run import Connection, Row, fetch_all
from aios_ledger.shell.git.proposals import bundle_path
from aios_ledger.shell.proofs.keys import check_ed25519

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


# What each walk's statement selects: the row records' columns (an event joined to its seal,
# renamed `seal_event_id`, and to its chain predecessor), checked on every walk.
_SEAL_COLUMNS = record_columns(SealRow)
VERIFY_COLUMNS = (
    *record_columns(EventRow),
    "seal_event_id",
    *_SEAL_COLUMNS[1:],
    "pred_event_id",
    "pred_chain_seq",
    "pred_seal",
)
SEALED_ROW_COLUMNS = record_columns(SealedRow)
ARCHIVED_COLUMNS = ("event_id", "archive_event_id", "chain", "seal")
Item = tuple[int, EventRow | None, SealRow | None, ChainLink | None]
# Each state table and the statement that reads its rows beside their last sealed row (rendered
# from the catalogue of tables, `core.sealed_tables`).
STATE_STATEMENTS = {table: f"state_rows_{table}" for table in STATE_TABLES}


def seal_row(event_id: int, columns: Sequence[Any]) -> SealRow:
    """A seal's row from its columns after `event_id`, as the log's reads select them."""
    chain, chain_seq, prev_seal, seal, adoption, version, changes, chained = columns
    return SealRow(
        event_id, chain, chain_seq, prev_seal, seal, adoption == 1, version, changes, chained
    )


def _merged(
    events: Iterator[tuple[Any, ...]], orphans: Iterator[tuple[Any, ...]]
) -> Iterator[Item]:
    """Events (with seal and predecessor, `VERIFY_COLUMNS`) and orphaned seals, merged in
    event id order."""

    def event_item(row: tuple[Any, ...]) -> Item:
        pred_event_id, pred_chain_seq, pred_seal = row[16:]
        return (
            row[0],
            EventRow(*row[:7]),
            None if row[7] is None else seal_row(row[0], row[8:16]),
            None if pred_event_id is None else ChainLink(pred_event_id, pred_chain_seq, pred_seal),
        )

    orphan_items = ((row[0], None, seal_row(row[0], row[1:]), None) for row in orphans)
    return heapq.merge(map(event_item, events), orphan_items, key=lambda item: item[0])


def verify_log(
    db: Database,
    *,
    head: LedgerHead | None = None,
    progress: ProgressHook | None = None,
    checkpoint_keys: Sequence[VerifierKey] = (),
    witness_keys: Sequence[VerifierKey] = (),
    legacy: LegacyCheck | None = None,
) -> VerificationReport:
    """Walk the whole log once and report every finding by event id; each stored checkpoint
    named for one of `checkpoint_keys` must verify under it, and each cosignature by one of
    `witness_keys` over its checkpoint (docs/checkpoints.md). `legacy`: how a 0.x ledger's
    older seals are checked (`upgrade`'s first verify; otherwise only v5 seals verify)."""
    db.quiesce_writers()
    settled = _integrated_through(db)
    return db.read(
        lambda conn: verify_in(
            conn,
            db,
            head=head,
            progress=progress,
            checkpoint_keys=checkpoint_keys,
            witness_keys=witness_keys,
            legacy=legacy,
            settled_event_id=settled,
        )
    )


def _integrated_through(db: Database) -> int | None:
    """The last id handed out once the writers at work have finished, after integrating every
    event committed so far: each event up to it must have its leaf, and one above it may be
    pending. None where writes append their leaves themselves (every event must have one)."""
    if db.integrates_inline:
        return None
    settled = int(db.read(lambda conn: fetch_value(conn, "copy_event_id_counter")))
    integrate(db)
    return settled


def verify_in(
    conn: Connection,
    db: Database,
    *,
    head: LedgerHead | None = None,
    progress: ProgressHook | None = None,
    checkpoint_keys: Sequence[VerifierKey] = (),
    witness_keys: Sequence[VerifierKey] = (),
    legacy: LegacyCheck | None = None,
    settled_event_id: int | None = None,
) -> VerificationReport:
    """`verify_log` inside the caller's transaction (`upgrade` verifies what it wrote before it
    commits). An event above `settled_event_id` without a leaf is pending, not a finding."""
    counter = ProgressCounter(progress, int(fetch_value(conn, "log_max_event_id")))
    verifier = LogVerifier(head=head, dense_ids=db.dense_event_ids, legacy=legacy)
    feed, step = verifier.feed, counter.step
    with (
        conn.stream_tuples("log_verify_rows", VERIFY_COLUMNS) as events,
        conn.stream_tuples("log_orphan_seals", _SEAL_COLUMNS) as orphans,
        conn.stream_tuples("all_event_seal_rows", SEALED_ROW_COLUMNS) as sealed,
        conn.stream_tuples("all_archived_events", ARCHIVED_COLUMNS) as archived,
    ):
        rows = SealedRowsById(sealed, verifier)
        listed = ArchivedById(archived, verifier)
        for event_id, event, seal, predecessor in _merged(events, orphans):
            listed.before(event_id)
            feed(event_id, event, seal, predecessor, rows.of(event_id))
            step()
        listed.before(None)
        rows.of(None)
    counter.close()
    _check_state(conn, db, verifier)
    _check_run_events(conn, verifier)
    _check_bundles(conn, db, verifier)
    held, pending = _check_merkle(conn, verifier, checkpoint_keys, witness_keys, settled_event_id)
    handed_out = fetch_value(conn, "log_id_counter")
    report = verifier.finish(id_counter=handed_out if isinstance(handed_out, int) else None)
    return attrs.evolve(
        report,
        checkpoints_checked=held.checked,
        checkpoint_signatures_checked=held.signatures_checked,
        cosignatures_checked=held.cosignatures_checked,
        leaves_pending=pending,
    )


class SealedRowsById:
    """The sealed rows stream, handed out by event id as the events go by; a sealed row whose
    event id has no seal (its event skipped or gone) is reported to `verifier` as forged."""

    def __init__(
        self, rows: Iterator[tuple[Any, ...]], verifier: LogVerifier | None = None
    ) -> None:
        self._rows = rows
        self._verifier = verifier
        self._next = next(rows, None)

    def of(self, event_id: int | None) -> tuple[RowImage, ...]:
        """The rows of `event_id`, past those before it (None: past every one left)."""
        found: list[RowImage] = []
        while self._next is not None and (event_id is None or self._next[0] <= event_id):
            row_event_id, _, table, key, digest = self._next
            if row_event_id == event_id:
                found.append(RowImage(table, key, digest))
            elif self._verifier is not None:
                detail = "a sealed row without its event: written outside the ledger"
                self._verifier.note(
                    Finding(FORGED_EVENT, row_event_id, detail, table=table, key=key)
                )
            self._next = next(self._rows, None)
        return tuple(found)


class ArchivedById:
    """The archived events stream, fed to the verifier between the events around their ids. An
    id listed as archived whose event is still there was listed behind the ledger's back."""

    def __init__(self, rows: Iterator[tuple[Any, ...]], verifier: LogVerifier) -> None:
        self._rows = rows
        self._verifier = verifier
        self._next = next(rows, None)

    def before(self, event_id: int | None) -> None:
        while self._next is not None and (event_id is None or self._next[0] <= event_id):
            listed_id, archive_event_id, chain, seal = self._next
            if listed_id == event_id:
                detail = "listed as archived, but the event is still there"
                self._verifier.note(Finding(ARCHIVE_MISMATCH, listed_id, detail))
            else:
                self._verifier.archived(listed_id, chain, seal, archive_event_id)
            self._next = next(self._rows, None)


def _check_state(conn: Connection, db: Database, verifier: LogVerifier) -> None:
    """Hold every state row against the last seal that wrote it, then report sealed rows that
    are gone. A task row's chained seals are folded (`ChainFolds`) beside the task rows."""
    history_before_rows = bool(fetch_value(conn, "log_has_seals_before_rows"))
    with db.cursor_rows("state_task_chain_seals") as chains:
        folds = ChainFolds(chains, verifier)
        for table, statement in STATE_STATEMENTS.items():
            with db.cursor_rows(statement) as rows:
                for row in rows:
                    sealed_event_id = row["sealed_event_id"]
                    sealed: tuple[int, str | None] | None = (
                        None
                        if sealed_event_id is None
                        else (int(sealed_event_id), str(row["sealed_row_digest"]))
                    )
                    if table == TASKS:
                        sealed = folds.last_sealed(str(row["task_id"]), sealed)
                    key, digest = stored_row_state(
                        SEALED_TABLES[table], row, None if sealed is None else sealed[1]
                    )
                    history = row["sealed_history"]
                    history = history_before_rows if history is None else bool(history)
                    verifier.check_row(table, key, digest, sealed, history=history)
            if table == TASKS:
                folds.last_sealed(None, None)
    listed = {str(row["chain"]) for row in fetch_all(conn, "archived_chains_listed")}
    payloads = [
        payload_of(row["payload_json"]) for row in fetch_all(conn, "archive_events_recorded")
    ]
    without_bindings, ledger_rows = removed_by_archives(payloads, listed)
    with db.cursor_rows("state_rows_gone") as gone:
        for row in gone:
            table, key, event_id = str(row["row_table"]), str(row["row_key"]), row["event_id"]
            if table == TASKS and key in folds.gone:
                continue  # reported by its fold
            if not archive_removed(table, key, event_id, without_bindings, ledger_rows):
                verifier.check_row_gone(table, key, event_id)


class ChainFolds:
    """The task chains, folded one at a time in task id order as the task
    rows go by: O(1) state, whatever the number of tasks. A fold of a chain whose task row is
    gone reports it, as `state_rows_gone` reports a row an image says was written."""

    def __init__(self, rows: Iterator[Row], verifier: LogVerifier) -> None:
        self._rows = rows
        self._next = next(rows, None)
        self._verifier = verifier
        self.gone: set[str] = set()  # the task rows whose chain's fold found them gone

    def _fold_through(self, task_id: str | None) -> Iterator[ChainedRowFold]:
        """Each chain before `task_id`'s (None: every one left), folded, then `task_id`'s own
        (the caller tells them apart by key)."""
        while self._next is not None:
            chain = str(self._next["chain"])
            key = chain.removeprefix("task:")
            if task_id is not None and key > task_id:
                return
            fold = ChainedRowFold(key)
            while (row := self._next) is not None and row["chain"] == chain:
                fold.add(row["event_id"], row["row_changes"], row["chained_row_digest"])
                self._next = next(self._rows, None)
            yield fold

    def last_sealed(
        self, task_id: str | None, sealed: tuple[int, str | None] | None
    ) -> tuple[int, str | None] | None:
        """The last seal of task `task_id`'s row: `sealed` (its last image), or the fold of
        its chain when a later chained seal wrote it (None: past every chain left). A chain passed
        whose task row is not there is reported gone."""
        found = None
        for fold in self._fold_through(task_id):
            if fold.key == task_id:
                found = fold
            elif fold.event_id is not None:
                self.gone.add(fold.key)
                self._verifier.check_row_gone(TASKS, fold.key, fold.event_id)
        return self._verifier.last_task_seal(found, sealed)


def _check_run_events(conn: Connection, verifier: LogVerifier) -> None:
    """A run's count is not sealed; each append bumps it, so it agrees with its events unless
    one was deleted or inserted by hand."""
    for row in fetch_all(conn, "runs_events_disagreeing"):
        detail = (
            f"the run counts {row['event_count']} events but holds {row['events']} "
            f"(the last numbered {row['last_seq']}): an event deleted or inserted behind the "
            "ledger's back"
        )
        verifier.note(Finding(STATE_MISMATCH, None, detail, table="run_events", key=row["run_id"]))
    for row in fetch_all(conn, "run_events_without_run"):
        detail = "events of a run that does not exist: inserted behind the ledger's back"
        verifier.note(Finding(STATE_MISMATCH, None, detail, table="run_events", key=row["run_id"]))


def _check_bundles(conn: Connection, db: Database, verifier: LogVerifier) -> None:
    """Hash each proposal's stored bundle file (once per digest) against its row's digest: the
    row is sealed, the file beside the ledger is not, and a governed write fetches from it."""
    hashed: dict[str, str | None] = {}
    for row in fetch_all(conn, "proposal_bundles"):
        recorded = str(row["bundle_sha256"])
        if recorded not in hashed:
            hashed[recorded] = _file_sha256(bundle_path(db, recorded))
        finding = bundle_finding(str(row["proposal_id"]), recorded, hashed[recorded])
        if finding is not None:
            verifier.note(finding)


MERKLE_LEAF_COLUMNS = ("leaf_index", "event_id", "leaf_hash", "nodes", "seal")


def _check_merkle(
    conn: Connection,
    verifier: LogVerifier,
    checkpoint_keys: Sequence[VerifierKey],
    witness_keys: Sequence[VerifierKey],
    settled_event_id: int | None,
) -> tuple[CheckpointHold, int]:
    """Hold the Merkle log to the seals (every leaf, stored subtree and the head row), and each
    stored checkpoint, with its cosignatures, to the tree of its size as the walk passes it; how
    many events above `settled_event_id` wait for their leaf."""
    tree = conn.fetch_record("merkle_tree", None, MerkleTreeRow)
    with (
        conn.stream_tuples("merkle_verify_leaves", MERKLE_LEAF_COLUMNS) as leaves,
        conn.stream_tuples("verify_checkpoints", CHECKPOINT_COLUMNS) as checkpoints,
        conn.stream_tuples("verify_checkpoint_cosignatures", COSIGNATURE_COLUMNS) as cosignatures,
    ):
        check = MerkleCheck()
        pending = 0
        held = CheckpointHold(
            (_checkpoint_row(row) for row in checkpoints),
            checkpoint_keys,
            check_ed25519,
            cosignatures=(StoredCosignature(*row) for row in cosignatures),
            witnesses=witness_keys,
        )
        held.reached(check.frontier)
        for leaf_index, event_id, leaf_hash, nodes, seal in leaves:
            check.leaf(int(leaf_index), int(event_id), bytes(leaf_hash), seal, bytes(nodes))
            if check.frontier.size == held.next_size:
                held.reached(check.frontier)
        if tree is not None and tree.size is not None:
            for row in fetch_all(conn, "merkle_events_without_leaf"):
                if settled_event_id is not None and int(row["event_id"]) > settled_event_id:
                    pending += 1
                else:
                    check.event_without_leaf(int(row["event_id"]))
        size = None if tree is None else tree.size
        frontier = b"" if tree is None else bytes(tree.frontier)
        for finding in check.finish(size, frontier):
            verifier.note(finding)
        for finding in held.finish(check.frontier.size):
            verifier.note(finding)
    return held, pending


CHECKPOINT_COLUMNS = record_columns(CheckpointRow)
COSIGNATURE_COLUMNS = record_columns(StoredCosignature)


def _checkpoint_row(row: tuple[Any, ...]) -> CheckpointRow:
    # PostgreSQL reads bytea as memoryview; the record holds bytes on both engines (and no
    # bytes at all for a value that is none, which then holds no root).
    checkpoint_id, origin, tree_size, root_hash, key_id, note, signed_at = row
    root = bytes(root_hash) if isinstance(root_hash, bytes | memoryview) else b""
    return CheckpointRow(checkpoint_id, origin, tree_size, root, key_id, note, signed_at)


def _file_sha256(path: Path) -> str | None:
    """The hex sha256 of a file, read in chunks; None when it cannot be read."""
    try:
        with path.open("rb") as stream:
            return hashlib.file_digest(stream, "sha256").hexdigest()
    except OSError:
        return None


def ledger_head(db: Database) -> LedgerHead:
    """The current head: count, last event id and rolling digest over every event's seal."""

    def work(conn: Connection) -> LedgerHead:
        with db.cursor_rows("log_head_rows") as rows:
            return head_of_rows((row["event_id"], row["seal"]) for row in rows)

    db.quiesce_writers()
    return db.read(work)
