"""A ledger taken back to before a migration, for the tests of what a migration converts: the
down sections of that migration and of every later one, the latest first, read from the
migration folders themselves, so a new migration needs no list here or in the tests."""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def roll_back_script(version: str, *, postgres: bool) -> str:
    """SQL that rolls migration `version` ("0020") and those after it back by their own down
    sections, the latest first, and forgets them in schema_migrations."""
    folder = ROOT / "sql" / ("postgresql/migrations" if postgres else "migrations")
    files = sorted(
        (file for file in folder.glob("[0-9][0-9][0-9][0-9]_*.sql") if file.name[:4] >= version),
        reverse=True,
    )
    downs = [file.read_text("utf-8").split("-- migrate:down", 1)[1] for file in files]
    versions = ", ".join(f"'{file.name[:4]}'" for file in files)
    return "\n".join(downs) + f"\nDELETE FROM schema_migrations WHERE version IN ({versions});"
