"""Shared fixtures: golden snapshots in top-level `snapshots/`, the owner authorization."""

from __future__ import annotations

import itertools
import os
import secrets
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import psycopg
import pytest
from syrupy.assertion import SnapshotAssertion
from syrupy.extensions.json import JSONSnapshotExtension
from syrupy.location import PyTestLocation

ROOT = Path(__file__).resolve().parents[1]
SNAPSHOTS = ROOT / "snapshots"


class LedgerSnapshots(JSONSnapshotExtension):
    """One JSON file per test, in `snapshots/<test module>/` (module names are unique)."""

    @classmethod
    def dirname(cls, *, test_location: PyTestLocation) -> str:
        return str(SNAPSHOTS / Path(test_location.filepath).stem)


@pytest.fixture
def golden(snapshot: SnapshotAssertion) -> SnapshotAssertion:
    return snapshot.use_extension(LedgerSnapshots)


# -- both engines -------------------------------------------------------------------------------
# The store and service tests take `ledger_target`: a fresh SQLite file, or a fresh schema in a
# PostgreSQL database created for this test session (and dropped at its end). Without a reachable
# server the PostgreSQL half skips, with one line saying so, unless AIOS_REQUIRE_POSTGRES=1.

DEFAULT_POSTGRES_URL = "postgresql://postgres@127.0.0.1:5432/postgres"
_SCHEMAS = itertools.count(1)


def _server_url() -> str:
    return os.environ.get("AIOS_TEST_POSTGRES_URL") or DEFAULT_POSTGRES_URL


@pytest.fixture(scope="session")
def postgres_database() -> Iterator[str | None]:
    """The URL of a database of this session's own, or None when no server answers."""
    server = _server_url()
    try:
        admin = psycopg.connect(server, autocommit=True, connect_timeout=3)
    except psycopg.Error as exc:
        if os.environ.get("AIOS_REQUIRE_POSTGRES") == "1":
            pytest.fail(f"AIOS_REQUIRE_POSTGRES=1 but PostgreSQL at {server} is unreachable: {exc}")
        _POSTGRES_SKIPPED.append(f"no PostgreSQL at {server} ({str(exc).strip()[:80]})")
        yield None
        return
    name = f"aios_test_{secrets.token_hex(6)}"
    with admin:
        admin.execute(f"CREATE DATABASE {name}")
        try:
            yield urlunsplit(urlsplit(server)._replace(path=f"/{name}"))
        finally:
            admin.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")


_POSTGRES_SKIPPED: list[str] = []


def pytest_terminal_summary(terminalreporter: Any) -> None:
    for line in _POSTGRES_SKIPPED[:1]:
        terminalreporter.write_line(
            f"PostgreSQL tests SKIPPED: {line}; set AIOS_TEST_POSTGRES_URL, or "
            "AIOS_REQUIRE_POSTGRES=1 to fail instead"
        )


def postgres_url(database: str | None) -> str:
    """A fresh schema (its own search_path) in the session's database."""
    if database is None:
        pytest.skip("PostgreSQL unreachable (see the line at the end of the run)")
    return f"{database}?search_path=t{os.getpid()}_{next(_SCHEMAS)}"


@pytest.fixture(params=["sqlite", "postgresql"])
def ledger_target(
    request: pytest.FixtureRequest, tmp_path: Path, postgres_database: str | None
) -> str | Path:
    """Where a test's ledger lives, on each engine: a path or a PostgreSQL URL."""
    if request.param == "sqlite":
        return tmp_path / "ledger.sqlite3"
    return postgres_url(postgres_database)


def is_postgres(target: object) -> bool:
    return isinstance(target, str) and target.startswith("postgresql://")
