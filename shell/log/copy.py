"""`aios-ledger copy`: a whole ledger, SQLite or PostgreSQL, into an empty PostgreSQL ledger (an
engine's Database that `takes_copies`: its dialect has the `copy_insert_*` texts).

Every row of every table goes across as it is (tasks, events with their seals and sealed rows,
archived events, first answers, projections, bindings, runs and their events (with the list
of those appended before appends were sealed), auxiliary runs, API tokens, governed
repositories and their settings changes, proposals and the charges of refused scans, writer
leases and governed writes, the Merkle log's leaves, subtrees and head row)
inside ONE write transaction on the target, read from ONE snapshot of the source; the target's
event id counter is moved to the source's, so an archived event's id is never handed out again.
Nothing is re-sealed: the target's `verify` checks the very seals the source made, and its head
is the source's. The proposals' bundles (files, content-addressed) are copied into the target's
bundle folder first (`shell/git/proposals.py`: `proposals_dir`), so that a proposal recorded but
not yet written can still be written from the target.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import attrs
from aios_ledger.core import LedgerError
from aios_ledger.core.log import LedgerHead
from aios_ledger.shell.db.connection import Database, execute, fetch_all, fetch_value
from aios_ledger.shell.db.run import Connection
from aios_ledger.shell.git.proposals import bundle_path, store_bundle
from aios_ledger.shell.log.verification import ledger_head, verify_log

# In the order the target's foreign keys need; a table a later migration adds joins here (with
# its `copy_rows_*` read in both dialects and its `copy_insert_*` in PostgreSQL's).
TABLES = (
    "tasks",
    "events",
    "event_seals",
    "event_seal_rows",
    "archived_events",
    "task_idempotency",
    "task_initial_execution_projections",
    "task_source_capture_projection_recoveries",
    "governed_bindings",
    "runs",
    "run_events",
    "run_events_before_seals",
    "auxiliary_runs",
    "api_tokens",
    "governed_repositories",
    "repository_settings_changes",
    "task_proposals",
    "agent_scan_charges",
    "writer_leases",
    "governed_writes",
    "commit_attestations",
    "task_spend",
    # The Merkle log leaf for leaf, so that the target's tree heads and proofs are the source's.
    "merkle_leaves",
    "merkle_tree",
)
BATCH = 1000


@attrs.frozen
class CopyReport:
    rows: dict[str, int]
    source_head: LedgerHead
    target_head: LedgerHead
    target_intact: bool
    bundles: int = 0

    def public(self) -> dict[str, Any]:
        return {
            "rows": dict(self.rows),
            "bundles": self.bundles,
            "source_head": self.source_head.public(),
            "target_head": self.target_head.public(),
            "heads_equal": self.source_head == self.target_head,
            "target_intact": self.target_intact,
        }


def copy_ledger(source: Database, target: Database) -> CopyReport:
    """Copy `source` into `target`, an empty PostgreSQL ledger, in one transaction; then verify
    the target and compare its head with the source's."""
    if not target.takes_copies:
        raise LedgerError("COPY_TARGET_INVALID", "the target of a copy is a PostgreSQL URL")
    source_head = ledger_head(source)
    bundles = _copy_bundles(source, target)

    def write(conn: Connection) -> dict[str, int]:
        if int(fetch_value(conn, "copy_target_rows")) != 0:
            raise LedgerError(
                "COPY_TARGET_NOT_EMPTY",
                "the target already holds rows: copy into an empty ledger",
            )
        return source.read(lambda read: _copy_rows(source, read, conn))

    counts = target.write(write)
    report = verify_log(target)
    return CopyReport(
        rows=counts,
        source_head=source_head,
        target_head=ledger_head(target),
        target_intact=report.intact,
        bundles=bundles,
    )


def _copy_bundles(source: Database, target: Database) -> int:
    """The bundles of the source's proposals that its folder holds, into the target's folder
    (before the rows: a proposal the target holds finds its bundle there). A missing one is left
    missing: writing its proposal is `BUNDLE_INVALID` on either ledger alike."""
    proposals = source.read(lambda conn: fetch_all(conn, "copy_rows_task_proposals"))
    copied = 0
    for digest in sorted({str(row["bundle_sha256"]) for row in proposals}):
        try:
            data = bundle_path(source, digest).read_bytes()
        except OSError:
            continue
        store_bundle(target, data)
        copied += 1
    return copied


def _copy_rows(source: Database, read: Connection, conn: Connection) -> dict[str, int]:
    counts: dict[str, int] = {}
    for table in TABLES:
        counts[table] = 0
        with source.cursor_rows(f"copy_rows_{table}") as rows:
            for batch in _batches(rows):
                conn.run_many(f"copy_insert_{table}", batch)
                counts[table] += len(batch)
    last = fetch_value(read, "copy_event_id_counter")
    execute(conn, "copy_set_event_id_counter", {"last_event_id": int(last or 0)})
    return counts


def _batches(rows: Iterator[dict[str, Any]]) -> Iterator[list[dict[str, Any]]]:
    batch: list[dict[str, Any]] = []
    for row in rows:
        batch.append(row)
        if len(batch) == BATCH:
            yield batch
            batch = []
    if batch:
        yield batch
