"""`aios-ledger schema-dump`: the schema of a fresh ledger, as DBAs read it."""

from __future__ import annotations

from aios_ledger.shell.db.connection import engine_for


def schema_sql(url: str | None = None) -> str:
    """SQLite's schema; with a URL (of a server to make a scratch schema in), its engine's."""
    return engine_for(url).schema_sql(url)
