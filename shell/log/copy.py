"""`aios-ledger copy`: a whole ledger into an empty PostgreSQL ledger, row by row as it is, in one
transaction from one snapshot. Nothing is re-sealed, so the target's `verify` checks the very
seals the source made.
"""

from __future__ import annotations

import itertools
from typing import Any

import attrs
from aios_ledger.core import LedgerError
from aios_ledger.core.log import LedgerHead
from aios_ledger.core.sealed_tables import TABLES
from aios_ledger.shell.db.connection import Database, execute, fetch_all, fetch_value
from aios_ledger.shell.db.merkle import integrate
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
    """Copy `source` into an empty `target`, then verify it and compare the heads."""
    if not target.takes_copies:
        raise LedgerError("COPY_TARGET_INVALID", "the target of a copy is a PostgreSQL URL")
    integrate(source)  # a PostgreSQL source's tree then holds every event the copy carries
    source_head = ledger_head(source)
    bundles = _copy_bundles(source, target)

    def write(conn: SchemaConnection) -> dict[str, int]:
        if int(fetch_value(conn, "copy_target_rows")) != 0:
            raise LedgerError(
                "COPY_TARGET_NOT_EMPTY", "the target already holds rows: copy into an empty ledger"
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
    """The source's proposal bundles into the target's folder, before the rows; a missing one is
    left missing, as writing its proposal fails on either ledger alike."""
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
    # The catalogue's order is the one the target's foreign keys need.
    for table in TABLES:
        counts[table.name] = 0
        with source.cursor_rows(f"all_{table.name}") as rows:
            while batch := list(itertools.islice(rows, BATCH)):
                conn.run_many(table.insert_name, batch)
                counts[table.name] += len(batch)
    last = fetch_value(read, "copy_event_id_counter")
    execute(conn, "copy_set_event_id_counter", {"last_event_id": int(last or 0)})
    return counts
