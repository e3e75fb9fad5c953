"""For the tests of what only SQLite has (its apsw connection, its WAL rounds, group commit):
the Database a path opened, as the SQLite engine's own class."""

from __future__ import annotations

from aios_ledger.shell import Database
from aios_ledger.shell.db.engines.sqlite import SqliteDatabase


def sqlite_database(db: Database) -> SqliteDatabase:
    """`db`, which a file's path opened: SQLite's Database, with its `conn`."""
    assert isinstance(db, SqliteDatabase), f"{db.engine}: not SQLite's Database"
    return db
