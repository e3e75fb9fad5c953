"""One migration numbering for both engines: every number exists on SQLite and on PostgreSQL
under the same name."""

from __future__ import annotations

from aios_ledger.shell.db.engines import engine_names
from aios_ledger.shell.db.migrator import known_migrations

ENGINES = engine_names()


def test_every_number_exists_on_every_engine_under_one_name() -> None:
    numbered = [[(m.version, m.name) for m in known_migrations(engine)] for engine in ENGINES]
    assert len(numbered) > 1
    assert all(each == numbered[0] for each in numbered)
