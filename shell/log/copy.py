"""`aios-ledger copy`: a whole ledger, SQLite or PostgreSQL, into an empty PostgreSQL ledger.

Every row of every table of the catalogue goes across as it is, inside one write transaction on
the target, read from one snapshot of the source; the target's event id counter is moved to the
source's, so an archived event's id is never handed out again. Nothing is re-sealed: the
target's `verify` checks the very seals the source made. The proposals' bundle files go first,
so that a proposal recorded but not yet written can still be written from the target.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import attrs
from aios_ledger.core import LedgerError
from aios_ledger.core.log import LedgerHead
from aios_ledger.core.sealed_tables import TABLES
from aios_ledger.shell.db.connection import Database, execute, fetch_all, fetch_value
from aios_ledger.shell.db.run import Connection, SchemaConnection
from aios_ledger.shell.git.proposals import bundle_path, store_bundle
from aios_ledger.shell.log.verification import ledger_head, verify_log

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

    def write(conn: SchemaConnection) -> dict[str, int]:
        if int(fetch_value(conn, "copy_target_rows")) != 0:
            raise LedgerError(
                "COPY_TARGET_NOT_EMPTY",
                "the target already holds rows: copy into an empty ledger",
            )
        return source.read(lambda read: _copy_rows(source, read, conn))

    counts = target.write_schema(write)
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
    proposals = source.read(lambda conn: fetch_all(conn, "all_task_proposals"))
    copied = 0
    for digest in sorted({str(row["bundle_sha256"]) for row in proposals}):
        try:
            data = bundle_path(source, digest).read_bytes()
        except OSError:
            continue
        store_bundle(target, data)
        copied += 1
    return copied


def _copy_rows(source: Database, read: Connection, conn: SchemaConnection) -> dict[str, int]:
    counts: dict[str, int] = {}
    # Every table of the catalogue, in its order (the one the target's foreign keys need): each
    # read whole in key order and written with its whole-row insert.
    for table in TABLES:
        counts[table.name] = 0
        with source.cursor_rows(f"all_{table.name}") as rows:
            for batch in _batches(rows):
                conn.run_many(table.insert_name, batch)
                counts[table.name] += len(batch)
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
