"""The 1.0 schema as a test builds it without the migrator: dbmate's `schema_migrations` table
and the baseline's up section, per engine."""

from __future__ import annotations

from aios_ledger.shell.db.migrator import known_migrations
from aios_ledger.shell.db.statements import statements


def schema_script(dialect: str = "sqlite") -> str:
    (baseline,) = known_migrations(dialect)
    return statements(dialect)["create_schema_migrations"].sql + "\n" + baseline.up
