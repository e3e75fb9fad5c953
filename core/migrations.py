"""Which migrations a database needs, decided from its catalogue; an unrecognised database is
refused rather than written."""

from __future__ import annotations

import re
from collections.abc import Sequence

import attrs
from aios_ledger.core.errors import LedgerError

LEGACY_TASK_COLUMNS = (
    "task_id",
    "goal",
    "instructions",
    "success_criteria_json",
    "required_capabilities_json",
    "constraints_json",
    "metadata_json",
    "deadline",
    "priority",
    "max_attempts",
    "attempt",
    "status",
    "claimed_by",
    "lease_token_hash",
    "lease_expires_at",
    "result_json",
    "result_digest",
    "result_idempotency_key",
    "verification_json",
    "revision",
    "created_at",
    "updated_at",
)
LEGACY_EVENT_COLUMNS = (
    "event_id",
    "task_id",
    "agent_id",
    "event_type",
    "payload_json",
    "created_at",
)
LEGACY_TABLES = frozenset({"tasks", "events"})
# The last 0.x release's migration history, which `upgrade` replaces with the 1.0 baseline's.
ZERO_X_MIGRATIONS = frozenset(
    ["0001", *(f"{number:04}" for number in range(3, 29) if number != 17)]
)
_FILE_NAME = re.compile(r"^(\d+)_([a-z0-9_]+)\.sql$")
_UP = "-- migrate:up"
_DOWN = "-- migrate:down"


@attrs.frozen
class Migration:
    version: str
    name: str
    up: str
    down: str


@attrs.frozen
class CatalogueView:
    """What the shell read from `sqlite_master`, `pragma_table_info` and `schema_migrations`."""

    tables: frozenset[str]
    applied: tuple[str, ...]
    task_columns: tuple[str, ...]
    event_columns: tuple[str, ...]


@attrs.frozen
class MigrationPlan:
    pending: tuple[Migration, ...]
    adopt_legacy: bool

    @property
    def is_current(self) -> bool:
        return not self.pending and not self.adopt_legacy


def parse_migration(file_name: str, content: str) -> Migration:
    match = _FILE_NAME.fullmatch(file_name)
    if match is None:
        raise LedgerError("MIGRATION_INVALID", f"{file_name}: expected NNNN_description.sql")
    lines = content.splitlines()
    markers = [line.strip() for line in lines]
    if markers.count(_UP) != 1 or markers.count(_DOWN) != 1:
        raise LedgerError("MIGRATION_INVALID", f"{file_name}: needs one up and one down section")
    up_at, down_at = markers.index(_UP), markers.index(_DOWN)
    if not up_at < down_at:
        raise LedgerError("MIGRATION_INVALID", f"{file_name}: up must come before down")
    up = "\n".join(lines[up_at + 1 : down_at]).strip()
    down = "\n".join(lines[down_at + 1 :]).strip()
    if not up:
        raise LedgerError("MIGRATION_INVALID", f"{file_name}: empty up section")
    return Migration(version=match.group(1), name=match.group(2), up=up, down=down)


def plan_migrations(known: Sequence[Migration], view: CatalogueView) -> MigrationPlan:
    versions = [migration.version for migration in known]
    if len(set(versions)) != len(versions) or versions != sorted(versions):
        raise LedgerError("MIGRATION_INVALID", f"migration versions must be unique: {versions}")
    if "schema_migrations" in view.tables:
        _refuse_zero_x(known, view)
        unknown = sorted(set(view.applied) - set(versions))
        if unknown:
            raise LedgerError(
                "SCHEMA_TOO_NEW",
                f"the database has migrations {unknown} that this version does not know; "
                "upgrade aios-ledger",
            )
        applied = set(view.applied)
        pending = tuple(m for m in known if m.version not in applied)
        _refuse_missing_earlier(pending, view.applied, view.tables)
        return MigrationPlan(pending=pending, adopt_legacy=False)
    user_tables = view.tables
    if not user_tables:
        return MigrationPlan(pending=tuple(known), adopt_legacy=False)
    legacy_shape = (
        user_tables == LEGACY_TABLES
        and view.task_columns == LEGACY_TASK_COLUMNS
        and view.event_columns == LEGACY_EVENT_COLUMNS
    )
    if not legacy_shape:
        raise LedgerError(
            "SCHEMA_UNRECOGNIZED",
            f"the database holds tables {sorted(user_tables)} but no schema_migrations, and is "
            "not the older runtime's tasks/events layout; refusing to write to it",
        )
    return MigrationPlan(pending=tuple(known), adopt_legacy=True)


def is_zero_x(known: Sequence[Migration], view: CatalogueView) -> bool:
    """Whether the history holds a 0.x migration this version does not know."""
    applied = set(view.applied)
    return bool(applied - {m.version for m in known}) and applied <= ZERO_X_MIGRATIONS


def _refuse_zero_x(known: Sequence[Migration], view: CatalogueView) -> None:
    if is_zero_x(known, view):
        raise LedgerError(
            "LEDGER_NEEDS_UPGRADE",
            f"the database is a ledger of aios-ledger 0.x (migrations up to {max(view.applied)}):"
            " run `aios-ledger upgrade` once to make it a 1.0 ledger; nothing was changed",
        )


def plan_upgrade(known: Sequence[Migration], view: CatalogueView) -> bool:
    """Whether `upgrade` has work: True for the last 0.x release, False for 1.0."""
    if is_zero_x(known, view):
        missing = sorted(ZERO_X_MIGRATIONS - set(view.applied))
        if missing:
            raise LedgerError(
                "UPGRADE_NEEDS_LAST_0X",
                f"the 0.x ledger lacks its migrations {missing}: first run the last 0.x "
                "release's `aios-ledger migrate` (to 0028), then `aios-ledger upgrade`; "
                "nothing was changed",
            )
        return True
    if plan_migrations(known, view).is_current:
        return False
    raise LedgerError(
        "UPGRADE_NOT_A_LEDGER",
        "the database is not a ledger of aios-ledger 0.x nor a current one: "
        "`aios-ledger migrate` makes or adopts a ledger; nothing was changed",
    )


def _refuse_missing_earlier(
    pending: Sequence[Migration], applied: Sequence[str], tables: frozenset[str]
) -> None:
    """An applied migration whose row was lost would fail half-way if run again."""
    if applied:
        newest = max(applied)
        missing = [m.version for m in pending if m.version < newest]
    else:
        missing = [pending[0].version] if pending and tables - {"schema_migrations"} else []
    if missing:
        raise LedgerError(
            "SCHEMA_MIGRATIONS_INCONSISTENT",
            f"schema_migrations does not record {missing} applied, yet the database holds "
            "its tables: a row was deleted behind the ledger's back (applying it again "
            f"would fail). Restore it (INSERT INTO schema_migrations(version) VALUES "
            f"('{missing[0]}')), or restore the database from a backup; nothing was changed",
        )


def refuse_unless_current(known: Sequence[Migration], view: CatalogueView) -> None:
    """With `migrate=False`, open only a database at exactly the known migrations."""
    plan = plan_migrations(known, view)
    if plan.is_current:
        return
    versions = [migration.version for migration in known]
    if plan.adopt_legacy:
        raise LedgerError(
            "SCHEMA_TOO_OLD",
            "the database is the older runtime's tasks/events layout, not yet adopted; run "
            f"`aios-ledger migrate` to adopt it (this version knows migrations {versions})",
        )
    if "schema_migrations" not in view.tables:
        raise LedgerError(
            "SCHEMA_TOO_OLD",
            f"the database is not a ledger yet (no schema_migrations); this version knows "
            f"migrations {versions}: run `aios-ledger migrate` or dbmate up",
        )
    raise LedgerError(
        "SCHEMA_TOO_OLD",
        f"the database has migrations {list(view.applied)}, this version knows {versions} "
        f"({[migration.version for migration in plan.pending]} pending): run "
        "`aios-ledger migrate` or dbmate up",
    )
