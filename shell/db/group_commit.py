"""Group commit: many writers' works in one `BEGIN IMMEDIATE … COMMIT` on SQLite, each in its
own savepoint so a refused work rolls back alone. Lease renewals (`urgent`) go first and cut a
running batch short, so a heartbeat never waits behind queued writes.
"""

from __future__ import annotations

import collections
import contextlib
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future
from typing import Any, ParamSpec, Protocol, TypedDict, TypeVar

import attrs
from aios_ledger.core import LedgerError
from aios_ledger.shell.db.run import Connection, execute

T = TypeVar("T")
P = ParamSpec("P")
Work = Callable[[Connection], Any]

MAX_BATCH_LIMIT = 10_000
# How long a batch goes on once an urgent work waits: heartbeats must not cut every batch to one.
URGENT_CUT_SECONDS = 0.002


class OwnConnection(Connection, Protocol):
    """A connection of the engine's (by shape): one try at a transaction, a rollback, and (a read
    connection of a thread's own) the close when group commit stops."""

    def transaction(self, begin: str, work: Callable[[Connection], T]) -> T: ...

    def roll_back(self) -> None: ...

    def close(self) -> None: ...


class WriterDatabase(Protocol):
    """What group commit needs of SQLite's Database (by shape: no import of the engine)."""

    path: str

    @property
    def conn(self) -> OwnConnection: ...

    @property
    def driver_error(self) -> type[Exception]: ...

    @property
    def busy_errors(self) -> tuple[type[BaseException], ...]: ...

    def open_reader(self) -> OwnConnection: ...

    def _with_busy_retry(self, attempt: Callable[P, T], *args: P.args, **kwargs: P.kwargs) -> T: ...


class GroupCommitStats(TypedDict):
    batches: int
    works: int
    largest_batch: int


@attrs.define
class _Entry:
    work: Work
    future: Future[Any] = attrs.Factory(Future)


@attrs.define
class _Outcome:
    value: Any = None
    error: BaseException | None = None


class _WholeBatchLost(Exception):
    """SQLite rolled the whole transaction back under a work (an I/O error, a full disk)."""

    def __init__(self, cause: Exception) -> None:
        super().__init__(str(cause))
        self.cause = cause


class GroupCommit:
    """The writer thread and the per-thread read connections of one Database."""

    def __init__(
        self,
        database: WriterDatabase,
        *,
        storage_error: Callable[[Exception], LedgerError],
        max_batch: int = 64,
        on_batch: Callable[[int], None] | None = None,
    ) -> None:
        if isinstance(max_batch, bool) or not isinstance(max_batch, int):
            raise LedgerError("MAX_BATCH_INVALID", "max_batch must be an integer")
        if not 1 <= max_batch <= MAX_BATCH_LIMIT:
            raise LedgerError("MAX_BATCH_INVALID", f"max_batch must be 1..{MAX_BATCH_LIMIT}")
        if database.path == ":memory:":
            raise LedgerError(
                "GROUP_COMMIT_UNAVAILABLE", "an in-memory database has one connection only"
            )
        self._db = database
        self._storage_error = storage_error
        self._max_batch = max_batch
        self._on_batch = on_batch
        self._urgent: collections.deque[_Entry] = collections.deque()
        self._waiting: collections.deque[_Entry] = collections.deque()
        self._local = threading.local()
        self._readers: list[OwnConnection] = []
        self._lock = threading.Lock()
        self._arrived = threading.Condition(self._lock)
        self._stopped = False
        self._stats: GroupCommitStats = {"batches": 0, "works": 0, "largest_batch": 0}
        self._thread = threading.Thread(target=self._run, name="ledger-group-commit", daemon=True)
        self._thread.start()

    def write(self, work: Callable[[Connection], T], *, urgent: bool = False) -> T:
        """Queue `work` and wait for the commit that holds it (or for its own error)."""
        if threading.current_thread() is self._thread:
            raise LedgerError("GROUP_COMMIT_REENTERED", "a work may not write again from inside")
        entry = _Entry(work)
        with self._arrived:
            if self._stopped:
                raise LedgerError("GROUP_COMMIT_STOPPED", "the database is closing")
            (self._urgent if urgent else self._waiting).append(entry)
            self._arrived.notify()
        result: T = entry.future.result()
        return result

    def read(self, work: Callable[[Connection], T]) -> T:
        """Run `work` in one read transaction on this thread's own connection."""
        return self._db._with_busy_retry(self.reader().transaction, "begin_read", work)

    def reader(self) -> OwnConnection:
        """This thread's read connection, opened on first use."""
        conn: OwnConnection | None = getattr(self._local, "conn", None)
        if conn is not None:
            return conn
        with self._lock:
            if self._stopped:
                raise LedgerError("GROUP_COMMIT_STOPPED", "the database is closing")
            conn = self._db.open_reader()
            self._readers.append(conn)
        self._local.conn = conn
        return conn

    def queued(self) -> int:
        """How many works wait for the writer (approximate while callers come and go)."""
        return len(self._urgent) + len(self._waiting)

    def stats(self) -> GroupCommitStats:
        with self._lock:
            return GroupCommitStats(**self._stats)

    def stop(self) -> None:
        """Let the writer finish what is queued, end it, close the read connections."""
        with self._arrived:
            if self._stopped:
                return
            self._stopped = True
            self._arrived.notify()
        self._thread.join()
        with self._lock:
            readers, self._readers = self._readers, []
        for conn in readers:
            with contextlib.suppress(self._db.driver_error):
                conn.close()

    def _run(self) -> None:
        while True:
            batch = self._next_batch()
            if not batch:
                return  # stopped, and everything queued before the stop is done
            self._commit(batch)

    def _next_batch(self) -> list[_Entry]:
        """Up to `max_batch` queued works, urgent ones first; [] once stopped and drained."""
        with self._arrived:
            while not self._urgent and not self._waiting:
                if self._stopped:
                    return []
                self._arrived.wait()
            # Renewals commit in a batch of their own, never waiting for the works after them.
            source = self._urgent if self._urgent else self._waiting
            return [source.popleft() for _ in range(min(len(source), self._max_batch))]

    def _commit(self, batch: list[_Entry]) -> None:
        try:
            outcomes = self._db._with_busy_retry(self._attempt, batch)
            # The works a lease renewal cut off were not started: back to the queue's head.
            left = batch[len(outcomes) :]
            batch = batch[: len(outcomes)]
            if left:
                with self._arrived:
                    self._waiting.extendleft(reversed(left))
        except BaseException as exc:  # the writer must outlive anything a batch does
            for entry in batch:
                entry.future.set_exception(exc)
            return
        with self._lock:
            self._stats["batches"] += 1
            self._stats["works"] += len(batch)
            self._stats["largest_batch"] = max(self._stats["largest_batch"], len(batch))
        if self._on_batch is not None:
            with contextlib.suppress(Exception):
                self._on_batch(len(batch))
        for entry, outcome in zip(batch, outcomes, strict=True):
            if outcome.error is not None:
                entry.future.set_exception(outcome.error)
            else:
                entry.future.set_result(outcome.value)

    def _attempt(self, batch: list[_Entry]) -> list[_Outcome]:
        """One try at the whole batch (a busy database propagates: the caller retries it); once
        an urgent work waits it commits early, with fewer outcomes."""
        conn = self._db.conn
        execute(conn, "begin_immediate")
        started = time.monotonic()
        outcomes: list[_Outcome] = []
        try:
            for entry in batch:
                if (
                    outcomes
                    and self._urgent  # a deque's length is read atomically
                    and time.monotonic() - started >= URGENT_CUT_SECONDS
                ):
                    break
                outcomes.append(self._run_work(conn, entry.work))
            execute(conn, "commit")
        except _WholeBatchLost as lost:
            conn.roll_back()
            raise lost.cause from None
        except BaseException:
            conn.roll_back()
            raise
        return outcomes

    def _run_work(self, conn: Connection, work: Work) -> _Outcome:
        driver_error = self._db.driver_error
        execute(conn, "savepoint_work")
        try:
            value = work(conn)
        except self._db.busy_errors:
            raise  # the batch is retried whole
        except BaseException as exc:
            if not conn.in_transaction:
                # SQLite rolled back the whole transaction: the works before this one are gone.
                cause = exc if isinstance(exc, driver_error) else driver_error(str(exc))
                raise _WholeBatchLost(cause) from None
            execute(conn, "rollback_to_work")
            execute(conn, "release_work")
            # What `Database.write` would raise: a driver's error as a LedgerError.
            error = self._storage_error(exc) if isinstance(exc, driver_error) else exc
            return _Outcome(error=error)
        execute(conn, "release_work")
        return _Outcome(value=value)
