"""The Database on PostgreSQL: the same `write(fn)` / `read(fn)` as SQLite's, over a psycopg pool.

A write is `BEGIN` (READ COMMITTED), the ledger's write lock (one transaction-scoped advisory
lock per schema), the work, `COMMIT`. A task's own transitions (`write(..., row_locked=True)`)
take the lock shared and lock the rows they decide on themselves, so writers of different tasks
run side by side; their events are numbered from a sequence once decided (v3 seals do not cover
ids). Every other write takes the lock exclusively: the counterpart of SQLite's `BEGIN
IMMEDIATE`, under which a decision's reads stay what it read until it commits. A read is one
REPEATABLE READ READ ONLY snapshot. Serialization failures and deadlocks are retried a bounded
number of times (in a row-locked write, unique violations too); a server that is down or
restarting is retried while nothing can have been committed, then answered as
`DATABASE_UNAVAILABLE` (a failure during COMMIT is answered at once: its outcome is unknown,
and the caller's idempotency key makes its retry safe).
"""

from __future__ import annotations

import contextlib
import itertools
import os
import random
import re
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, TypeVar

import psycopg
from aios_ledger.core import LedgerError
from aios_ledger.shell.db.connection import (
    SYNCHRONOUS_LEVELS,
    URL_ENGINES,
    Database,
    Params,
    Row,
    _SchemaStep,
)
from aios_ledger.shell.db.migrator import apply_migrations, plan_on_open
from aios_ledger.shell.db.pg import (
    RETRYABLE,
    PgConnection,
    PostgresTarget,
    configure,
    is_unavailable,
    pg_error,
)
from aios_ledger.shell.db.run import fetch_all, fetch_value
from psycopg import errors as pg_errors
from psycopg_pool import ConnectionPool, PoolTimeout

if TYPE_CHECKING:
    from aios_ledger.shell.db.group_commit import GroupCommit

T = TypeVar("T")

RETRIES = 8
# The transaction a work runs in: its BEGIN statement (sql/postgresql/connection.sql).
EXCLUSIVE = "begin_immediate"
ROW_LOCKED = "begin_row_locked"
READ = "begin_read"
UNAVAILABLE_RETRIES = 20
POOL_SIZE_ENV = "AIOS_LEDGER_PG_POOL_SIZE"
_CURSOR_NAMES = itertools.count(1)


class _CommitUncertain(Exception):
    """The connection broke while COMMIT was on its way: the outcome is unknown."""


class PostgresDatabase(Database):
    """A ledger in a PostgreSQL schema; made by `Database(url)` (see `Database`)."""

    engine = "postgresql"

    def _open(self, path: Any, synchronous: str, vfs: str | None, step: _SchemaStep) -> None:
        if vfs is not None:
            raise LedgerError("DATABASE_URL_INVALID", "a VFS is SQLite's: not for a URL")
        if synchronous not in SYNCHRONOUS_LEVELS:  # SQLite's setting: checked alike, unused
            raise LedgerError(
                "SYNCHRONOUS_INVALID", f"synchronous must be one of {SYNCHRONOUS_LEVELS}"
            )
        self.target = PostgresTarget.parse(str(path))
        self.path = self.target.redacted()
        self.busy_retries = 0
        self.checkpoints = None
        self._local = threading.local()
        size = int(os.environ.get(POOL_SIZE_ENV, "4"))
        options = self.target.connect_options()
        self._timeout = float(options["connect_timeout"])
        # One connection first, outside the pool, which would retry a refused one until its
        # timeout and keep the reason to its log: a mistake in the URL is answered at once.
        first_connection(self.target).close()
        self._pool: ConnectionPool[psycopg.Connection[Any]] = ConnectionPool(
            self.target.conninfo,
            kwargs=options,
            min_size=1,
            max_size=max(1, size),
            open=False,
            configure=configure,
            timeout=self._timeout,
            name="aios-ledger",
        )
        try:
            self._pool.open(wait=True, timeout=self._timeout)
        except PoolTimeout:
            self._pool.close(timeout=0)
            raise LedgerError("DATABASE_UNAVAILABLE", f"cannot connect to {self.path}") from None
        try:
            if step is not _SchemaStep.AS_FOUND:
                migrate = step is _SchemaStep.MIGRATE
                plan = self.read(lambda conn: plan_on_open(conn, migrate=migrate))
                if not plan.is_current:
                    self.write(apply_migrations)
        except BaseException:
            self._close_quietly()
            raise

    @property
    def pool_size(self) -> int:
        """The most connections this Database's pool opens (`AIOS_LEDGER_PG_POOL_SIZE`)."""
        return int(self._pool.max_size)

    def start_group_commit(
        self, *, max_batch: int = 64, on_batch: Callable[[int], None] | None = None
    ) -> GroupCommit:
        """SQLite's alone: PostgreSQL's pool runs concurrent writers (`shell/api/backend.py`)."""
        raise LedgerError(
            "USAGE_INVALID",
            "group commit is SQLite's; on PostgreSQL the pool runs concurrent writers",
        )

    def close(self) -> None:
        self._pool.close(timeout=self._timeout)

    def _close_quietly(self) -> None:
        with contextlib.suppress(Exception):
            self._pool.close(timeout=0)

    dense_event_ids = False

    def quiesce_writers(self) -> None:
        self._pg_transaction(READ, lambda conn: fetch_value(conn, "log_quiesce"))

    def write(self, work: Callable[[Any], T], *, row_locked: bool = False) -> T:
        return self._pg_transaction(ROW_LOCKED if row_locked else EXCLUSIVE, work)

    def read(self, work: Callable[[Any], T]) -> T:
        return self._pg_transaction(READ, work)

    def _pg_transaction(self, mode: str, work: Callable[[Any], T]) -> T:
        retries = unavailable = 0
        # Beside other writers, a key or a chain position taken by a transaction that committed
        # after this one read is a unique violation: the retry reads it and decides again (a
        # replay, a conflict, the next position). Under the exclusive lock it cannot happen.
        retryable = (*RETRYABLE, pg_errors.UniqueViolation) if mode == ROW_LOCKED else RETRYABLE
        while True:
            try:
                with self._pool.connection(timeout=self._timeout) as raw:
                    conn = PgConnection(raw, row_locked=mode == ROW_LOCKED, read_only=mode == READ)
                    return self._once(conn, mode, work)
            except _CommitUncertain as exc:
                raise LedgerError(
                    "DATABASE_UNAVAILABLE",
                    f"the connection broke during COMMIT (the outcome is unknown): {exc}",
                ) from None
            except PoolTimeout as exc:
                unavailable += 1
                if unavailable > UNAVAILABLE_RETRIES // 4:
                    raise LedgerError("DATABASE_UNAVAILABLE", str(exc)) from None
                self._sleep(unavailable)
            except psycopg.Error as exc:
                if isinstance(exc, retryable) and retries < RETRIES:
                    retries += 1
                    self.busy_retries += 1
                    self._sleep(retries)
                    continue
                if is_unavailable(exc) and unavailable < UNAVAILABLE_RETRIES:
                    # Nothing was committed (the failure came before COMMIT): try again on
                    # another connection; the pool drops the broken one.
                    unavailable += 1
                    self._sleep(unavailable)
                    continue
                raise pg_error(exc) from None

    @staticmethod
    def _sleep(retry: int) -> None:
        time.sleep(min(0.5, 0.005 * 2**retry) * random.uniform(0.5, 1.5))

    def _once(self, conn: PgConnection, mode: str, work: Callable[[Any], T]) -> T:
        conn.run(mode, None)  # a write: and its lock
        self._local.conn = conn
        try:
            result = work(conn)
        except BaseException:
            self._local.conn = None
            with contextlib.suppress(psycopg.Error):
                if not conn.raw.closed:
                    conn.run("rollback", None)
            raise
        self._local.conn = None
        try:
            conn.run("commit", None)
        except psycopg.Error as exc:
            if is_unavailable(exc):
                raise _CommitUncertain(str(exc)) from exc
            raise
        return result

    @contextmanager
    def cursor_rows(self, name: str, params: Params | None = None) -> Iterator[Iterator[Row]]:
        """Stream a read statement's rows through a server-side cursor, inside the caller's
        transaction (`read` or `write`), without holding them all in memory."""
        conn: PgConnection | None = getattr(self._local, "conn", None)
        if conn is None:
            raise LedgerError("STORAGE_ERROR", "cursor_rows outside a transaction")
        with conn.stream(name, params, f"aios_rows_{next(_CURSOR_NAMES)}") as cursor:
            columns = [] if cursor.description is None else [c.name for c in cursor.description]
            yield (dict(zip(columns, row, strict=True)) for row in cursor)


URL_ENGINES.append(PostgresDatabase)

# libpq's words when the server refuses a database it does not have (its FATAL message in the
# server's language: another language's is answered as DATABASE_UNAVAILABLE, with its words).
_NO_SUCH_DATABASE = re.compile(r'database "(?P<name>(?:[^"]|"")*)" does not exist')


def first_connection(target: PostgresTarget) -> psycopg.Connection[Any]:
    """A connection to `target`'s database, or the reason there is none as a code: a database
    the server does not have is DATABASE_NOT_FOUND; a server that cannot be reached (a refused
    port, a host name that does not resolve, a role refused) is DATABASE_UNAVAILABLE, with
    libpq's reason, which names the host and port."""
    where = target.redacted()
    try:
        return psycopg.connect(target.conninfo, **target.connect_options())
    except psycopg.Error as exc:
        reason = " ".join(str(exc).split()).removeprefix("connection failed: ")
        missing = _NO_SUCH_DATABASE.search(reason)
        if missing is not None:
            raise LedgerError(
                "DATABASE_NOT_FOUND",
                f"the server has no database {missing['name']!r} ({where}): create it "
                f"(createdb {missing['name']}) or name an existing one in the URL",
            ) from None
        raise LedgerError("DATABASE_UNAVAILABLE", f"cannot connect to {where}: {reason}") from None


def require_ledger(url: str) -> None:
    """Refuse a URL whose schema holds no ledger (it does not exist, or holds no table) with
    DATABASE_NOT_FOUND, creating nothing: the command line's counterpart of a missing file
    (only `init` and `migrate` create a ledger)."""
    target = PostgresTarget.parse(url)
    with first_connection(target) as raw:
        try:
            tables = fetch_all(PgConnection(raw), "list_tables")
        except psycopg.Error as exc:
            raise pg_error(exc) from None
    if not tables:
        raise LedgerError(
            "DATABASE_NOT_FOUND",
            f"no ledger in the schema {target.schema!r} of {target.redacted()}: "
            "`aios-ledger --db URL init` creates one (or check ?search_path=)",
        )
