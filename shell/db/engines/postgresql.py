"""PostgreSQL, through psycopg 3: the scale-out engine, for a `postgresql://` URL.

The ledger lives in the schema the URL's `search_path` names. A write takes the ledger's
advisory lock: shared for a task's own transitions (which lock their rows), so writers of
different tasks run side by side; exclusive for every other write, as SQLite's `BEGIN IMMEDIATE`.
A server that is down is retried only while nothing can have been committed; a failure during
COMMIT is answered at once (its outcome is unknown; the idempotency key makes a retry safe).
"""

from __future__ import annotations

import contextlib
import hashlib
import itertools
import os
import random
import re
import secrets
import shutil
import subprocess
import threading
import time
from collections.abc import Callable, Collection, Generator, Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TypeVar
from urllib.parse import unquote

import attrs
import psycopg
from aios_ledger.core import LedgerError, RetryLaterError
from aios_ledger.core.log.merkle import IntegrationBound
from aios_ledger.core.log.seals import LEDGER_CHAIN
from aios_ledger.core.statements import SqlWrite, Statement
from aios_ledger.shell.db.connection import Database, _SchemaStep
from aios_ledger.shell.db.engines import Connection, Listener, Params, Read, Row, check_streamed
from aios_ledger.shell.db.migrator import apply_migrations, known_migrations, plan_on_open
from aios_ledger.shell.db.run import MATCHED_COLUMNS, check_columns, revision_conflict
from aios_ledger.shell.db.statements import statement_texts
from psycopg import errors as pg_errors
from psycopg.types.numeric import Int8Dumper
from psycopg_pool import ConnectionPool, PoolTimeout

T = TypeVar("T")
R = TypeVar("R")

NAME = "postgresql"
DEFAULT_SCHEMA = "aios_ledger"
_SCHEMA_NAME = re.compile(r"[a-z_][a-z0-9_]{0,62}")
_INT64 = range(-(2**63), 2**63)
# A search_path setting inside libpq's `options` (`-c search_path=x`, `--search_path=x`).
_OPTIONS_SEARCH_PATH = re.compile(r"(?:^|\s)(?:-c\s*|--)search_path=(\S*)")


# A statement waits at most a second for another session's lock (then DATABASE_BUSY, not held),
# and a stuck session idle in a transaction is ended so that it cannot hold locks.
SESSION_OPTIONS = "-c lock_timeout=1s -c idle_in_transaction_session_timeout=60s"


@attrs.frozen
class PostgresTarget:
    """libpq's URL (without `search_path`), the ledger's schema, and the URL's own `options`."""

    conninfo: str
    schema: str
    options: str = ""

    @classmethod
    def parse(cls, url: str) -> PostgresTarget:
        """Only the query is taken apart (by libpq's rules); the rest goes to libpq as written, so
        that every form it takes stays intact (`postgresql:///db`, a socket's path)."""
        base, _, query = url.partition("?")
        kept: list[str] = []
        schemas: list[str] = []
        options = ""
        for pair in filter(None, query.split("&")):
            key, sep, value = pair.partition("=")
            if not sep:
                raise LedgerError(
                    "DATABASE_URL_INVALID",
                    f"the URL's parameter {unquote(key)[:60]!r} has no value: write key=value",
                )
            if unquote(key) == "search_path":
                schemas.append(unquote(value))
                continue
            if unquote(key) == "options":
                options = unquote(value)
            kept.append(pair)
        schemas.extend(_OPTIONS_SEARCH_PATH.findall(options))
        schema = schemas[-1] if schemas else DEFAULT_SCHEMA
        if len(set(schemas)) > 1:
            raise LedgerError(
                "DATABASE_URL_INVALID",
                f"the URL names the schemas {sorted(set(schemas))}: give one, as ?search_path=name",
            )
        if not _SCHEMA_NAME.fullmatch(schema):
            raise LedgerError(
                "DATABASE_URL_INVALID",
                "search_path must name one schema of lower-case letters, digits and underscores",
            )
        conninfo = f"{base}?{'&'.join(kept)}" if kept else base
        return cls(conninfo, schema, options)

    def redacted(self) -> str:
        """The URL without its password, with its schema, for messages."""
        base, _, query = self.conninfo.partition("?")
        scheme, _, rest = base.partition("://")
        authority, slash, path = rest.partition("/")
        user, at, host = authority.rpartition("@")
        if at and ":" in user:
            authority = f"{user.partition(':')[0]}:***@{host}"
        pairs = [
            "password=***" if unquote(pair.partition("=")[0]) == "password" else pair
            for pair in filter(None, query.split("&"))
        ]
        pairs.append(f"search_path={self.schema}")
        return f"{scheme}://{authority}{slash}{path}?{'&'.join(pairs)}"

    def connect_options(self) -> dict[str, Any]:
        # The URL's own `options` override the ledger's settings; the schema's comes last to hold.
        options = " ".join(filter(None, (SESSION_OPTIONS, self.options)))
        return {
            "autocommit": True,
            "options": f"{options} -c search_path={self.schema}",
            "connect_timeout": int(os.environ.get("AIOS_LEDGER_PG_CONNECT_TIMEOUT", "5")),
            "application_name": "aios-ledger",
        }


# A `:name` parameter: not the second colon of a `::type` cast, not inside a quoted literal.
PARAMETER = re.compile(r"('(?:[^']|'')*')|(?<![:\w]):([a-z_][a-z0-9_]*)")


def postgresql_text(text: str) -> str:
    """`:name` -> `%(name)s`, and a literal `%` doubled (psycopg reads `%` as a placeholder)."""

    def replace(match: re.Match[str]) -> str:
        if match.group(1) is not None:
            return match.group(1).replace("%", "%%")
        return f"%({match.group(2)})s"

    return PARAMETER.sub(replace, text)


# Each statement's text as written (run without parameters) and as psycopg binds them.
_RAW_TEXTS = statement_texts("postgresql")
TEXTS = {name: postgresql_text(text) for name, text in _RAW_TEXTS.items()}


def _has_rows(cursor: psycopg.Cursor[Any]) -> bool:
    """Whether the statement returned rows, asked of its result (cheaper than `description`)."""
    result = cursor.pgresult
    return result is not None and result.status == psycopg.pq.ExecStatus.TUPLES_OK


def _columns(cursor: psycopg.Cursor[Any]) -> tuple[str, ...] | None:
    description = cursor.description
    return None if description is None else tuple([column.name for column in description])


@attrs.frozen
class _Queued:
    """A statement waiting for the next pipeline batch (a BEGIN, or a plan's checked write)."""

    text: str
    params: dict[str, Any] | None
    write: SqlWrite | None = None
    error: type[LedgerError] = LedgerError


# A row-locked write's events are decided at this id and numbered once decided: it only orders
# them within the transaction.
_PROVISIONAL_EVENT_ID = 1
# A transaction's BEGIN statements, by its mode (a pipeline takes one statement a text).
_BEGIN_STATEMENTS = {
    "begin_immediate": ("begin_read_committed", "writer_settings_exclusive"),
    "begin_row_locked": ("begin_read_committed", "writer_settings_shared"),
    "begin_read": ("begin_read",),
}


def _checked_on_server(text: str) -> str:
    """A compare-and-swap failing on the server unless it changed exactly one row, so that the
    COMMIT in the same pipeline batch commits nothing behind a missed guard."""
    body = text.strip().removesuffix(";")
    return (
        f"WITH changed AS (\n{body}\nRETURNING 1)\nSELECT CAST(CASE count(*) WHEN 1 THEN '1' "
        "ELSE 'REVISION_CONFLICT' END AS integer) FROM changed"
    )


# What PostgreSQL runs for each guarded write of a plan (every one of them is checked there).
_GUARDED_TEXTS = {
    str(statement): _checked_on_server(TEXTS[statement])
    for statement in Statement
    if statement.guarded
}


def _text(name: str, params: Mapping[str, Any] | None) -> tuple[str, dict[str, Any] | None]:
    """A named statement's text and its parameters as psycopg binds them."""
    if params:
        return TEXTS[name], bindable(name, params)
    return _RAW_TEXTS[name], None


class PgConnection:
    """The ledger's `engines.Connection` on one psycopg connection. Round trips are what a
    transition costs, so statements go in pipeline batches: the BEGIN and lock with the first
    reads, a plan's writes with the next reads or the COMMIT."""

    dialect = "postgresql"

    def __init__(
        self, raw: psycopg.Connection[Any], *, row_locked: bool = False, read_only: bool = False
    ) -> None:
        self.raw = raw
        # Shared ledger lock and row locks: plans are numbered once decided.
        self.row_locked = row_locked
        self.read_only = read_only
        self._queued: list[_Queued] = []
        self._begun = False  # a BEGIN is queued or sent
        # Event ids to reserve with the next batch, and those reserved (for `number_events`).
        self._ids_to_reserve = 0
        self._reserved_ids: list[int] = []

    def begin(self, mode: str) -> None:
        self._queued.extend(_Queued(*_text(name, None)) for name in _BEGIN_STATEMENTS[mode])
        self._begun = True

    def commit(self) -> None:
        """What waits and the COMMIT, in one pipeline batch."""
        if self.read_only and not self.in_transaction_on_server:
            self._queued.clear()  # a read that never reached the server: nothing to commit
        else:
            self._round_trip((), commit=True)
        self._begun = False

    def rollback(self) -> None:
        """Drop what waits; roll back what the server began."""
        self._queued.clear()
        self._ids_to_reserve = 0
        self._reserved_ids = []
        self._begun = False
        if not self.raw.closed and self.in_transaction_on_server:
            self.raw.execute(_RAW_TEXTS["rollback"].encode())

    @property
    def in_transaction_on_server(self) -> bool:
        return self.raw.info.transaction_status != psycopg.pq.TransactionStatus.IDLE

    def _round_trip(
        self, items: Sequence[tuple[str, Mapping[str, Any] | None]], *, commit: bool = False
    ) -> list[psycopg.Cursor[Any]]:
        """What waits, `items`, the ids to reserve and (`commit`) COMMIT in one round trip; the
        cursors of `items`."""
        # (text, params, whether its result is read): a statement whose result nobody reads
        # (a BEGIN, an unguarded write, the COMMIT) shares one cursor, as a cursor costs more
        # client CPU than the statement's own binding.
        statements = [
            (waiting.text, waiting.params, _is_guarded(waiting)) for waiting in self._queued
        ]
        statements.extend((*_text(name, params), True) for name, params in items)
        queued, self._queued = self._queued, []
        reserve, self._ids_to_reserve = self._ids_to_reserve, 0
        self._reserved_ids = []
        if reserve:
            statements.append((*_text("log_reserve_event_ids", {"count": reserve}), True))
        if commit:
            statements.append((*_text("commit", None), False))
        cursors: list[psycopg.Cursor[Any] | None] = []
        failed: psycopg.Error | None = None
        try:
            with self.raw.pipeline():
                shared = self.raw.cursor()
                for text, params, read in statements:
                    cursor = self.raw.cursor() if read else shared
                    cursor.execute(text, params)
                    cursors.append(cursor if read else None)
        except psycopg.Error as exc:
            failed = exc
        _check_writes(queued, cursors, failed)
        if failed is not None:
            raise failed
        if reserve:
            reserved = cursors[len(queued) + len(items)]
            assert reserved is not None
            self._reserved_ids = [int(row[0]) for row in reserved]
        answered = cursors[len(queued) : len(queued) + len(items)]
        return [cursor for cursor in answered if cursor is not None]

    def flush(self) -> None:
        if self._queued or self._ids_to_reserve:
            self._round_trip(())

    def run(self, name: str, params: Mapping[str, Any] | None) -> psycopg.Cursor[Any]:
        return self._round_trip(((name, params),))[0]

    def run_many(self, name: str, rows: Sequence[Mapping[str, Any]]) -> None:
        self.flush()
        with self.raw.cursor() as cursor:
            cursor.executemany(TEXTS[name], [bindable(name, row) for row in rows])

    def stream(
        self, name: str, params: Mapping[str, Any] | None, cursor_name: str
    ) -> psycopg.ServerCursor[Any]:
        """A server-side cursor over a read statement: rows come in pages, never all at once."""
        self.flush()
        cursor = self.raw.cursor(name=cursor_name)
        cursor.itersize = 2000
        if params:
            cursor.execute(TEXTS[name], bindable(name, params))
        else:
            cursor.execute(_RAW_TEXTS[name])
        return cursor

    def execute(
        self, text: str, params: Mapping[str, Any] | Sequence[Any] | None = None
    ) -> psycopg.Cursor[Any]:
        """Ad-hoc SQL for tools and tests, as apsw takes it (`:name` or `?` parameters)."""
        self.flush()
        if isinstance(params, Mapping):
            return self.raw.execute(postgresql_text(text).encode(), bindable("sql", params))
        if params:
            return self.raw.execute(text.replace("?", "%s").encode(), list(params))
        return self.raw.execute(text.encode())

    def run_script(self, text: str) -> None:
        self.flush()
        self.raw.execute(text.encode("utf-8"))

    @property
    def in_transaction(self) -> bool:
        return self._begun or self.in_transaction_on_server

    def fetch_all(self, name: str, params: Params | None = None) -> list[Row]:
        found = self.run(name, params)
        names = _columns(found)
        return [] if names is None else [dict(zip(names, row, strict=True)) for row in found]

    def fetch_record(self, name: str, params: Params | None, record: type[R] | None) -> Any:
        found = self.run(name, params)
        if not _has_rows(found):  # a statement that returns no rows: nothing to read
            return None
        for row in found:
            if record is None:
                return row[0]
            if (name, record) not in MATCHED_COLUMNS:
                check_columns(_columns(found) or (), name, record)
            return record(*row)
        return None

    def fetch_together(self, reads: Sequence[Read], *, appending: int = 0) -> list[list[Any]]:
        if not reads:
            return []
        if self.row_locked:  # a row-locked plan's ids are reserved after the rows its reads lock
            self._ids_to_reserve = appending
        try:
            # Each read has its own snapshot: one after a locking read sees what was committed
            # before the lock was granted.
            cursors = self._round_trip([(name, params) for name, params, _ in reads])
        except LedgerError:
            # A parameter refused before anything was sent: nothing is reserved for it.
            self._ids_to_reserve = 0
            raise
        found = []
        for (name, _, record), cursor in zip(reads, cursors, strict=True):
            rows = cursor.fetchall() if _has_rows(cursor) else []
            if record is None:
                found.append([row[0] for row in rows])
                continue
            if rows and (name, record) not in MATCHED_COLUMNS:
                check_columns(_columns(cursor) or (), name, record)
            found.append([record(*row) for row in rows])
        return found

    def fetch_ahead(self, reads: Sequence[Read], *, appending: int) -> list[list[Any]] | None:
        return self.fetch_together(reads, appending=appending)

    def stream_records(
        self, name: str, params: Params | None, record: type[R]
    ) -> Generator[R, None, None]:
        found = self.run(name, params)
        for row in found:
            if (name, record) not in MATCHED_COLUMNS:
                check_columns(_columns(found) or (), name, record)
            yield record(*row)

    @contextmanager
    def stream_tuples(
        self, name: str, columns: tuple[str, ...]
    ) -> Iterator[Iterator[tuple[Any, ...]]]:
        with self.stream(name, None, f"aios_verify_{name}") as streamed:
            check_streamed(name, _columns(streamed) or columns, columns)
            yield iter(streamed)

    def run_write(self, name: str, params: Params | None = None) -> int:
        return max(self.run(name, params).rowcount, 0)

    def run_plan(self, writes: Sequence[SqlWrite], error: type[LedgerError]) -> None:
        """A plan's statements wait for the next pipeline batch; their row counts are checked when
        they are back. Parameters are checked now, so that a bad one is this plan's error."""
        for write in writes:
            name = str(write.statement)
            text, params = _text(name, write.params)
            if write.statement.guarded:
                text = _GUARDED_TEXTS[name]
            self._queued.append(_Queued(text, params, write, error))

    def prepare_schema(self) -> None:
        """The search_path's schema, under the write lock so that two first opens do not race."""
        self.run_write("create_search_path_schema")

    def first_event_id(self, chains: Collection[str]) -> int:
        """Exclusive: from the sequence; row-locked: provisional (never on the ledger chain, whose
        tip only the exclusive lock serializes); a read peeks and draws no id."""
        if self.read_only:
            return int(self.fetch_record("copy_event_id_counter", None, None)) + 1
        if self.row_locked:
            if LEDGER_CHAIN in chains:
                raise LedgerError(
                    "STORAGE_ERROR", "a row-locked write may not extend the ledger chain"
                )
            return _PROVISIONAL_EVENT_ID
        return int(self.fetch_record("log_next_event_id", None, None))

    integrates_inline = False

    def integration_bound(self, waiting: Sequence[str]) -> IntegrationBound:
        [found] = self.fetch_all("merkle_integration_bound", {"waiting": ",".join(waiting)})
        return IntegrationBound(
            int(found["still_running"]), int(found["sequence"]), tuple(found["in_progress"])
        )

    def number_events(self, first: int, count: int) -> list[int]:
        """Exclusive: the ids decided, the sequence set past them. Row-locked: ids reserved after
        the plan's rows were locked (so above every id of its chains committed before)."""
        if not self.row_locked:
            self._queued.append(
                _Queued(*_text("log_event_ids_used", {"next_event_id": first + count}))
            )
            return list(range(first, first + count))
        if not count:
            return []
        reserved = self._reserved_ids
        if len(reserved) >= count:
            self._reserved_ids = reserved[count:]
            return reserved[:count]
        self._reserved_ids = []
        found = self.fetch_all("log_reserve_event_ids", {"count": count})
        return [int(row["event_id"]) for row in found]


def _is_guarded(waiting: _Queued) -> bool:
    return waiting.write is not None and waiting.write.statement.guarded


def _check_writes(
    queued: Sequence[_Queued],
    cursors: Sequence[psycopg.Cursor[Any] | None],
    failed: psycopg.Error | None,
) -> None:
    """A guarded write of the batch that changed other than one row, or failed on the server
    for it, is REVISION_CONFLICT. Only guarded writes have cursors of their own: the first of
    them without a result is the one that failed, or came after the failure."""
    for index, waiting in enumerate(queued):
        if waiting.write is None or not waiting.write.statement.guarded:
            continue
        cursor = cursors[index] if index < len(cursors) else None
        if cursor is None or cursor.pgresult is None:
            if isinstance(
                failed, pg_errors.InvalidTextRepresentation
            ) and "REVISION_CONFLICT" in str(failed):
                raise revision_conflict(waiting.error, waiting.write.statement, 0) from None
            return
        changed = max(cursor.rowcount, 0)
        if changed != 1:
            raise revision_conflict(waiting.error, waiting.write.statement, changed)


def configure(raw: psycopg.Connection[Any]) -> None:
    """Every int goes over as int8, so a prepared statement keeps one parameter type."""
    raw.adapters.register_dumper(int, Int8Dumper)


def bindable(name: str, params: Mapping[str, Any]) -> dict[str, Any]:
    """The parameters as PostgreSQL takes them, or the error SQLite's binding would give."""
    checked: dict[str, Any] = {}
    for key, given in params.items():
        # Most parameters are ASCII text, small ints or NULL: passed without the checks below.
        kind = type(given)
        if (
            given is None
            or (kind is str and given.isascii() and "\0" not in given)
            or (kind is int and -(2**63) <= given < 2**63)
        ):
            checked[key] = given
            continue
        value = int(given) if isinstance(given, bool) else given
        if isinstance(value, str):
            if "\0" in value:
                raise LedgerError("TEXT_INVALID", f"{name}: PostgreSQL text cannot hold NUL")
            try:
                value.encode("utf-8")
            except UnicodeEncodeError:
                raise LedgerError(
                    "TEXT_INVALID", f"{name}: a parameter is not valid UTF-8 text"
                ) from None
        elif isinstance(value, int):
            if value not in _INT64:
                raise LedgerError("PARAMETER_INVALID", f"{name}: {key} is beyond 64 bits")
        elif value is not None and not isinstance(value, float | bytes):
            raise LedgerError(
                "PARAMETER_INVALID", f"{name}: {key} is a {type(value).__name__}, not bindable"
            )
        checked[key] = value
    return checked


# SQLSTATEs a writer retries: the transaction lost a race the server resolved by aborting it.
RETRYABLE = (pg_errors.SerializationFailure, pg_errors.DeadlockDetected)
# The codes of the errors `pg_error` does not tell apart first, in order.
_CODES: tuple[tuple[type[psycopg.Error] | tuple[type[psycopg.Error], ...], str], ...] = (
    (RETRYABLE, "DATABASE_BUSY"),
    (pg_errors.DiskFull, "STORAGE_FULL"),
    ((pg_errors.InsufficientPrivilege, pg_errors.ReadOnlySqlTransaction), "DATABASE_READ_ONLY"),
    ((pg_errors.CharacterNotInRepertoire, pg_errors.UntranslatableCharacter), "TEXT_INVALID"),
    (pg_errors.NumericValueOutOfRange, "PARAMETER_INVALID"),
)


def is_unavailable(exc: BaseException) -> bool:
    """The server is down, restarting, or the connection to it broke."""
    return isinstance(
        exc,
        psycopg.OperationalError
        | pg_errors.AdminShutdown
        | pg_errors.CrashShutdown
        | pg_errors.CannotConnectNow,
    ) and not isinstance(exc, pg_errors.QueryCanceled | pg_errors.LockNotAvailable)


def unavailable_error(detail: str) -> RetryLaterError:
    """`DATABASE_UNAVAILABLE`, which time may lift: the API answers it with `Retry-After`."""
    return RetryLaterError("DATABASE_UNAVAILABLE", detail, retry_after=UNAVAILABLE_RETRY_AFTER)


def pg_error(exc: psycopg.Error) -> LedgerError:
    """psycopg's error as the ledger's stable code (the server's message in the detail)."""
    detail = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    if isinstance(exc, pg_errors.IntegrityError):
        return LedgerError("CONSTRAINT_VIOLATION", detail)
    if is_unavailable(exc):
        return unavailable_error(detail)
    if isinstance(exc, pg_errors.LockNotAvailable):  # past lock_timeout: lifting it is the holder's
        return RetryLaterError(
            "DATABASE_BUSY",
            f"{detail} (another session holds a lock the ledger needs)",
            retry_after=UNAVAILABLE_RETRY_AFTER,
        )
    for kinds, code in _CODES:
        if isinstance(exc, kinds):
            return LedgerError(code, detail)
    return LedgerError("STORAGE_ERROR", f"{type(exc).__name__}: {detail}")


RETRIES = 8
# The transaction a work runs in: its BEGIN statement (sql/postgresql/connection.sql).
EXCLUSIVE = "begin_immediate"
ROW_LOCKED = "begin_row_locked"
READ = "begin_read"
# How long a transaction waits for a server that is down; once one was refused, how long the next
# ones wait for a connection; and the Retry-After a refused client is told.
UNAVAILABLE_PATIENCE = 1.0
DOWN_PATIENCE = 0.25
UNAVAILABLE_RETRY_AFTER = 1
# The pool's reconnect attempts end this soon, so that the next request retries at once.
RECONNECT_SECONDS = 2.0
POOL_SIZE_ENV = "AIOS_LEDGER_PG_POOL_SIZE"
_CURSOR_NAMES = itertools.count(1)


class _PgListener:
    """A LISTENing connection: psycopg's `notifies` wait for the server's notifications."""

    def __init__(self, raw: psycopg.Connection[Any]) -> None:
        self._raw = raw

    def wait(self, timeout: float) -> bool:
        try:
            for _ in self._raw.notifies(timeout=timeout, stop_after=1):
                return True
        except psycopg.Error as exc:
            raise pg_error(exc) from None
        return False

    def close(self) -> None:
        self._raw.close()


class _CommitUncertain(Exception):
    """The connection broke while COMMIT was on its way: the outcome is unknown."""


class PostgresDatabase(Database):
    """A ledger in a PostgreSQL schema; made by `Database(url)` (see `Database`)."""

    engine = NAME
    driver_error = psycopg.Error
    takes_copies = True
    dense_event_ids = False
    integrates_inline = False

    def _open(self, path: Any, synchronous: str, vfs: str | None, step: _SchemaStep) -> None:
        if vfs is not None:
            raise LedgerError("DATABASE_URL_INVALID", "a VFS is SQLite's: not for a URL")
        self.target = PostgresTarget.parse(str(path))
        self.path = self.target.redacted()
        self.busy_retries = 0
        self._local = threading.local()
        size = int(os.environ.get(POOL_SIZE_ENV, "4"))
        options = self.target.connect_options()
        self._timeout = float(options["connect_timeout"])
        # Set when a transaction was refused DATABASE_UNAVAILABLE, cleared when one commits.
        self._down = False
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
            reconnect_timeout=RECONNECT_SECONDS,
            name="aios-ledger",
        )
        try:
            self._pool.open(wait=True, timeout=self._timeout)
        except PoolTimeout:
            self._pool.close(timeout=0)
            raise LedgerError("DATABASE_UNAVAILABLE", f"cannot connect to {self.path}") from None
        try:
            if not plan_on_open(self, step).is_current:
                self.write_schema(apply_migrations)
        except BaseException:
            self._close_quietly()
            raise

    @property
    def pool_size(self) -> int:
        """The most connections this Database's pool opens (`AIOS_LEDGER_PG_POOL_SIZE`)."""
        return int(self._pool.max_size)

    def close(self) -> None:
        self._pool.close(timeout=self._timeout)

    def _close_quietly(self) -> None:
        with contextlib.suppress(Exception):
            self._pool.close(timeout=0)

    def quiesce_writers(self) -> None:
        # An exclusive writer's lock, taken in a read and let go at its end.
        self._pg_transaction(
            READ, lambda conn: conn.fetch_record("writer_settings_exclusive", None, None)
        )

    def notify(self, channel: str) -> None:
        try:
            with self._pool.connection(
                timeout=self._connection_patience(UNAVAILABLE_PATIENCE)
            ) as raw:
                raw.execute(*_text("notify", {"channel": channel}))
        except PoolTimeout as exc:
            raise unavailable_error(str(exc)) from None
        except psycopg.Error as exc:
            raise pg_error(exc) from None

    def listen(self, channel: str) -> Listener:
        """LISTEN on a connection of its own, outside the pool."""
        raw = first_connection(self.target)
        try:
            raw.execute(_RAW_TEXTS[f"listen_{channel}"].encode())
        except psycopg.Error as exc:
            raw.close()
            raise pg_error(exc) from None
        return _PgListener(raw)

    def files_dir(self, kind: str) -> Path:
        """`$AIOS_LEDGER_<KIND>_DIR`, else a folder per ledger (by its URL's digest) under
        `$XDG_DATA_HOME`: there is no database file to stand beside."""
        configured = os.environ.get(f"AIOS_LEDGER_{kind.upper()}_DIR")
        if configured:
            return Path(configured)
        data_home = os.environ.get("XDG_DATA_HOME") or str(Path.home() / ".local" / "share")
        ledger = hashlib.sha256(str(self.path).encode("utf-8")).hexdigest()[:16]
        return Path(data_home, "aios-ledger", kind, ledger)

    def write(
        self, work: Callable[[Connection], T], *, row_locked: bool = False, urgent: bool = False
    ) -> T:
        return self._pg_transaction(ROW_LOCKED if row_locked else EXCLUSIVE, work)

    def read(self, work: Callable[[Connection], T]) -> T:
        return self._pg_transaction(READ, work)

    def _connection_patience(self, left: float) -> float:
        """How long to wait for a connection of the pool, with `left` seconds of patience."""
        return min(left, DOWN_PATIENCE) if self._down else left

    def _pg_transaction(self, mode: str, work: Callable[[Connection], T]) -> T:
        try:
            result = self._pg_attempts(mode, work)
        except RetryLaterError as refused:
            if refused.code == "DATABASE_UNAVAILABLE":
                self._down = True
            raise
        self._down = False
        return result

    def _pg_attempts(self, mode: str, work: Callable[[Connection], T]) -> T:
        retries = unavailable = 0
        give_up_at = time.monotonic() + UNAVAILABLE_PATIENCE
        # Beside other writers, a key taken by a transaction that committed after this one read
        # is a unique violation: the retry reads it and decides again.
        retryable = (*RETRYABLE, pg_errors.UniqueViolation) if mode == ROW_LOCKED else RETRYABLE
        while True:
            left = give_up_at - time.monotonic()
            try:
                with self._pool.connection(timeout=self._connection_patience(left)) as raw:
                    conn = PgConnection(raw, row_locked=mode == ROW_LOCKED, read_only=mode == READ)
                    return self._once(conn, mode, work)
            except _CommitUncertain as exc:
                if mode == READ and time.monotonic() < give_up_at:
                    # A read's COMMIT changes nothing whatever its outcome: read again.
                    unavailable += 1
                    self._sleep(unavailable)
                    continue
                raise unavailable_error(
                    f"the connection broke during COMMIT (the outcome is unknown): {exc}"
                ) from None
            except PoolTimeout as exc:
                raise unavailable_error(str(exc)) from None
            except psycopg.Error as exc:
                if isinstance(exc, retryable) and retries < RETRIES:
                    retries += 1
                    self.busy_retries += 1
                    self._sleep(retries)
                    continue
                if is_unavailable(exc) and time.monotonic() < give_up_at:
                    # Nothing was committed: try again on another connection.
                    unavailable += 1
                    self._sleep(unavailable)
                    continue
                raise pg_error(exc) from None

    @staticmethod
    def _sleep(retry: int) -> None:
        time.sleep(min(0.5, 0.005 * 2**retry) * random.uniform(0.5, 1.5))

    def _once(self, conn: PgConnection, mode: str, work: Callable[[Connection], T]) -> T:
        conn.begin(mode)  # a write: and its lock; sent with the first reads
        self._local.conn = conn
        try:
            result = work(conn)
        except BaseException:
            with contextlib.suppress(psycopg.Error):
                conn.rollback()
            raise
        finally:
            self._local.conn = None
        try:
            # The plan's writes go with the COMMIT: a broken connection leaves the outcome unknown.
            conn.commit()
        except BaseException as exc:
            if isinstance(exc, psycopg.Error) and is_unavailable(exc):
                raise _CommitUncertain(str(exc)) from exc
            with contextlib.suppress(psycopg.Error):
                conn.rollback()
            raise
        return result

    @contextmanager
    def cursor_rows(self, name: str, params: Params | None = None) -> Iterator[Iterator[Row]]:
        """A read statement's rows through a server-side cursor, in the caller's transaction."""
        conn: PgConnection | None = getattr(self._local, "conn", None)
        if conn is None:
            raise LedgerError("STORAGE_ERROR", "cursor_rows outside a transaction")
        with conn.stream(name, params, f"aios_rows_{next(_CURSOR_NAMES)}") as cursor:
            columns = _columns(cursor) or ()
            yield (dict(zip(columns, row, strict=True)) for row in cursor)


# libpq's words for a database the server does not have (in English; else DATABASE_UNAVAILABLE).
_NO_SUCH_DATABASE = re.compile(r'database "(?P<name>(?:[^"]|"")*)" does not exist')


def first_connection(target: PostgresTarget) -> psycopg.Connection[Any]:
    """A connection to `target`'s database; else DATABASE_NOT_FOUND (no such database) or
    DATABASE_UNAVAILABLE with libpq's reason."""
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
    """DATABASE_NOT_FOUND for a schema that holds no ledger, creating nothing."""
    target = PostgresTarget.parse(url)
    with first_connection(target) as raw:
        try:
            tables = PgConnection(raw).fetch_all("list_tables")
        except psycopg.Error as exc:
            raise pg_error(exc) from None
    if not tables:
        raise LedgerError(
            "DATABASE_NOT_FOUND",
            f"no ledger in the schema {target.schema!r} of {target.redacted()}: "
            "`aios-ledger --db URL init` creates one (or check ?search_path=)",
        )


def require_creatable(target: str) -> None:
    """`init` creates the schema itself; `first_connection` refuses a missing database."""


SCHEMA_HEADER = """\
-- aios-ledger's PostgreSQL schema after all migrations (`aios-ledger --db URL schema-dump`).
-- Every name lives in the schema the connection's search_path names first.
"""
_NOISE = re.compile(r"^(--.*|SET .*|SELECT pg_catalog\.set_config.*|CREATE SCHEMA .*|\\.*)$")


def schema_sql(target: str | None) -> str:
    """pg_dump's schema of a scratch schema migrated in `target`'s database, dropped after."""
    if target is None:
        raise LedgerError("USAGE_INVALID", "PostgreSQL's schema is dumped from a server: give --db")
    pg_dump = shutil.which("pg_dump")
    if pg_dump is None:
        raise LedgerError("TOOL_NOT_FOUND", "pg_dump is not on PATH")
    scratch = f"aios_schema_dump_{secrets.token_hex(4)}"
    parsed = PostgresTarget.parse(target)
    scratch_url = PostgresTarget(parsed.conninfo, scratch).redacted()
    try:
        PostgresDatabase(scratch_url).close()
        dumped = subprocess.run(
            [
                pg_dump,
                "--schema-only",
                "--no-owner",
                "--no-privileges",
                "-n",
                scratch,
                f"--dbname={parsed.conninfo}",
            ],
            env={"PATH": "/usr/bin:/bin", "PGCONNECT_TIMEOUT": "5"},
            capture_output=True,
            text=True,
            check=False,
        )
    finally:
        with PostgresDatabase.as_found(scratch_url) as db:
            db.write(lambda conn: conn.run_write("drop_search_path_schema", None))
    if dumped.returncode != 0:
        raise LedgerError("TOOL_FAILED", f"pg_dump: {dumped.stderr.strip()[:500]}")
    lines = [
        line.replace(f"{scratch}.", "")
        for line in dumped.stdout.splitlines()
        if not _NOISE.match(line)
    ]
    body = re.sub(r"\n{3,}", "\n\n", "\n".join(lines)).strip()
    versions = ", ".join(m.version for m in known_migrations("postgresql"))
    return f"{SCHEMA_HEADER}-- migrations: {versions}\n\n{body}\n"


DATABASE = PostgresDatabase
