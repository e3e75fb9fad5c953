"""SQLite, through apsw: the embedded engine, for a file's path (or None: in memory).

`SqliteConnection` is an apsw connection (so tools keep all of apsw) that is also the ledger's
`engines.Connection`, running statements straight off apsw's statement cache. Every write is
`BEGIN IMMEDIATE … COMMIT`, retried while busy, and a storage failure is a `LedgerError` after
the rollback, so a caller never sees an apsw exception nor a half-applied write.
"""

from __future__ import annotations

import contextlib
import functools
import os
import random
import stat
import threading
import time
from collections.abc import Callable, Collection, Generator, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any, ParamSpec, TypeVar, cast

import apsw
from aios_ledger.core import LedgerError
from aios_ledger.core.log.merkle import IntegrationBound, MerkleTreeRow
from aios_ledger.core.statements import SqlWrite, Statement
from aios_ledger.shell.db.connection import Database, _SchemaStep
from aios_ledger.shell.db.engines import (
    Connection,
    Listener,
    Params,
    Read,
    Row,
    check_streamed,
    refuse_unsupported_url,
)
from aios_ledger.shell.db.engines.sqlite_checkpoints import (
    CheckpointRounds,
    install_checkpoint_rounds,
)
from aios_ledger.shell.db.merkle import TREE_FOR_UPDATE
from aios_ledger.shell.db.migrator import apply_migrations, known_migrations, plan_on_open
from aios_ledger.shell.db.run import MATCHED_COLUMNS, check_columns, revision_conflict
from aios_ledger.shell.db.statements import statement_texts

if TYPE_CHECKING:
    from aios_ledger.shell.db.group_commit import GroupCommit

T = TypeVar("T")
R = TypeVar("R")
P = ParamSpec("P")

NAME = "sqlite"
BUSY_TIMEOUT_MS = 5000
BUSY_RETRIES = 12
_TEXTS = statement_texts()
_BEGIN_IMMEDIATE = _TEXTS["begin_immediate"]
_COMMIT = _TEXTS["commit"]


class Signal:
    """A channel's notifications within one process: a count under a condition."""

    def __init__(self) -> None:
        self._changed = threading.Condition()
        self._count = 0

    def fire(self) -> None:
        with self._changed:
            self._count += 1
            self._changed.notify_all()

    def listen(self) -> Listener:
        return _SignalListener(self)


class _SignalListener:
    def __init__(self, signal: Signal) -> None:
        self._signal = signal
        self._seen = signal._count

    def wait(self, timeout: float) -> bool:
        changed = self._signal._changed
        with changed:
            changed.wait_for(lambda: self._signal._count != self._seen, timeout)
            fired, self._seen = self._signal._count != self._seen, self._signal._count
        return fired

    def close(self) -> None:
        """Nothing held: the signal keeps no list of its listeners."""


# Each file's channels, shared by every Database on it in this process.
_SIGNALS: dict[tuple[str, str], Signal] = {}

_STORAGE_ERRORS: tuple[tuple[type[BaseException], str], ...] = (
    (apsw.FullError, "STORAGE_FULL"),
    (apsw.IOError, "STORAGE_IO_ERROR"),
    (apsw.CorruptError, "DATABASE_CORRUPT"),
    (apsw.NotADBError, "DATABASE_CORRUPT"),
    (apsw.ReadOnlyError, "DATABASE_READ_ONLY"),
    (apsw.CantOpenError, "DATABASE_CANNOT_OPEN"),
    (apsw.ConstraintError, "CONSTRAINT_VIOLATION"),
)

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


def storage_error(exc: BaseException, path: str | None = None) -> LedgerError:
    """SQLite's failure as the ledger's code; with `path`, a failure of the file says what to do."""
    for kind, code in _STORAGE_ERRORS:
        if isinstance(exc, kind):
            advice = _ADVICE.get(code)
            if path is None or path == ":memory:" or advice is None:
                return LedgerError(code, str(exc))
            return LedgerError(code, f"{path[:200]!r}: {exc}: {advice}")
    return LedgerError("STORAGE_ERROR", f"{type(exc).__name__}: {exc}")


def _parameter_error(name: str, exc: Exception) -> LedgerError:
    """Parameters SQLite cannot take (not UTF-8, a list, over 64 bits): the last line of checks."""
    if isinstance(exc, UnicodeEncodeError):
        return LedgerError("TEXT_INVALID", f"{name}: a parameter is not valid UTF-8 text")
    return LedgerError("PARAMETER_INVALID", f"{name}: {exc}")


def _columns(cursor: apsw.Cursor) -> tuple[str, ...]:
    return tuple(column[0] for column in cursor.get_description())


def _dict_rows(cursor: apsw.Cursor) -> Iterator[Row]:
    """A cursor's rows as dicts (a statement that returned no row has no columns to name)."""
    try:
        columns = _columns(cursor)
    except apsw.ExecutionCompleteError:
        return iter(())
    return (dict(zip(columns, row, strict=True)) for row in cursor)


class SqliteConnection(apsw.Connection):
    """An apsw connection that is also the ledger's `engines.Connection`."""

    dialect = "sqlite"
    # The Merkle head row this transaction's last append left, and the one carried from the last
    # commit (with the data version): the one writer need not read it again while nothing wrote.
    _kept: MerkleTreeRow | None = None
    _carried: tuple[int, MerkleTreeRow] | None = None

    def run_statement(self, name: str, params: Params | None = None) -> apsw.Cursor:
        try:
            return self.execute(_TEXTS[name], params)
        except (UnicodeEncodeError, TypeError, OverflowError) as exc:
            raise _parameter_error(name, exc) from None

    def fetch_all(self, name: str, params: Params | None = None) -> list[Row]:
        return list(_dict_rows(self.run_statement(name, params)))

    def fetch_record(self, name: str, params: Params | None, record: type[R] | None) -> Any:
        # Straight off the cursor (the hot read): no generator, no helper call.
        if self._carried is not None and name == TREE_FOR_UPDATE:
            carried, self._carried = self._carried, None
            if carried[0] == self.data_version():  # no COMMIT since, this writer's or another's
                return cast(R, carried[1])
        try:
            cursor = self.execute(_TEXTS[name], params)
        except (UnicodeEncodeError, TypeError, OverflowError) as exc:
            raise _parameter_error(name, exc) from None
        for row in cursor:
            if record is None:
                return row[0]
            if (name, record) not in MATCHED_COLUMNS:
                check_columns(_columns(cursor), name, record)
            return record(*row)
        return None

    def fetch_together(self, reads: Sequence[Read], *, appending: int = 0) -> list[list[Any]]:
        found: list[list[Any]] = []
        for name, params, record in reads:
            cursor = self.run_statement(name, params)
            if record is None:
                found.append([row[0] for row in cursor])
                continue
            rows: list[Any] = []
            for row in cursor:
                if not rows and (name, record) not in MATCHED_COLUMNS:
                    check_columns(_columns(cursor), name, record)
                rows.append(record(*row))
            found.append(rows)
        return found

    def fetch_ahead(self, reads: Sequence[Read], *, appending: int) -> list[list[Any]] | None:
        """Never: a read costs no round trip, and must see the writes of the items before it."""
        return None

    def stream_records(
        self, name: str, params: Params | None, record: type[R]
    ) -> Generator[R, None, None]:
        cursor = self.run_statement(name, params)
        for row in cursor:
            if (name, record) not in MATCHED_COLUMNS:
                check_columns(_columns(cursor), name, record)
            yield record(*row)

    @contextmanager
    def stream_tuples(
        self, name: str, columns: tuple[str, ...]
    ) -> Iterator[Iterator[tuple[Any, ...]]]:
        cursor = self.cursor()
        try:
            cursor.execute(_TEXTS[name])
            with contextlib.suppress(apsw.ExecutionCompleteError):  # no rows: nothing to check
                check_streamed(name, _columns(cursor), columns)
            yield iter(cursor)
        finally:
            cursor.close()

    def run_write(self, name: str, params: Params | None = None) -> int:
        self.run_statement(name, params)
        return self.changes()

    def run_plan(self, writes: Sequence[SqlWrite], error: type[LedgerError]) -> None:
        """In order; the first guarded write that missed its row stops the plan."""
        for write in writes:
            statement = write.statement
            try:  # run_statement's body, inline on the hot write path
                self.execute(_TEXTS[statement], write.params)
            except (UnicodeEncodeError, TypeError, OverflowError) as exc:
                raise _parameter_error(statement, exc) from None
            if statement.guarded:
                changed = self.changes()
                if changed != 1:
                    raise revision_conflict(error, statement, changed)
                if statement is Statement.MERKLE_TREE_CAS_UPDATE:
                    params = write.params
                    revision = cast(int, params["expected_revision"]) + 1
                    size, frontier = cast(int, params["size"]), cast(bytes, params["frontier"])
                    self._kept = MerkleTreeRow(size, frontier, revision)

    def run_many(self, name: str, rows: Sequence[Params]) -> None:
        self.executemany(_TEXTS[name], [dict(row) for row in rows])

    def run_script(self, text: str) -> None:
        self.execute(text)

    def prepare_schema(self) -> None:
        """The file is the schema's place: nothing to make."""

    def first_event_id(self, chains: Collection[str]) -> int:
        return int(self.fetch_record("log_next_event_id", None, None))

    def number_events(self, first: int, count: int) -> list[int]:
        return list(range(first, first + count))

    integrates_inline = True

    def integration_bound(self, waiting: Sequence[str]) -> IntegrationBound:
        return IntegrationBound(0, int(self.fetch_record("copy_event_id_counter", None, None)))

    def transaction(self, begin: str, work: Callable[[Connection], T]) -> T:
        """One try at `work` between the statement `begin` and COMMIT, rolled back if it raises.
        Not a batch of group commit's: what an append keeps here is carried past the COMMIT."""
        self.execute(_TEXTS[begin])
        self._kept = None
        try:
            result = work(self)
            self.execute(_COMMIT)
        except BaseException:
            self.roll_back()
            raise
        kept, self._kept = self._kept, None
        if kept is not None:
            self._carried = (self.data_version(), kept)
        return result

    def roll_back(self) -> None:
        self._kept = self._carried = None
        if self.in_transaction:
            # SQLite may already have rolled back after an I/O error; nothing is left open then.
            with contextlib.suppress(apsw.Error):
                self.run_write("rollback")


def resolve_path(path: str | os.PathLike[str] | None) -> str:
    if path is None:
        return ":memory:"
    text = os.fspath(path)
    if not text or "\0" in text:
        raise LedgerError("DATABASE_PATH_INVALID", "the database path is empty or holds NUL")
    try:
        # SQLite takes UTF-8 names (argv bytes that were not arrive as lone surrogates).
        text.encode("utf-8")
    except UnicodeEncodeError:
        raise LedgerError("DATABASE_PATH_INVALID", f"{text!r} is not valid UTF-8") from None
    refuse_unsupported_url(text)
    return text


def database_file_exists(path: str) -> bool:
    """Whether the regular file is there; a directory or a device is refused (SQLite would put
    `/dev/null-wal` beside `/dev/null`)."""
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


def require_ledger(target: str) -> None:
    """A file that does not exist is DATABASE_NOT_FOUND, never a new, empty ledger."""
    if not database_file_exists(resolve_path(target)):
        raise LedgerError("DATABASE_NOT_FOUND", _missing(target))


def require_creatable(target: str) -> None:
    """`init` creates the file, but not the folder it goes in."""
    if not database_file_exists(resolve_path(target)):
        folder = os.path.dirname(target) or "."
        if not os.path.isdir(folder):
            raise LedgerError("DATABASE_NOT_FOUND", _missing(target))


def _missing(path: str) -> str:
    folder = os.path.dirname(path) or "."
    if not os.path.isdir(folder):
        return f"{path[:200]!r}: the directory {folder[:200]!r} does not exist"
    return f"{path[:200]!r} does not exist (`aios-ledger init` creates a ledger)"


SCHEMA_HEADER = """\
-- aios-ledger's SQLite schema after all migrations (`aios-ledger schema-dump`).
"""


def schema_sql(target: str | None = None) -> str:
    """The schema, read from `sqlite_master` of a database migrated in memory."""
    with SqliteDatabase(None) as db:
        objects = db.read(lambda conn: conn.fetch_all("schema_objects", None))
    versions = ", ".join(m.version for m in known_migrations())
    parts = [SCHEMA_HEADER, f"-- migrations: {versions}\n"]
    parts.extend(f"\n{row['sql'].strip()};\n" for row in objects)
    return "".join(parts)


class SqliteDatabase(Database):
    """A ledger in a SQLite file (or in memory) on one apsw connection."""

    engine = NAME
    conn: SqliteConnection
    driver_error = apsw.Error
    busy_errors: tuple[type[BaseException], ...] = (apsw.BusyError, apsw.LockedError)
    dense_event_ids = True
    integrates_inline = True

    def _open(
        self,
        path: str | os.PathLike[str] | None,
        synchronous: str,
        vfs: str | None,
        step: _SchemaStep,
    ) -> None:
        self.path = resolve_path(path)
        self.busy_retries = 0  # transactions retried after SQLITE_BUSY (observability only)
        self.checkpoints: CheckpointRounds | None = None
        self.group_commit: GroupCommit | None = None  # see start_group_commit
        self._vfs = vfs
        self._own_signals: dict[str, Signal] = {}
        # One transaction at a time on the one connection (group commit has its own thread).
        self._turn = threading.RLock()
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
        self.conn = self._connect(flags)
        try:
            self._prepare(synchronous, vfs, step)
        except BaseException:
            # A refused open closes its connection at once: no descriptor or lock stays held
            # for as long as someone keeps the error (and its traceback) around.
            self._close_quietly()
            raise

    def _prepare(self, synchronous: str, vfs: str | None, step: _SchemaStep) -> None:
        conn = self.conn
        # The schema is read before the journal mode is written: a refused file stays as it was.
        plan = plan_on_open(self, step)
        try:
            if self.path != ":memory:":
                self._with_busy_retry(lambda: conn.fetch_record("pragma_journal_wal", None, None))
                # Bound the WAL file (RELIABILITY.md, "WAL growth").
                conn.fetch_record("pragma_wal_autocheckpoint", None, None)
                conn.fetch_record(f"pragma_journal_size_limit_{synchronous.lower()}", None, None)
            conn.run_write("pragma_foreign_keys_on")
            conn.run_write(f"pragma_synchronous_{synchronous.lower()}")
            self.checkpoints = install_checkpoint_rounds(conn, self.path, vfs, synchronous)
        except apsw.Error as exc:
            raise storage_error(exc, self.path) from None
        if not plan.is_current:
            self.write_schema(apply_migrations)

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
        """From now on, writes from any thread share commits; reads use a connection per thread."""
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
        if self.group_commit is not None:
            self.group_commit.stop()
            self.group_commit = None

    def open_reader(self) -> SqliteConnection:
        """Another connection to the same file, for reads beside the writer."""
        return self._connect(apsw.SQLITE_OPEN_READWRITE)

    def _connect(self, flags: int) -> SqliteConnection:
        try:
            conn = SqliteConnection(self.path, flags=flags, vfs=self._vfs)
        except apsw.Error as exc:
            raise storage_error(exc, self.path) from None
        try:
            conn.set_busy_timeout(BUSY_TIMEOUT_MS)
            # Without QPSG, a statement whose LIMIT is a parameter is prepared again on every
            # bind; plans here never depend on parameter values, so nothing is lost.
            conn.config(apsw.SQLITE_DBCONFIG_ENABLE_QPSG, 1)
        except apsw.Error as exc:
            with contextlib.suppress(apsw.Error):
                conn.close()
            raise storage_error(exc, self.path) from None
        return conn

    def _close_quietly(self) -> None:
        if self.checkpoints is not None:
            self.checkpoints.stop()
        with contextlib.suppress(apsw.Error):
            self.conn.close()

    def notify(self, channel: str) -> None:
        self._signal(channel).fire()

    def listen(self, channel: str) -> Listener:
        return self._signal(channel).listen()

    def _signal(self, channel: str) -> Signal:
        """In memory, a database is its Database's own; a file's, everyone's in the process."""
        if self.path == ":memory:":
            return self._own_signals.setdefault(channel, Signal())
        return _SIGNALS.setdefault((os.path.realpath(self.path), channel), Signal())

    def files_dir(self, kind: str) -> Path:
        """Beside the database file: `<file>.<kind>`."""
        return Path(f"{self.path}.{kind}")

    def local_folder(self) -> str | None:
        return os.path.dirname(os.path.abspath(self.path))

    def read_only_fault(self) -> LedgerError | None:
        """`DATABASE_READ_ONLY` when the file or its `-wal`/`-shm` open only for reading, as an
        empty `BEGIN IMMEDIATE` shows (asked before group commit starts). Busy is no answer."""
        if self.conn.readonly("main") or not self._journal_writable():
            return storage_error(
                apsw.ReadOnlyError("attempt to write a readonly database"), self.path
            )
        try:
            self.conn.execute(_BEGIN_IMMEDIATE)
        except apsw.ReadOnlyError as exc:
            return storage_error(exc, self.path)
        except apsw.Error:
            return None
        self.conn.roll_back()
        return None

    def _journal_writable(self) -> bool:
        """Whether this user may write the `-wal` and `-shm` there are (SQLite would fail only at
        the commit). Asked of the file system: closing a descriptor drops the process's locks."""
        if self.path == ":memory:":
            return True
        return all(
            os.access(journal, os.W_OK) or not os.path.exists(journal)
            for journal in (f"{self.path}-wal", f"{self.path}-shm")
        )

    def write(
        self, work: Callable[[Connection], T], *, row_locked: bool = False, urgent: bool = False
    ) -> T:
        if self.group_commit is not None:
            return self.group_commit.write(work, urgent=urgent)
        return self._transaction("begin_immediate", work)

    def read(self, work: Callable[[Connection], T]) -> T:
        if self.group_commit is not None:
            return self.group_commit.read(work)
        return self._transaction("begin_read", work)

    def _transaction(self, begin: str, work: Callable[[Connection], T]) -> T:
        with self._turn:
            return self._with_busy_retry(self.conn.transaction, begin, work)

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
        conn = self.conn
        if self.group_commit is not None:
            conn = cast(SqliteConnection, self.group_commit.reader())
        yield _dict_rows(conn.run_statement(name, params))


DATABASE = SqliteDatabase
