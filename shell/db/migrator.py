"""Bringing a database to the current schema, or refusing one that is not (the decisions are
`core/migrations.py`'s); `apply_migrations` is the one step that changes a schema.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import cache
from typing import Any, Protocol, TypeVar

import attrs
from aios_ledger.core.migrations import (
    CatalogueView,
    Migration,
    MigrationPlan,
    parse_migration,
    plan_migrations,
    refuse_unless_current,
)
from aios_ledger.shell.db.adoption import seal_unsealed_events
from aios_ledger.shell.db.connection import _SchemaStep
from aios_ledger.shell.db.engines import SchemaConnection
from aios_ledger.shell.db.merkle import build_tree
from aios_ledger.shell.db.run import Connection, execute, fetch_all
from aios_ledger.shell.db.statements import migration_files, sql

T = TypeVar("T")

CURRENT = MigrationPlan(pending=(), adopt_legacy=False)


class Transactions(Protocol):
    """What the migrator needs of a Database: its read and schema-writing transactions."""

    def read(self, work: Callable[[Connection], T]) -> T: ...

    def write_schema(self, work: Callable[[SchemaConnection], T]) -> T: ...


@attrs.frozen
class MigrationReport:
    applied: tuple[str, ...]
    adopted_legacy: bool
    sealed_at_adoption: int


NOTHING_APPLIED = MigrationReport(applied=(), adopted_legacy=False, sealed_at_adoption=0)


@cache
def known_migrations(dialect: str = "sqlite") -> tuple[Migration, ...]:
    """A dialect's migrations, parsed once per process as their files are read once."""
    return tuple(parse_migration(name, content) for name, content in migration_files(dialect))


def read_catalogue(conn: Connection) -> CatalogueView:
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


def migration_plan(conn: Connection) -> MigrationPlan:
    """What `apply_migrations` would do now; refuses a newer or a foreign database."""
    return plan_migrations(known_migrations(conn.dialect), read_catalogue(conn))


def plan_on_open(db: Transactions, step: _SchemaStep) -> MigrationPlan:
    """The schema step's read before the Database touches the file: the plan to apply, or (not
    migrating) a refusal of anything but a current database; as found, nothing to apply."""

    def refuse_unless_current_schema(conn: Connection) -> MigrationPlan:
        refuse_unless_current(known_migrations(conn.dialect), read_catalogue(conn))
        return CURRENT

    if step is _SchemaStep.AS_FOUND:
        return CURRENT
    return db.read(migration_plan if step is _SchemaStep.MIGRATE else refuse_unless_current_schema)


def apply_migrations(conn: SchemaConnection) -> MigrationReport:
    """Apply what is pending inside the caller's write transaction, planned again under the write
    lock since another process may have migrated since any earlier read."""
    conn.prepare_schema()
    plan = migration_plan(conn)
    if plan.is_current:
        return NOTHING_APPLIED
    execute(conn, "create_schema_migrations")
    if plan.adopt_legacy:
        # The older runtime's two tables step aside for the baseline's, then fill them.
        conn.run_script(sql("legacy_adopt_set_aside"))
    for migration in plan.pending:
        conn.run_script(migration.up)
        execute(conn, "record_migration", {"version": migration.version})
    sealed = 0
    if plan.adopt_legacy:
        conn.run_script(sql("legacy_adopt_copy"))
        sealed = seal_unsealed_events(conn)
    build_tree(conn)
    return MigrationReport(
        applied=tuple(m.version for m in plan.pending),
        adopted_legacy=plan.adopt_legacy,
        sealed_at_adoption=sealed,
    )


def migrate_database(db: Transactions) -> MigrationReport:
    """Apply what is pending; cheap when the database is current (one read, no write lock)."""
    if db.read(migration_plan).is_current:
        return NOTHING_APPLIED
    return db.write_schema(apply_migrations)


def migration_status(db: Transactions) -> dict[str, Any]:
    view = db.read(read_catalogue)
    known = known_migrations(db.read(lambda conn: conn.dialect))
    return {
        "applied": list(view.applied),
        "pending": [m.version for m in known if m.version not in set(view.applied)],
        "known": [f"{m.version}_{m.name}" for m in known],
    }
