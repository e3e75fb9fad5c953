"""`aios-ledger upgrade`: a ledger of the last 0.x release made a 1.0 ledger in place.

Only a ledger that verifies, and whose tasks no archive holds (its records name 0.x seals), is
upgraded: in one transaction every event is sealed again as v5, the Merkle tree is built again
over the new seals behind a `LEDGER_UPGRADED` event recording the old tree and its checkpoints,
and the ledger is verified again before that transaction commits.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from aios_ledger.core import EventRow, SealRow
from aios_ledger.core.errors import LedgerError
from aios_ledger.core.jsonvalue import JsonObject
from aios_ledger.core.log import LEDGER_CHAIN, VerificationReport
from aios_ledger.core.log.legacy_seals import legacy_seal_verifies
from aios_ledger.core.log.merkle import MerkleTreeRow
from aios_ledger.core.log.rows import RowImage
from aios_ledger.core.log.upgrade import decide_upgraded, resealed
from aios_ledger.core.migrations import plan_upgrade
from aios_ledger.core.records import record_columns
from aios_ledger.shell.actors import current_actor
from aios_ledger.shell.clock import Clock, read_clock, system_clock
from aios_ledger.shell.db.apply import PlanExecutor
from aios_ledger.shell.db.connection import Database
from aios_ledger.shell.db.engines import SchemaConnection
from aios_ledger.shell.db.merkle import build_tree, integrate_in
from aios_ledger.shell.db.migrator import known_migrations, read_catalogue
from aios_ledger.shell.db.run import Connection, execute, fetch_all, fetch_record, fetch_value
from aios_ledger.shell.db.statements import statement_texts
from aios_ledger.shell.log.verification import (
    SEALED_ROW_COLUMNS,
    SealedRowsById,
    seal_row,
    verify_in,
    verify_log,
)

_EVENT_COLUMNS = record_columns(EventRow)
_SEAL_COLUMNS = record_columns(SealRow)
_LOG_COLUMNS = (*_EVENT_COLUMNS, "seal_event_id", *_SEAL_COLUMNS[1:])
# The columns of a seal that sealing again as v5 writes.
RESEALED = ("event_id", "prev_seal", "seal", "seal_version", "row_changes", "chained_row_digest")


def _first_findings(report: VerificationReport) -> str:
    return "; ".join(
        f"{f.code} at event {f.event_id}" if f.event_id is not None else f"{f.code}: {f.detail}"
        for f in report.findings[:3]
    )


def upgrade_ledger(db: Database, *, clock: Clock = system_clock) -> dict[str, Any]:
    """Upgrade the ledger `db` opened as found; on a 1.0 ledger, say so and change nothing."""
    view = db.read(read_catalogue)
    known = known_migrations(db.read(lambda conn: conn.dialect))
    current = {"database": db.path, "upgraded": False, "detail": "already a 1.0 ledger"}
    if not plan_upgrade(known, view):
        return current
    archived = int(db.read(lambda conn: fetch_value(conn, "upgrade_archived_events")))
    if archived:
        raise LedgerError(
            "UPGRADE_REFUSED_ARCHIVED",
            f"the 0.x ledger's archives hold {archived} events, whose records name their 0.x "
            "seals: restore the archived tasks with the 0.x release's `aios-ledger restore` "
            "first, then upgrade; nothing was changed",
        )
    before = verify_log(db, legacy=legacy_seal_verifies)
    if not before.intact:
        raise LedgerError(
            "UPGRADE_REFUSED_NOT_INTACT",
            f"the 0.x ledger does not verify ({len(before.findings)} findings: "
            f"{_first_findings(before)}): `aios-ledger verify` lists them; nothing was changed",
        )
    actor = current_actor()

    def rewrite(conn: SchemaConnection) -> VerificationReport | None:
        # Planned again under the write lock: another process may have upgraded it since.
        if not plan_upgrade(known, read_catalogue(conn)):
            return None
        tree = fetch_record(conn, "merkle_tree", None, MerkleTreeRow)
        if tree is None or tree.size is None:
            raise LedgerError("DATABASE_CORRUPT", "the 0.x ledger's Merkle tree is not built")
        old = tree.frontier_of().head()
        signed = _signed_checkpoints(conn)
        new_seals = list(resealed(_sealed_log(conn)))
        texts = statement_texts(conn.dialect)
        conn.run_script(texts["upgrade_open_log"])
        for seal in new_seals:
            execute(conn, "upgrade_reseal", {name: getattr(seal, name) for name in RESEALED})
        conn.run_script(texts["upgrade_close_log"])
        build_tree(conn)
        plans = PlanExecutor(conn)
        tail = plans.tail(LEDGER_CHAIN)
        plans.apply(
            decide_upgraded(tail, old.size, old.root, signed, now=read_clock(clock), actor=actor)
        )
        integrate_in(conn)  # the upgrade's own event, where writes leave it to an integrator
        execute(conn, "forget_migrations")
        for migration in known:
            execute(conn, "record_migration", {"version": migration.version})
        after = verify_in(conn, db)
        if not after.intact:
            raise LedgerError(
                "UPGRADE_FAILED",
                f"the upgraded ledger does not verify ({_first_findings(after)}); "
                "the transaction was rolled back, nothing was changed",
            )
        return after

    after = db.write_schema(rewrite)
    if after is None:
        return current
    return {
        "database": db.path,
        "upgraded": True,
        "from": f"0.x at {max(view.applied)}",
        "to": [migration.version for migration in known],
        "events": after.events,
        "intact": after.intact,
    }


def _sealed_log(conn: Connection) -> Iterator[tuple[EventRow, SealRow, tuple[RowImage, ...]]]:
    """Each event with its seal and the rows it covers, in event id order (the log verified
    intact: every event has its seal)."""
    with (
        conn.stream_tuples("log_export_all", _LOG_COLUMNS) as events,
        conn.stream_tuples("all_event_seal_rows", SEALED_ROW_COLUMNS) as sealed,
    ):
        rows = SealedRowsById(sealed)
        width = len(_EVENT_COLUMNS)
        for row in events:
            event = EventRow(*row[:width])
            yield event, seal_row(event.event_id, row[width + 1 :]), rows.of(event.event_id)


def _signed_checkpoints(conn: Connection) -> list[JsonObject]:
    """The checkpoints signed of the 0.x tree, each with its note and its cosignatures (their
    lines and times) as they were stored, in the order they were signed."""
    cosignatures: dict[int, list[JsonObject]] = {}
    for row in fetch_all(conn, "verify_checkpoint_cosignatures"):
        cosignatures.setdefault(int(row["checkpoint_id"]), []).append(
            {
                "witness_name": str(row["witness_name"]),
                "witness_key_id": str(row["witness_key_id"]),
                "cosigned_at": int(row["cosigned_at"]),
                "line": str(row["line"]),
            }
        )
    return [
        {
            "tree_size": int(row["tree_size"]),
            "note": str(row["note"]),
            "cosignatures": list(cosignatures.get(int(row["checkpoint_id"]), [])),
        }
        for row in sorted(
            fetch_all(conn, "verify_checkpoints"), key=lambda row: int(row["checkpoint_id"])
        )
    ]
