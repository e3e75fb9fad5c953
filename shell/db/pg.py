"""PostgreSQL below the helpers of `run`: a ledger URL, the connection a transaction's work gets,
running a named statement on it, and psycopg's errors as the ledger's codes.

A URL (`postgresql://` or `postgres://`) selects PostgreSQL wherever a path selects SQLite. Its
`search_path` query parameter (as dbmate reads it), or a `search_path` set in libpq's `options`
parameter, names the schema the ledger lives in, default `aios_ledger`; the rest of the URL is
libpq's, handed over as written. A URL of any other scheme is refused, never taken as a file.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping, Sequence
from typing import Any
from urllib.parse import unquote

import attrs
import psycopg
from aios_ledger.core import LedgerError
from aios_ledger.shell.db.statements import postgresql_text, statement_texts, statements
from psycopg import errors as pg_errors
from psycopg.types.numeric import Int8Dumper

URL_SCHEMES = ("postgresql", "postgres")
DEFAULT_SCHEMA = "aios_ledger"
_SCHEMA_NAME = re.compile(r"[a-z_][a-z0-9_]{0,62}")
_INT64 = range(-(2**63), 2**63)
# What reads as a URL (RFC 3986's scheme, then `//`) rather than a file name that holds a colon.
_URL_SHAPE = re.compile(r"([A-Za-z][A-Za-z0-9+.-]*)://")
# A search_path setting inside libpq's `options` (`-c search_path=x`, `-csearch_path=x`,
# `--search_path=x`).
_OPTIONS_SEARCH_PATH = re.compile(r"(?:^|\s)(?:-c\s*|--)search_path=(\S*)")
SUPPORTED_FORMS = (
    "a SQLite file's path (e.g. ./ledger.db), or a PostgreSQL URL: postgresql://user@host:port/"
    "dbname, postgres://..., postgresql:///dbname for the local socket, with ?search_path=schema "
    "to choose the ledger's schema (default aios_ledger)"
)


def url_scheme(target: object) -> str | None:
    """The scheme of `target` when it reads as a URL (`scheme://...`), else None (a file name)."""
    if not isinstance(target, str):
        return None
    shape = _URL_SHAPE.match(target)
    return shape.group(1).lower() if shape else None


def is_database_url(target: object) -> bool:
    """Whether `target` (a path or a URL) names a PostgreSQL database."""
    return url_scheme(target) in URL_SCHEMES


def refuse_unsupported_url(target: str) -> None:
    """A URL of another scheme (`mysql://`, `sqlite://`, `http://`) is a mistake, never a file
    name: SQLite would take `mysql://h/db` as the file `db` in the folder `mysql:/h`."""
    scheme = url_scheme(target)
    if scheme is not None and scheme not in URL_SCHEMES:
        raise LedgerError(
            "DATABASE_URL_UNSUPPORTED",
            f"{target[:200]!r}: {scheme}:// is not a database this ledger opens; give "
            + SUPPORTED_FORMS,
        )


@attrs.frozen
class PostgresTarget:
    """A ledger on PostgreSQL: libpq's URL (without `search_path`), the ledger's schema, and the
    URL's own `options` (libpq's; the schema's setting is added to them on connect)."""

    conninfo: str
    schema: str
    options: str = ""

    @classmethod
    def parse(cls, url: str) -> PostgresTarget:
        """Only the query is taken apart, by libpq's rules (`&`-separated `key=value`, percent-
        decoded, `+` is a plus); the rest goes to libpq as written, so that every form it takes
        stays intact (`postgresql:///db`, `postgresql://%2Fvar%2Frun%2Fpostgresql/db`)."""
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
        # The URL's own `options` stay (a statement_timeout, say); the schema's setting comes
        # last, so that it is the one that holds.
        schema_option = f"-c search_path={self.schema}"
        return {
            "autocommit": True,
            "options": f"{self.options} {schema_option}" if self.options else schema_option,
            "connect_timeout": int(os.environ.get("AIOS_LEDGER_PG_CONNECT_TIMEOUT", "5")),
            "application_name": "aios-ledger",
        }


_TEXTS = statement_texts("postgresql")


def _raw_texts() -> dict[str, str]:
    return {name: s.sql for name, s in statements("aios_ledger.sql.postgresql").items()}


_RAW_TEXTS = _raw_texts()


class PgConnection:
    """What a transaction's work gets on PostgreSQL: one psycopg connection (autocommit, its
    transactions are the Database's own BEGIN/COMMIT), for the helpers of `run`."""

    dialect = "postgresql"

    def __init__(
        self, raw: psycopg.Connection[Any], *, row_locked: bool = False, read_only: bool = False
    ) -> None:
        self.raw = raw
        # Its transaction holds the ledger lock shared (beside other writers) and locks rows.
        self.row_locked = row_locked
        # Its transaction reads only (a preview decides, and draws no id).
        self.read_only = read_only

    def run(self, name: str, params: Mapping[str, Any] | None) -> psycopg.Cursor[Any]:
        cursor = self.raw.cursor()
        if params:
            cursor.execute(_TEXTS[name], bindable(name, params))
        else:
            cursor.execute(_RAW_TEXTS[name])
        return cursor

    def run_together(
        self, items: Sequence[tuple[str, Mapping[str, Any] | None]]
    ) -> list[psycopg.Cursor[Any]]:
        """Reads in one pipeline (one round trip), their cursors in order: the server runs
        them one after the other, each on a snapshot of its own, so a read after a locking
        read sees what was committed before the lock was granted."""
        cursors: list[psycopg.Cursor[Any]] = []
        with self.raw.pipeline():
            for name, params in items:
                cursor = self.raw.cursor()
                if params:
                    cursor.execute(_TEXTS[name], bindable(name, params))
                else:
                    cursor.execute(_RAW_TEXTS[name])
                cursors.append(cursor)
        return cursors

    def run_pipeline(
        self, items: Sequence[tuple[str, Mapping[str, Any]]]
    ) -> tuple[list[int], psycopg.Error | None]:
        """A plan's statements in one pipeline (one round trip): the rows each changed, as far
        as they ran, and the error that stopped them, if one did (the transaction is then
        aborted: the caller raises, and the Database rolls back)."""
        cursors: list[psycopg.Cursor[Any]] = []
        failed: psycopg.Error | None = None
        try:
            with self.raw.pipeline():
                for name, params in items:
                    cursor = self.raw.cursor()
                    cursor.execute(_TEXTS[name], bindable(name, params))
                    cursors.append(cursor)
        except psycopg.Error as exc:
            failed = exc
        counts = []
        for cursor in cursors:
            if cursor.pgresult is None:
                break
            counts.append(max(cursor.rowcount, 0))
        return counts, failed

    def run_many(self, name: str, rows: Sequence[Mapping[str, Any]]) -> None:
        """One statement over many rows, pipelined (psycopg's executemany)."""
        with self.raw.cursor() as cursor:
            cursor.executemany(_TEXTS[name], [bindable(name, row) for row in rows])

    def stream(
        self, name: str, params: Mapping[str, Any] | None, cursor_name: str
    ) -> psycopg.ServerCursor[Any]:
        """A server-side cursor over a read statement (inside the caller's transaction), for
        reads that stream a whole table: rows come in pages, never all at once."""
        cursor = self.raw.cursor(name=cursor_name)
        cursor.itersize = 2000
        if params:
            cursor.execute(_TEXTS[name], bindable(name, params))
        else:
            cursor.execute(_RAW_TEXTS[name])
        return cursor

    def execute(
        self, text: str, params: Mapping[str, Any] | Sequence[Any] | None = None
    ) -> psycopg.Cursor[Any]:
        """Ad-hoc SQL, as apsw's `Connection.execute` takes it (`:name` or `?` parameters):
        for tools and tests that look at a ledger's tables; the ledger itself names its
        statements (`run`)."""
        if isinstance(params, Mapping):
            return self.raw.execute(postgresql_text(text).encode(), bindable("sql", params))
        if params:
            return self.raw.execute(text.replace("?", "%s").encode(), list(params))
        return self.raw.execute(text.encode())

    def script(self, text: str) -> None:
        """A migration's section: several statements, no parameters."""
        self.raw.execute(text.encode("utf-8"))

    @property
    def in_transaction(self) -> bool:
        return self.raw.info.transaction_status != psycopg.pq.TransactionStatus.IDLE


def configure(raw: psycopg.Connection[Any]) -> None:
    """Every int goes over as int8, so a prepared statement keeps one parameter type."""
    raw.adapters.register_dumper(int, Int8Dumper)


def bindable(name: str, params: Mapping[str, Any]) -> dict[str, Any]:
    """The parameters as PostgreSQL takes them, or the error SQLite's binding would give:
    only text, integers of 64 bits, floats, bytes and NULL (psycopg would turn a list into
    an array); text that is not UTF-8 or holds NUL (PostgreSQL's text cannot) is TEXT_INVALID."""
    checked: dict[str, Any] = {}
    for key, given in params.items():
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
_CONSTRAINTS = (pg_errors.IntegrityError,)


def is_unavailable(exc: BaseException) -> bool:
    """The server is down, restarting, or the connection to it broke."""
    return isinstance(
        exc,
        psycopg.OperationalError
        | pg_errors.AdminShutdown
        | pg_errors.CrashShutdown
        | pg_errors.CannotConnectNow,
    ) and not isinstance(exc, pg_errors.QueryCanceled | pg_errors.LockNotAvailable)


def pg_error(exc: psycopg.Error) -> LedgerError:
    """psycopg's error as the ledger's stable code (the server's message in the detail)."""
    detail = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    if isinstance(exc, _CONSTRAINTS):
        return LedgerError("CONSTRAINT_VIOLATION", detail)
    if is_unavailable(exc):
        return LedgerError("DATABASE_UNAVAILABLE", detail)
    if isinstance(exc, RETRYABLE):
        return LedgerError("DATABASE_BUSY", detail)
    if isinstance(exc, pg_errors.DiskFull):
        return LedgerError("STORAGE_FULL", detail)
    if isinstance(exc, pg_errors.InsufficientPrivilege):
        return LedgerError("DATABASE_READ_ONLY", detail)
    if isinstance(exc, pg_errors.ReadOnlySqlTransaction):
        return LedgerError("DATABASE_READ_ONLY", detail)
    if isinstance(exc, pg_errors.CharacterNotInRepertoire | pg_errors.UntranslatableCharacter):
        return LedgerError("TEXT_INVALID", detail)
    if isinstance(exc, pg_errors.NumericValueOutOfRange):
        return LedgerError("PARAMETER_INVALID", detail)
    return LedgerError("STORAGE_ERROR", f"{type(exc).__name__}: {detail}")
