"""Bringing a database to the current schema on open (the decisions are the core's)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import apsw
import attrs
from aios_ledger.core import (
    CatalogueView,
    Migration,
    MigrationPlan,
    parse_migration,
    plan_migrations,
)
from aios_ledger.shell.db.connection import execute, fetch_all
from aios_ledger.shell.db.statements import migration_files
from aios_ledger.shell.log.append import seal_unsealed_events

if TYPE_CHECKING:
    from aios_ledger.shell.db.connection import Database


def known_migrations() -> tuple[Migration, ...]:
    return tuple(parse_migration(name, content) for name, content in migration_files())


def read_catalogue(conn: apsw.Connection) -> CatalogueView:
    tables = frozenset(row["name"] for row in fetch_all(conn, "list_tables"))
    applied: tuple[str, ...] = ()
    if "schema_migrations" in tables:
        applied = tuple(str(row["version"]) for row in fetch_all(conn, "applied_migrations"))

    def columns(table: str) -> tuple[str, ...]:
        return tuple(row["name"] for row in fetch_all(conn, "table_columns", {"table_name": table}))

    return CatalogueView(
        tables=tables,
        applied=applied,
        task_columns=columns("tasks"),
        event_columns=columns("events"),
    )


def migration_plan(db: Database) -> MigrationPlan:
    return db.read(lambda conn: plan_migrations(known_migrations(), read_catalogue(conn)))


@attrs.frozen
class MigrationReport:
    applied: tuple[str, ...]
    adopted_legacy: bool
    sealed_at_adoption: int


def migrate_database(db: Database) -> MigrationReport:
    """Apply what is pending; cheap when the database is current (one read, no write lock)."""
    if migration_plan(db).is_current:
        return MigrationReport(applied=(), adopted_legacy=False, sealed_at_adoption=0)
    return db.write(_migrate_locked)


def _migrate_locked(conn: apsw.Connection) -> MigrationReport:
    # Re-plan under the write lock: another process may have migrated meanwhile.
    plan = plan_migrations(known_migrations(), read_catalogue(conn))
    execute(conn, "create_schema_migrations")
    for migration in plan.pending:
        conn.execute(migration.up)
        execute(conn, "record_migration", {"version": migration.version})
    sealed = seal_unsealed_events(conn) if plan.adopt_legacy else 0
    return MigrationReport(
        applied=tuple(m.version for m in plan.pending),
        adopted_legacy=plan.adopt_legacy,
        sealed_at_adoption=sealed,
    )


def migration_status(db: Database) -> dict[str, Any]:
    view = db.read(read_catalogue)
    known = known_migrations()
    return {
        "applied": list(view.applied),
        "pending": [m.version for m in known if m.version not in set(view.applied)],
        "known": [f"{m.version}_{m.name}" for m in known],
    }
