"""One migration numbering for both engines: every number exists on SQLite and on PostgreSQL
under the same name."""

from __future__ import annotations

from aios_ledger.shell.db.migrator import known_migrations

ENGINES = ("sqlite", "postgresql")


def test_every_number_exists_on_both_engines_under_one_name() -> None:
    numbered = {
        engine: [(m.version, m.name) for m in known_migrations(engine)] for engine in ENGINES
    }
    assert numbered["sqlite"] == numbered["postgresql"]
