"""Shared fixtures: golden snapshots in top-level `snapshots/`, the owner authorization, the
ledgers of both engines; the markers that split the suite between `make test` and `make check`."""

from __future__ import annotations

import itertools
import os
import secrets
import shutil
import sqlite3
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import psycopg
import pytest
from aios_ledger.shell import Database
from aios_ledger.shell.db import migrator
from aios_ledger.shell.db.engines import engine_names
from aios_ledger.shell.db.engines.postgresql import PostgresTarget
from aios_ledger.shell.db.engines.sqlite import SqliteDatabase
from hypothesis import HealthCheck, settings
from schema_support import schema_script
from syrupy.assertion import SnapshotAssertion
from syrupy.extensions.json import JSONSnapshotExtension
from syrupy.location import PyTestLocation

ROOT = Path(__file__).resolve().parents[1]
SNAPSHOTS = ROOT / "snapshots"

# A property is judged by its examples, never by the speed of a machine: CI shares two cores with
# four test processes, where generating one example can take a second. So no deadline and no
# too_slow health check, for every property (a test's own @settings keeps these unless it names
# them).
settings.register_profile("ledger", deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.load_profile("ledger")


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


def _unreachable() -> str | None:
    """Why the server does not answer, or None when it does."""
    try:
        psycopg.connect(_server_url(), autocommit=True, connect_timeout=3).close()
    except psycopg.Error as exc:
        return str(exc).strip().splitlines()[0][:100]
    return None


def _uses_postgres(item: pytest.Item) -> bool:
    callspec = getattr(item, "callspec", None)
    engine = callspec.params.get("engine") if callspec is not None else None
    fixtures = getattr(item, "fixturenames", ())
    return engine == "postgresql" or (engine is None and "postgres_database" in fixtures)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Mark every test for its selection (`make test` or `make check`). Without a server the
    PostgreSQL half is deselected, and the run ends with one line saying so; with
    AIOS_REQUIRE_POSTGRES=1 it stays, and fails."""
    for item in items:
        for name in selection_markers(item):
            item.add_marker(name)
        if item.get_closest_marker("kills") is not None or item.path.stem in DURABLE_MODULES:
            item.add_marker("durable")
    postgres = [item for item in items if _uses_postgres(item)]
    if not postgres or os.environ.get("AIOS_REQUIRE_POSTGRES") == "1":
        return
    reason = _unreachable()
    if reason is None:
        return
    _POSTGRES_SKIPPED.append(f"{len(postgres)} tests, no PostgreSQL at {_server_url()}: {reason}")
    config.hook.pytest_deselected(items=postgres)
    items[:] = [item for item in items if not _uses_postgres(item)]


# -- make test and make check ---------------------------------------------------------------------
# `make test` runs the tests that carry none of CHECK_MARKERS, `make check` those that carry at
# least one (tests/test_suite_selection.py holds that the two split the suite). A test that
# carries one is marked here from what it uses, so a new test lands in the right half unmarked.
CHECK_MARKERS = ("postgresql", "browser", "kills", "git_servers")

# Chromium under Playwright through a fixture of console_support, or launched by the module.
BROWSER_MODULES = frozenset(
    {"test_console_browser", "test_console_pages_browser", "test_bench_paint"}
)

# sshd, and nginx in front of git http-backend, started for the test (tests/git_servers.py).
GIT_SERVER_FIXTURES = frozenset({"ssh_git_server", "http_git_server", "https_git_server"})

# Beside every tests/test_reliability_*.py: the tests whose subject is a process killed with
# SIGKILL and what the ledger (or the host) is left with, at the counts they run at.
KILL_TESTS = {
    "test_api_event_stream": {"test_events_follow_over_the_api_resumes_after_a_dropped_connection"},
    "test_git_writes": {
        "test_a_write_killed_between_intent_and_outcome_is_reconciled_from_the_ref"
    },
    "test_git_remote_repositories": {
        "test_a_write_process_killed_at_the_push_is_settled_from_the_remotes_refs"
    },
    "test_worker_e2e": {"test_a_killed_worker_is_rescued_after_its_lease"},
    "test_worker_processes": {
        "test_a_sigkilled_worker_takes_its_agent_and_the_agents_children_along"
    },
}


# Tests whose subject is what reaches the disk (a full disk, failed writes and syncs): their
# ledgers keep the synchronous level they ask for (see `_quick_sqlite_ledgers`).
DURABLE_MODULES = frozenset(
    {
        "test_faults_full_disk",
        "test_faults_ledger",
        "test_faults_auxiliary",
        "test_faults_projection",
    }
)


def selection_markers(item: pytest.Item) -> list[str]:
    """The markers of CHECK_MARKERS that `item` takes from what it uses."""
    module = item.path.stem
    function = getattr(item, "originalname", item.name)
    found = []
    if _uses_postgres(item):
        found.append("postgresql")
    if module in BROWSER_MODULES or "chromium" in getattr(item, "fixturenames", ()):
        found.append("browser")
    if module.startswith("test_reliability_") or function in KILL_TESTS.get(module, ()):
        found.append("kills")
    if GIT_SERVER_FIXTURES & set(getattr(item, "fixturenames", ())):
        found.append("git_servers")
    return found


# -- ledgers for tests ----------------------------------------------------------------------------
# A fresh SQLite ledger opened in this process is a copy of one migrated once per test process
# (copying a file costs a small part of migrating one), and it commits at synchronous=OFF: a
# test needs a ledger that survives its process, not a power loss. Durability tests (marked
# `durable`, and every `kills` test) keep what they ask for, as does a ledger opened through a
# VFS (the fault shims count syncs) or at another level than the default FULL. A test that
# changes the migrations gets them run for real; `init` and `migrate` always run them.
@pytest.fixture(scope="session")
def migrated_ledger(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, object]:
    """A ledger migrated for real, and the migrations it holds."""
    path = tmp_path_factory.mktemp("template") / "migrated.sqlite3"
    Database(path).close()
    assert not Path(f"{path}-wal").exists(), "the copy would miss what the WAL still holds"
    return path, migrator.known_migrations("sqlite")


def _copy_once(template: Path, file: str) -> None:
    """Put the template at `file` in one step: threads that open a new ledger at once would
    otherwise open, or copy over, a file another thread is still writing."""
    partial = f"{file}.{os.getpid()}-{threading.get_ident()}.partial"
    shutil.copyfile(template, partial)
    try:
        os.link(partial, file)
    except FileExistsError:
        pass
    finally:
        os.unlink(partial)


@pytest.fixture(autouse=True)
def _quick_sqlite_ledgers(
    request: pytest.FixtureRequest,
    monkeypatch: pytest.MonkeyPatch,
    migrated_ledger: tuple[Path, object],
) -> None:
    if request.node.get_closest_marker("durable") is not None:
        return
    template, migrations = migrated_ledger
    opened = SqliteDatabase._open

    def quick_open(
        self: SqliteDatabase, path: Any, synchronous: str, vfs: str | None, step: Any
    ) -> None:
        file = "" if path is None or vfs is not None else os.fspath(path)
        if file in ("", ":memory:"):
            opened(self, path, synchronous, vfs, step)
            return
        if (
            step.value == "migrate"
            and not os.path.lexists(file)
            and os.path.isdir(os.path.dirname(os.path.abspath(file)))
            and migrator.known_migrations("sqlite") == migrations
        ):
            _copy_once(template, file)
        opened(self, path, synchronous, vfs, step)
        if synchronous == "FULL":
            self.conn.execute("PRAGMA synchronous = OFF")

    monkeypatch.setattr(SqliteDatabase, "_open", quick_open)


@pytest.fixture(scope="session")
def postgres_database() -> Iterator[str | None]:
    """The URL of a database of this session's own, or None when no server answers."""
    server = _server_url()
    try:
        admin = psycopg.connect(server, autocommit=True, connect_timeout=3)
    except psycopg.Error as exc:
        if os.environ.get("AIOS_REQUIRE_POSTGRES") == "1":
            pytest.fail(f"AIOS_REQUIRE_POSTGRES=1 but PostgreSQL at {server} is unreachable: {exc}")
        yield None
        return
    name = f"aios_test_{secrets.token_hex(6)}"
    with admin:
        admin.execute(f"CREATE DATABASE {name}")
        # A commit need not wait for the server's WAL to reach the disk: what a test kills is a
        # client or the API server, never PostgreSQL itself, so nothing a test sees changes.
        admin.execute(f"ALTER DATABASE {name} SET synchronous_commit = off")
    try:
        yield urlunsplit(urlsplit(server)._replace(path=f"/{name}"))
    finally:
        # A connection of its own: a test may have restarted the server meanwhile.
        with psycopg.connect(server, autocommit=True, connect_timeout=10) as admin:
            admin.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")


_POSTGRES_SKIPPED: list[str] = []


def pytest_terminal_summary(terminalreporter: Any) -> None:
    for line in _POSTGRES_SKIPPED[:1]:
        terminalreporter.write_line(
            f"PostgreSQL half SKIPPED ({line}); set AIOS_TEST_POSTGRES_URL, or "
            "AIOS_REQUIRE_POSTGRES=1 to fail instead"
        )


def postgres_url(database: str | None) -> str:
    """A fresh schema (its own search_path) in the session's database."""
    if database is None:
        pytest.skip("PostgreSQL unreachable (see the line at the end of the run)")
    return f"{database}?search_path=t{os.getpid()}_{next(_SCHEMAS)}"


@pytest.fixture(scope="module")
def sqlite_schema() -> Iterator[sqlite3.Connection]:
    """A database built from the baseline migration alone: the SQL tests run statements on it."""
    conn = sqlite3.connect(":memory:")
    conn.executescript(schema_script())
    yield conn
    conn.close()


@pytest.fixture(scope="module")
def pg_schema(postgres_database: str | None) -> Iterator[psycopg.Connection[Any]]:
    """A schema built from PostgreSQL's baseline migration alone, for the SQL tests."""
    target = PostgresTarget.parse(postgres_url(postgres_database))
    with psycopg.connect(target.conninfo, **target.connect_options()) as conn:
        conn.execute(f"CREATE SCHEMA {target.schema}".encode())
        conn.execute(schema_script("postgresql").encode())
        yield conn
        conn.rollback()


# Migrating a schema costs far more than emptying one: a ledger's schema goes back to the pool
# when its test ends, its rows deleted and its id counters at 0, as a fresh ledger is (only one
# whose migrations are the current ones, which nothing else has changed). The few rows a test
# wrote are deleted rather than truncated, which would make every table's files anew; the
# replica role lets the deletes past the triggers that refuse them on sealed rows (where the
# tests' user may not take that role, each test migrates a schema of its own instead).
_FREE: list[str] = []
_LENT: list[tuple[str, str]] = []


def ledger_schema_url(database: str | None) -> str:
    """A schema for a ledger: an emptied one of an earlier test, or a new one (its first open
    migrates it). Tests that need a schema with nothing in it take `postgres_url`."""
    url = postgres_url(database)
    assert database is not None
    schema = _FREE.pop() if _FREE else url.rsplit("=", 1)[1]
    _LENT.append((database, schema))
    return f"{database}?search_path={schema}"


@pytest.fixture(autouse=True)
def _schemas_back_to_the_pool() -> Iterator[None]:
    yield
    while _LENT:
        database, schema = _LENT.pop()
        if _emptied(database, schema):
            _FREE.append(schema)


def _emptied(database: str, schema: str) -> bool:
    from aios_ledger.shell.db.migrator import known_migrations

    current = [migration.version for migration in known_migrations("postgresql")]
    try:
        with psycopg.connect(database, autocommit=True) as conn:
            conn.execute(b"SET lock_timeout = '2s'")
            tables = [
                str(row[0])
                for row in conn.execute(
                    "SELECT table_name FROM information_schema.tables"
                    " WHERE table_schema = %s AND table_type = 'BASE TABLE'",
                    (schema,),
                )
            ]
            if "schema_migrations" not in tables:
                return False
            applied = conn.execute(
                f"SELECT version FROM {schema}.schema_migrations ORDER BY version".encode()
            )
            if [str(row[0]) for row in applied] != current:
                return False
            emptied = [name for name in tables if name not in KEPT_TABLES]
            with conn.transaction():
                conn.execute(b"SET LOCAL session_replication_role = replica")
                for name in emptied:
                    conn.execute(f"DELETE FROM {schema}.{name}".encode())
                for sequence in ("event_ids", "task_seqs"):
                    conn.execute(f"SELECT setval('{schema}.{sequence}', 1, false)".encode())
                # The Merkle tree's head row as a fresh ledger's first open leaves it (the tree
                # of no events, built): a reader of a reused schema finds it before any writer.
                conn.execute(
                    f"UPDATE {schema}.merkle_tree SET size = 0, frontier = '\\x'::bytea,"
                    " revision = 1".encode()
                )
    except psycopg.Error:
        return False
    return True


# Not emptied: the migrator's list, and the Merkle tree's one head row (reset instead).
KEPT_TABLES = frozenset({"schema_migrations", "merkle_tree"})


# Every engine the registry lists (`shell/db/engines/__init__.py`); `ledger_target` makes a
# fresh ledger's place on each (a third engine adds its own there, or its tests fail loudly).
ENGINES = engine_names()


@pytest.fixture
def engine() -> str:
    """The engine a test's ledger lives on: SQLite unless its module runs both engines
    (`pytest_generate_tests = both_engines`)."""
    return "sqlite"


def both_engines(metafunc: pytest.Metafunc) -> None:
    """A test module's `pytest_generate_tests`: every test that takes `engine` (through
    `ledger_target`, say) runs on SQLite and on PostgreSQL; golden snapshots (the core's, the
    same on both engines) stay single."""
    if "engine" in metafunc.fixturenames and "golden" not in metafunc.fixturenames:
        metafunc.parametrize("engine", ENGINES)


@pytest.fixture
def ledger_target(engine: str, tmp_path: Path, request: pytest.FixtureRequest) -> str | Path:
    """Where a test's ledger lives: a fresh SQLite file, or a fresh PostgreSQL schema."""
    if engine == "sqlite":
        return tmp_path / "ledger.sqlite3"
    if engine == "postgresql":
        return ledger_schema_url(request.getfixturevalue("postgres_database"))
    raise LookupError(f"no fresh ledger target for the engine {engine!r}: add one here")


def is_postgres(target: object) -> bool:
    return isinstance(target, str) and target.startswith("postgresql://")


_FRESH: list[str | None] = [None]


@pytest.fixture
def engine_targets(engine: str, request: pytest.FixtureRequest) -> Iterator[None]:
    """For modules whose stores open an in-memory database (`path=None`): on PostgreSQL,
    `fresh_target()` is a fresh schema instead (`pytestmark = usefixtures("engine_targets")`)."""
    if engine == "postgresql":
        database = request.getfixturevalue("postgres_database")
        postgres_url(database)  # skips without a server
        _FRESH[0] = database
    yield
    _FRESH[0] = None


def fresh_target() -> str | None:
    """None (SQLite in memory) or a fresh PostgreSQL schema, as the test's engine is."""
    return None if _FRESH[0] is None else ledger_schema_url(_FRESH[0])


# The console's browser fixtures, for every module of its pages (tests/console_support.py):
# one Chromium per module, a fresh context per test (and a second one), the bulk ledger.
from console_support import bulk_template, chromium, page, second_page  # noqa: E402

__all__ = ["bulk_template", "chromium", "page", "second_page"]

# One TLS context for the thousands of httpx clients the tests make (tests/tls_support.py).
from git_servers import HttpServer, SshServer, http_server, ssh_server  # noqa: E402
from tls_support import one_tls_context  # noqa: E402, F401


# The git servers of the remote-repository tests, each on a loopback port of its own, serving the
# bare repositories under the test's `served` folder (tests/git_servers.py).
@pytest.fixture
def ssh_git_server(tmp_path: Path) -> Iterator[SshServer]:
    with ssh_server(tmp_path / "sshd") as server:
        yield server


# The HTTP server's token: a canary the tests look for everywhere but the token file.
HTTP_TOKEN = "canary-token-3f9a1c7e5b2d4860"


@pytest.fixture
def http_git_server(tmp_path: Path) -> Iterator[HttpServer]:
    served = tmp_path / "served"
    served.mkdir(exist_ok=True)
    with http_server(tmp_path / "nginx", served, HTTP_TOKEN) as server:
        yield server


@pytest.fixture
def https_git_server(tmp_path: Path) -> Iterator[HttpServer]:
    served = tmp_path / "served"
    served.mkdir(exist_ok=True)
    with http_server(tmp_path / "nginx", served, HTTP_TOKEN, tls=True) as server:
        yield server
