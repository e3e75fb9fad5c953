"""Connections and transactions: the only place that talks to apsw directly.

Every write runs as `BEGIN IMMEDIATE … COMMIT` through `Database.write`, which retries a busy
database a bounded number of times and turns every storage failure into a `LedgerError`, after
rolling back, so that a caller never sees an apsw exception and never a half-applied write.
"""

from __future__ import annotations

import contextlib
import os
import random
import stat
import threading
import time
from collections.abc import Callable, Generator, Iterator, Mapping
from contextlib import contextmanager
from typing import Any, ParamSpec, TypeVar

import apsw
from aios_ledger.core import LedgerError, record_columns
from aios_ledger.core.wal_checkpoints import ROUND_LEVELS, CheckpointAction, checkpoint_step
from aios_ledger.shell.db.statements import statement_texts

T = TypeVar("T")
P = ParamSpec("P")
R = TypeVar("R")
Row = dict[str, Any]
Params = Mapping[str, Any]

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


def storage_error(exc: apsw.Error) -> LedgerError:
    for kind, code in _STORAGE_ERRORS:
        if isinstance(exc, kind):
            return LedgerError(code, str(exc))
    return LedgerError("STORAGE_ERROR", f"{type(exc).__name__}: {exc}")


def run_statement(conn: apsw.Connection, name: str, params: Params | None = None) -> apsw.Cursor:
    """Execute a named statement. Parameters SQLite cannot take (text that is not UTF-8, a list,
    an integer over 64 bits) are refused here, at the one place where parameters meet SQLite,
    as a LedgerError: the stores validate first, this is the last line."""
    try:
        return conn.execute(_TEXTS[name], params)
    except UnicodeEncodeError:
        raise LedgerError("TEXT_INVALID", f"{name}: a parameter is not valid UTF-8 text") from None
    except (TypeError, OverflowError) as exc:  # a value SQLite cannot bind (a list, 2**64)
        raise LedgerError("PARAMETER_INVALID", f"{name}: {exc}") from None


def fetch_all(conn: apsw.Connection, name: str, params: Params | None = None) -> list[Row]:
    cursor = run_statement(conn, name, params)
    try:
        columns = [column[0] for column in cursor.get_description()]
    except apsw.ExecutionCompleteError:
        return []
    return [dict(zip(columns, row, strict=True)) for row in cursor]


def fetch_one(conn: apsw.Connection, name: str, params: Params | None = None) -> Row | None:
    rows = fetch_all(conn, name, params)
    return rows[0] if rows else None


def fetch_record(
    conn: apsw.Connection, name: str, params: Params | None, record: type[R]
) -> R | None:
    """The statement's first row as `record(*columns)` (see `stream_records`): the hot reads (a
    task, a first answer) skip building a dict. Read straight off the cursor, not through
    `stream_records`: the generator and its closing were a tenth of a transition's Python
    calls. Leaving the function drops the cursor, which resets the statement."""
    cursor = run_statement(conn, name, params)
    for row in cursor:
        if (name, record) not in _MATCHED_COLUMNS:
            _match_columns(cursor, name, record)
        return record(*row)
    return None


def stream_records(
    conn: apsw.Connection, name: str, params: Params | None, record: type[R]
) -> Generator[R, None, None]:
    """Each row as `record(*columns)`, one at a time; the caller closes the generator (or lets
    it finish) to finish the statement. The statement must select the record's fields in field
    order, which is checked on its first row in each process."""
    cursor = run_statement(conn, name, params)
    for row in cursor:
        if (name, record) not in _MATCHED_COLUMNS:
            _match_columns(cursor, name, record)
        yield record(*row)


_MATCHED_COLUMNS: set[tuple[str, type]] = set()


def _match_columns(cursor: apsw.Cursor, name: str, record: type) -> None:
    selected = tuple(column[0] for column in cursor.get_description())
    if selected != record_columns(record):
        raise TypeError(f"{name} selects {selected}, not the fields of {record.__name__}")
    _MATCHED_COLUMNS.add((name, record))


def fetch_value(conn: apsw.Connection, name: str, params: Params | None = None) -> Any:
    for row in run_statement(conn, name, params):
        return row[0]
    return None


def execute(conn: apsw.Connection, name: str, params: Params | None = None) -> int:
    """Run a write and return how many rows it changed."""
    run_statement(conn, name, params)
    return conn.changes()


class _Checkpointer:
    """PASSIVE checkpoints on a connection of its own, in a daemon thread: one round per request.

    A PASSIVE checkpoint never blocks a reader or a writer and never changes what is durable:
    every commit is already in the WAL, synced as the synchronous level says; the checkpoint
    only copies it back into the database file (synced at the same level). apsw releases the
    GIL while SQLite works, so the copy runs beside the writers instead of inside the commit
    of whichever caller crossed the threshold. `copied` is None while a round runs, then how
    many frames of the log that round left copied (0 when it could not run)."""

    def __init__(self, path: str, vfs: str | None, synchronous: str) -> None:
        self._args = (path, vfs, synchronous)
        self.copied: int | None = None
        self._wake = threading.Event()
        self._stopping = False
        self._ended = False
        self._thread = threading.Thread(
            target=self._run, name="aios-ledger-checkpointer", daemon=True
        )
        self._thread.start()

    @property
    def alive(self) -> bool:
        # A flag the thread clears on its way out: read after every commit, where
        # Thread.is_alive (a lock round trip) showed in profiles.
        return not self._ended

    def request(self) -> None:
        self.copied = None
        self._wake.set()

    def stop(self) -> None:
        self._stopping = True
        self._wake.set()
        self._thread.join()

    def _run(self) -> None:
        path, vfs, synchronous = self._args
        conn: apsw.Connection | None = None
        try:
            conn = apsw.Connection(path, vfs=vfs) if vfs else apsw.Connection(path)
            execute(conn, f"pragma_synchronous_{synchronous.lower()}")
            while True:
                self._wake.wait()
                self._wake.clear()
                if self._stopping:
                    return
                try:
                    _, copied = conn.wal_checkpoint(mode=apsw.SQLITE_CHECKPOINT_PASSIVE)
                except apsw.Error:  # e.g. busy: another connection is checkpointing
                    copied = 0
                self.copied = copied
        except apsw.Error:
            return  # the writers' own WAL hook checkpoints instead (`alive` is False now)
        finally:
            self._ended = True
            if conn is not None:
                with contextlib.suppress(apsw.Error):
                    conn.close()


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
    return text


def _check_existing(path: str) -> None:
    """A database is a regular file, or a file still to be created: never a directory or a
    device (SQLite would put `/dev/null-wal` beside `/dev/null`)."""
    try:
        mode = os.stat(path).st_mode
    except FileNotFoundError:
        return
    except (OSError, ValueError) as exc:  # e.g. a name too long for the file system
        detail = exc.strerror if isinstance(exc, OSError) else "not a usable path"
        raise LedgerError("DATABASE_PATH_INVALID", f"{path[:200]!r}: {detail}") from None
    if stat.S_ISDIR(mode):
        raise LedgerError("DATABASE_PATH_INVALID", f"{path} is a directory")
    if not stat.S_ISREG(mode):
        raise LedgerError("DATABASE_PATH_INVALID", f"{path[:200]!r} is not a regular file")


class Database:
    """One apsw connection with the ledger's pragmas, migrated on open.

    WAL checkpoints: at synchronous=NORMAL, instead of SQLite's auto-checkpoint, which copies the
    WAL back inside the commit that crosses 1000 pages (a latency spike for that caller), a file
    database hands the copy to a `_Checkpointer` thread with its own connection, started on
    first need and stopped by `close`, in rounds that `core.wal_checkpoints` decides: the
    helper copies the bulk, the writer the short rest, and the log starts over (it holds up to
    `BACKLOG_FACTOR` times the threshold before the writer copies it all itself). At FULL, the
    default, SQLite's own auto-checkpoint stays (`core.wal_checkpoints.ROUND_LEVELS` says why)."""

    def __init__(
        self,
        path: str | os.PathLike[str] | None,
        *,
        synchronous: str = "FULL",
        migrate: bool = True,
        vfs: str | None = None,
    ) -> None:
        if synchronous not in SYNCHRONOUS_LEVELS:
            raise LedgerError(
                "SYNCHRONOUS_INVALID", f"synchronous must be one of {SYNCHRONOUS_LEVELS}"
            )
        self.path = resolve_path(path)
        self.busy_retries = 0  # transactions retried after SQLITE_BUSY (observability only)
        if self.path != ":memory:":
            _check_existing(self.path)
        try:
            self.conn = apsw.Connection(self.path, vfs=vfs) if vfs else apsw.Connection(self.path)
        except apsw.Error as exc:
            raise storage_error(exc) from None
        try:
            self._prepare(synchronous, migrate, vfs)
        except BaseException:
            # A refused open closes its connection at once: no descriptor or lock stays held
            # for as long as someone keeps the error (and its traceback) around.
            with contextlib.suppress(apsw.Error):
                self.conn.close()
            raise

    def _prepare(self, synchronous: str, migrate: bool, vfs: str | None) -> None:
        try:
            self.conn.set_busy_timeout(BUSY_TIMEOUT_MS)
            # Without the query planner stability guarantee, SQLite marks a statement whose
            # LIMIT is a bound parameter (the claim's candidate page, evidence pages) to be
            # prepared again whenever that parameter is bound: measured, 33 µs of a 40 µs claim
            # read, on every claim. Plans here never depend on parameter values (no ANALYZE
            # statistics; the hot reads name their index), so nothing is lost by fixing them.
            self.conn.config(apsw.SQLITE_DBCONFIG_ENABLE_QPSG, 1)
            if self.path != ":memory:":
                self._with_busy_retry(lambda: fetch_value(self.conn, "pragma_journal_wal"))
                # Bound the WAL file (RELIABILITY.md, "WAL growth").
                fetch_value(self.conn, "pragma_wal_autocheckpoint")
                fetch_value(self.conn, f"pragma_journal_size_limit_{synchronous.lower()}")
            execute(self.conn, "pragma_foreign_keys_on")
            execute(self.conn, f"pragma_synchronous_{synchronous.lower()}")
            self._checkpointer: _Checkpointer | None = None
            self._handed_over = False
            if self.path != ":memory:" and synchronous in ROUND_LEVELS:
                self._checkpoint_args = (self.path, vfs, synchronous)
                self.conn.set_wal_hook(self._on_wal)
        except apsw.Error as exc:
            raise storage_error(exc) from None
        if migrate:
            from aios_ledger.shell.db.migrations import migrate_database

            migrate_database(self)

    def _on_wal(self, conn: apsw.Connection, name: str, pages: int) -> int:
        """After each commit (SQLite's WAL hook, which replaces its auto-checkpoint): hand a
        round of copying to the background checkpointer, or copy here, as
        `core.wal_checkpoints` decides from the log's length and the last round's progress."""
        checkpointer = self._checkpointer
        step = checkpoint_step(
            pages,
            handed_over=self._handed_over,
            copied=None if checkpointer is None else checkpointer.copied,
            helper_alive=checkpointer is None or checkpointer.alive,
        )
        self._handed_over = step.handed_over
        if step.action is CheckpointAction.HAND_OVER:
            if checkpointer is None:
                checkpointer = self._checkpointer = _Checkpointer(*self._checkpoint_args)
            checkpointer.request()
        elif step.action is CheckpointAction.CHECKPOINT_HERE:
            with contextlib.suppress(apsw.Error):
                conn.wal_checkpoint(name, apsw.SQLITE_CHECKPOINT_PASSIVE)
        return int(apsw.SQLITE_OK)

    def close(self) -> None:
        """Close; a failed final checkpoint is reported, but what was committed stays in the WAL."""
        if self._checkpointer is not None:
            self._checkpointer.stop()
            self._checkpointer = None
        try:
            self.conn.close()
        except apsw.Error as exc:
            raise storage_error(exc) from None

    def __enter__(self) -> Database:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def write(self, work: Callable[[apsw.Connection], T]) -> T:
        """Run `work` inside `BEGIN IMMEDIATE`; commit, or roll back and raise a LedgerError."""
        return self._transaction(_BEGIN_IMMEDIATE, work)

    def read(self, work: Callable[[apsw.Connection], T]) -> T:
        """Run `work` in one read transaction, so that every read sees the same snapshot."""
        return self._transaction(_BEGIN_READ, work)

    def _transaction(self, begin: str, work: Callable[[apsw.Connection], T]) -> T:
        return self._with_busy_retry(self._transaction_once, begin, work)

    def _transaction_once(self, begin: str, work: Callable[[apsw.Connection], T]) -> T:
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
                raise storage_error(exc) from None
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
        cursor = run_statement(self.conn, name, params)
        try:
            columns = [column[0] for column in cursor.get_description()]
        except apsw.ExecutionCompleteError:
            yield iter(())
            return
        yield (dict(zip(columns, row, strict=True)) for row in cursor)
