"""The Database: one apsw connection with the ledger's pragmas, its transactions, and the
schema step on open. The only place that opens a connection for the stores.

Every write runs as `BEGIN IMMEDIATE … COMMIT` through `Database.write`, which retries a busy
database a bounded number of times and turns every storage failure into a `LedgerError`, after
rolling back, so that a caller never sees an apsw exception and never a half-applied write.
The statements inside run through the helpers of `run` (re-exported here with the
Database they run in); the migrator (`migrator`) and the WAL copying (`checkpointer`) are
modules of their own.
"""

from __future__ import annotations

import contextlib
import enum
import functools
import os
import random
import stat
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, ParamSpec, TypeVar

import apsw
from aios_ledger.core import LedgerError
from aios_ledger.shell.db.checkpointer import CheckpointRounds, install_checkpoint_rounds
from aios_ledger.shell.db.migrator import apply_migrations, plan_on_open
from aios_ledger.shell.db.pg import is_database_url, refuse_unsupported_url
from aios_ledger.shell.db.run import (
    Connection,
    Params,
    Row,
    execute,
    fetch_all,
    fetch_one,
    fetch_record,
    fetch_value,
    run_statement,
    stream_records,
)
from aios_ledger.shell.db.statements import statement_texts

if TYPE_CHECKING:
    from aios_ledger.shell.db.group_commit import GroupCommit

__all__ = [
    "DEFAULT_PATH_ENV",
    "Connection",
    "Database",
    "Params",
    "Row",
    "database_file_exists",
    "execute",
    "fetch_all",
    "fetch_one",
    "fetch_record",
    "fetch_value",
    "is_database_url",
    "resolve_path",
    "run_statement",
    "storage_error",
    "stream_records",
]

T = TypeVar("T")
P = ParamSpec("P")

BUSY_TIMEOUT_MS = 5000
BUSY_RETRIES = 12
SYNCHRONOUS_LEVELS = ("FULL", "NORMAL")
DEFAULT_PATH_ENV = "AIOS_LEDGER_DB"

_STORAGE_ERRORS: tuple[tuple[type[BaseException], str], ...] = (
    (apsw.FullError, "STORAGE_FULL"),
    (apsw.IOError, "STORAGE_IO_ERROR"),
    (apsw.CorruptError, "DATABASE_CORRUPT"),
    (apsw.NotADBError, "DATABASE_CORRUPT"),
    (apsw.ReadOnlyError, "DATABASE_READ_ONLY"),
    (apsw.CantOpenError, "DATABASE_CANNOT_OPEN"),
    (apsw.ConstraintError, "CONSTRAINT_VIOLATION"),
)


_TEXTS = statement_texts()
_BEGIN_IMMEDIATE = _TEXTS["begin_immediate"]
_BEGIN_READ = _TEXTS["begin_read"]
_COMMIT = _TEXTS["commit"]


# What to do about a storage failure of a file, after SQLite's words and the file's name.
_ADVICE = {
    "DATABASE_CORRUPT": (
        "it is not a SQLite database, or it is damaged: check that --db names the ledger's "
        "file; otherwise restore it from a backup (a copy of the file, or one `aios-ledger copy` "
        "made) and check it with `aios-ledger verify`"
    ),
    "DATABASE_READ_ONLY": (
        "this user cannot write it or its folder (SQLite writes its -wal and -shm files beside "
        "it): make both writable, or run the command as the ledger's owner"
    ),
    "DATABASE_CANNOT_OPEN": (
        "check that the path and its folder exist and that this user may read and write them"
    ),
}


def storage_error(exc: apsw.Error, path: str | None = None) -> LedgerError:
    """SQLite's failure as the ledger's code; with the database's `path`, a failure of the file
    itself names it and says what to do."""
    for kind, code in _STORAGE_ERRORS:
        if isinstance(exc, kind):
            advice = _ADVICE.get(code)
            if path is None or path == ":memory:" or advice is None:
                return LedgerError(code, str(exc))
            return LedgerError(code, f"{path[:200]!r}: {exc}: {advice}")
    return LedgerError("STORAGE_ERROR", f"{type(exc).__name__}: {exc}")


def resolve_path(path: str | os.PathLike[str] | None) -> str:
    if path is None:
        return ":memory:"
    text = os.fspath(path)
    if not text or "\0" in text:
        raise LedgerError("DATABASE_PATH_INVALID", "the database path is empty or holds NUL")
    try:
        # SQLite takes UTF-8 names; a name that is not (bytes from argv that were not UTF-8
        # arrive as lone surrogates) cannot be handed over.
        text.encode("utf-8")
    except UnicodeEncodeError:
        raise LedgerError("DATABASE_PATH_INVALID", f"{text!r} is not valid UTF-8") from None
    refuse_unsupported_url(text)
    return text


def database_file_exists(path: str) -> bool:
    """A database is a regular file, or a file still to be created: never a directory or a
    device (SQLite would put `/dev/null-wal` beside `/dev/null`)."""
    try:
        mode = os.stat(path).st_mode
    except FileNotFoundError:
        return False
    except (OSError, ValueError) as exc:  # e.g. a name too long for the file system
        detail = exc.strerror if isinstance(exc, OSError) else "not a usable path"
        raise LedgerError("DATABASE_PATH_INVALID", f"{path[:200]!r}: {detail}") from None
    if stat.S_ISDIR(mode):
        suggested = os.path.join(path, "aios-ledger.db")
        raise LedgerError(
            "DATABASE_PATH_INVALID",
            f"{path[:200]!r} is a directory: name the ledger's file, e.g. {suggested[:200]!r}",
        )
    if not stat.S_ISREG(mode):
        raise LedgerError("DATABASE_PATH_INVALID", f"{path[:200]!r} is not a regular file")
    return True


# The Database subclass a URL opens: `pg_database.PostgresDatabase`, which registers itself
# here (the package's `__init__` imports it), so that this module need not import it back.
URL_ENGINES: list[type[Database]] = []


class _SchemaStep(enum.Enum):
    MIGRATE = "migrate"  # apply what is pending (the default)
    REQUIRE_CURRENT = "require_current"  # the schema is the DBA's: refuse one that is behind
    AS_FOUND = "as_found"  # the migrator's own commands read or change the schema themselves


class Database:
    """A ledger database: `Database(url)` with a PostgreSQL URL (`postgresql://…`) is a
    `pg_database.PostgresDatabase`, with the same `write` / `read`; otherwise SQLite:

    One apsw connection with the ledger's pragmas and its schema step.

    `migrate=True` (the default) applies pending migrations on open, adopting the older
    runtime's database. `migrate=False` leaves the schema to the DBA (`aios-ledger migrate`,
    dbmate): it opens only a current database, refuses one that is behind (or not a ledger
    yet, or missing) with `SCHEMA_TOO_OLD` and a newer one with `SCHEMA_TOO_NEW`, and a refused
    open writes nothing to the file. `Database.as_found` skips the step for the tools that run
    the migrator themselves. At synchronous=NORMAL the WAL is copied back in rounds beside the
    writers (`checkpointer`)."""

    engine = "sqlite"
    conn: apsw.Connection

    def __new__(cls, path: str | os.PathLike[str] | None = None, *args: Any, **kwargs: Any) -> Any:
        if cls is Database and is_database_url(path):
            # PostgreSQL's Database (`pg_database`), registered when the package is imported.
            return object.__new__(URL_ENGINES[0])
        return object.__new__(cls)

    def __init__(
        self,
        path: str | os.PathLike[str] | None,
        *,
        synchronous: str = "FULL",
        migrate: bool = True,
        vfs: str | None = None,
    ) -> None:
        step = _SchemaStep.MIGRATE if migrate else _SchemaStep.REQUIRE_CURRENT
        self._open(path, synchronous, vfs, step)

    @classmethod
    def as_found(cls, path: str | os.PathLike[str] | None) -> Database:
        """Open without the schema step: for `aios-ledger init`, `migrate` and `migrate
        --status`, and callers of `migrate_database`, which look at or change it themselves."""
        database: Database = cls.__new__(cls, path)
        database._open(path, "FULL", None, _SchemaStep.AS_FOUND)
        return database

    def _open(
        self,
        path: str | os.PathLike[str] | None,
        synchronous: str,
        vfs: str | None,
        step: _SchemaStep,
    ) -> None:
        if synchronous not in SYNCHRONOUS_LEVELS:
            raise LedgerError(
                "SYNCHRONOUS_INVALID", f"synchronous must be one of {SYNCHRONOUS_LEVELS}"
            )
        self.path = resolve_path(path)
        self.busy_retries = 0  # transactions retried after SQLITE_BUSY (observability only)
        self.checkpoints: CheckpointRounds | None = None
        self.group_commit: GroupCommit | None = None  # see start_group_commit
        self._vfs = vfs
        flags = apsw.SQLITE_OPEN_READWRITE | apsw.SQLITE_OPEN_CREATE
        if step is _SchemaStep.REQUIRE_CURRENT:
            # Nothing to open is not a ledger either, and no empty file is left behind.
            if self.path != ":memory:" and not database_file_exists(self.path):
                raise LedgerError(
                    "SCHEMA_TOO_OLD",
                    f"{self.path[:200]!r} does not exist: run `aios-ledger migrate` or dbmate up",
                )
            flags = apsw.SQLITE_OPEN_READWRITE
        elif self.path != ":memory:":
            database_file_exists(self.path)
        try:
            self.conn = apsw.Connection(self.path, flags=flags, vfs=vfs)
        except apsw.Error as exc:
            raise storage_error(exc, self.path) from None
        try:
            self._prepare(synchronous, vfs, step)
        except BaseException:
            # A refused open closes its connection at once: no descriptor or lock stays held
            # for as long as someone keeps the error (and its traceback) around.
            self._close_quietly()
            raise

    def _prepare(self, synchronous: str, vfs: str | None, step: _SchemaStep) -> None:
        try:
            self.conn.set_busy_timeout(BUSY_TIMEOUT_MS)
            # Without the query planner stability guarantee, SQLite marks a statement whose
            # LIMIT is a bound parameter (the claim's candidate page, evidence pages) to be
            # prepared again whenever that parameter is bound: measured, 33 µs of a 40 µs claim
            # read, on every claim. Plans here never depend on parameter values (no ANALYZE
            # statistics; the hot reads name their index), so nothing is lost by fixing them.
            self.conn.config(apsw.SQLITE_DBCONFIG_ENABLE_QPSG, 1)
        except apsw.Error as exc:
            raise storage_error(exc, self.path) from None
        # The schema is read before the journal mode is set, which writes to the file: a
        # database that is refused is left exactly as it was.
        plan = None
        if step is not _SchemaStep.AS_FOUND:
            migrate = step is _SchemaStep.MIGRATE
            plan = self.read(lambda conn: plan_on_open(conn, migrate=migrate))
        try:
            if self.path != ":memory:":
                self._with_busy_retry(lambda: fetch_value(self.conn, "pragma_journal_wal"))
                # Bound the WAL file (RELIABILITY.md, "WAL growth").
                fetch_value(self.conn, "pragma_wal_autocheckpoint")
                fetch_value(self.conn, f"pragma_journal_size_limit_{synchronous.lower()}")
            execute(self.conn, "pragma_foreign_keys_on")
            execute(self.conn, f"pragma_synchronous_{synchronous.lower()}")
            self.checkpoints = install_checkpoint_rounds(self.conn, self.path, vfs, synchronous)
        except apsw.Error as exc:
            raise storage_error(exc, self.path) from None
        if plan is not None and not plan.is_current:
            self.write(apply_migrations)

    def close(self) -> None:
        """Close; a failed final checkpoint is reported, but what was committed stays in the WAL."""
        self.stop_group_commit()
        if self.checkpoints is not None:
            self.checkpoints.stop()
        try:
            self.conn.close()
        except apsw.Error as exc:
            raise storage_error(exc, self.path) from None

    def start_group_commit(
        self, *, max_batch: int = 64, on_batch: Callable[[int], None] | None = None
    ) -> GroupCommit:
        """From now on, writes from any thread share commits (`group_commit`); reads use a
        connection per thread. Stopped by `stop_group_commit` or `close`."""
        from aios_ledger.shell.db.group_commit import GroupCommit

        if self.group_commit is None:
            self.group_commit = GroupCommit(
                self,
                storage_error=functools.partial(storage_error, path=self.path),
                max_batch=max_batch,
                on_batch=on_batch,
            )
        return self.group_commit

    def stop_group_commit(self) -> None:
        """Drain and end group commit (writes arriving meanwhile are GROUP_COMMIT_STOPPED)."""
        if self.group_commit is not None:
            self.group_commit.stop()
            self.group_commit = None

    def open_reader(self) -> apsw.Connection:
        """Another connection to the same file, for reads beside the writer."""
        try:
            conn = apsw.Connection(self.path, flags=apsw.SQLITE_OPEN_READWRITE, vfs=self._vfs)
            conn.set_busy_timeout(BUSY_TIMEOUT_MS)
            conn.config(apsw.SQLITE_DBCONFIG_ENABLE_QPSG, 1)
        except apsw.Error as exc:
            raise storage_error(exc, self.path) from None
        return conn

    def _close_quietly(self) -> None:
        if self.checkpoints is not None:
            self.checkpoints.stop()
        with contextlib.suppress(apsw.Error):
            self.conn.close()

    def __enter__(self) -> Database:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # SQLite hands event ids out in commit order without gaps (AUTOINCREMENT under its one
    # writer), so a missing id is a removed event; PostgreSQL's sequence leaves gaps.
    dense_event_ids = True

    def quiesce_writers(self) -> None:
        """Wait until every id handed out so far is committed or gone for good, so that a head
        read next is never passed by a later commit of a lower id: SQLite's ids are handed out
        in commit order already (PostgreSQL waits for the writers in flight)."""

    def write(self, work: Callable[[Connection], T], *, row_locked: bool = False) -> T:
        """Run `work` inside `BEGIN IMMEDIATE`; commit, or roll back and raise a LedgerError.

        `row_locked`: `work` reads every row it decides on with a locking statement
        (`get_task_for_update`, the claim's SKIP LOCKED batch) and appends events only to the
        chains of the tasks it locked: a task's own transitions. PostgreSQL then runs it beside
        other row-locked writers; SQLite has one writer whatever it says."""
        if self.group_commit is not None:
            return self.group_commit.write(work)
        return self._transaction(_BEGIN_IMMEDIATE, work)

    def read(self, work: Callable[[Connection], T]) -> T:
        """Run `work` in one read transaction, so that every read sees the same snapshot."""
        if self.group_commit is not None:
            return self.group_commit.read(work)
        return self._transaction(_BEGIN_READ, work)

    def _transaction(self, begin: str, work: Callable[[Connection], T]) -> T:
        return self._with_busy_retry(self._transaction_once, begin, work)

    def _transaction_once(self, begin: str, work: Callable[[Connection], T]) -> T:
        self.conn.execute(begin)
        try:
            result = work(self.conn)
            self.conn.execute(_COMMIT)
        except BaseException:
            self._rollback()
            raise
        return result

    def _rollback(self) -> None:
        if self.conn.in_transaction:
            # SQLite may already have rolled back after an I/O error; nothing is left open then.
            with contextlib.suppress(apsw.Error):
                execute(self.conn, "rollback")

    def _with_busy_retry(self, attempt: Callable[P, T], *args: P.args, **kwargs: P.kwargs) -> T:
        for retry in range(BUSY_RETRIES + 1):
            try:
                return attempt(*args, **kwargs)
            except (apsw.BusyError, apsw.LockedError) as exc:
                self._back_off(retry, exc)
            except apsw.Error as exc:
                raise storage_error(exc, self.path) from None
        raise AssertionError("unreachable")

    def _back_off(self, retry: int, exc: apsw.Error) -> None:
        """Sleep before the next try (jittered, doubling), or give up with DATABASE_BUSY."""
        if retry == BUSY_RETRIES:
            raise LedgerError("DATABASE_BUSY", f"gave up after {retry} retries: {exc}") from None
        self.busy_retries += 1
        time.sleep(min(0.2, 0.002 * 2**retry) * random.uniform(0.5, 1.5))

    @contextmanager
    def cursor_rows(self, name: str, params: Params | None = None) -> Iterator[Iterator[Row]]:
        """Stream rows of a read statement without holding them all in memory."""
        conn = self.conn if self.group_commit is None else self.group_commit.reader()
        cursor = run_statement(conn, name, params)
        try:
            columns = [column[0] for column in cursor.get_description()]
        except apsw.ExecutionCompleteError:
            yield iter(())
            return
        yield (dict(zip(columns, row, strict=True)) for row in cursor)
