"""`aios-ledger upgrade`: a ledger of the last 0.x release made a 1.0 ledger in place.

Its schema already is the 1.0 baseline's but for the seal versions `event_seals` allows; what
changes is that and its recorded migration history. The ledger is verified as it stands (a
ledger that does not verify is refused, unchanged), then in one transaction `event_seals` takes
the baseline's checks and the baseline is recorded as applied, and it is verified again before
that transaction commits. Its events keep their seals, which 1.0 verifies as they are; its next
events are sealed v5.
"""

from __future__ import annotations

from typing import Any

from aios_ledger.core.errors import LedgerError
from aios_ledger.core.log import VerificationReport
from aios_ledger.core.migrations import plan_upgrade
from aios_ledger.shell.db.connection import Database
from aios_ledger.shell.db.engines import SchemaConnection
from aios_ledger.shell.db.migrator import known_migrations, read_catalogue
from aios_ledger.shell.db.run import execute
from aios_ledger.shell.db.statements import statement_texts
from aios_ledger.shell.log.verification import verify_in, verify_log


def _first_findings(report: VerificationReport) -> str:
    return "; ".join(
        f"{f.code} at event {f.event_id}" if f.event_id is not None else f"{f.code}: {f.detail}"
        for f in report.findings[:3]
    )


def upgrade_ledger(db: Database) -> dict[str, Any]:
    """Upgrade the ledger `db` opened as found; on a 1.0 ledger, say so and change nothing."""
    view = db.read(read_catalogue)
    known = known_migrations(db.read(lambda conn: conn.dialect))
    if not plan_upgrade(known, view):
        return {"database": db.path, "upgraded": False, "detail": "already a 1.0 ledger"}
    before = verify_log(db)
    if not before.intact:
        raise LedgerError(
            "UPGRADE_REFUSED_NOT_INTACT",
            f"the 0.x ledger does not verify ({len(before.findings)} findings: "
            f"{_first_findings(before)}): `aios-ledger verify` lists them; nothing was changed",
        )

    def rewrite(conn: SchemaConnection) -> VerificationReport | None:
        # Planned again under the write lock: another process may have upgraded it since.
        if not plan_upgrade(known, read_catalogue(conn)):
            return None
        conn.run_script(statement_texts(conn.dialect)["upgrade_event_seals"])
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
        return {"database": db.path, "upgraded": False, "detail": "already a 1.0 ledger"}
    return {
        "database": db.path,
        "upgraded": True,
        "from": f"0.x at {max(view.applied)}",
        "to": [migration.version for migration in known],
        "events": after.events,
        "intact": after.intact,
    }
