"""What the HTTP server runs on: one writer Database with its stores, read connections with
theirs, the long-poll wake-up, and the waiting-poll counts per token.

Store calls block, so they run in worker threads. On SQLite writes go to the group-commit writer
and reads take pooled connections of their own, so a read never waits for a write; on
PostgreSQL writers take turns at a pool. A long-polling claim is woken through the ledger's
`work` channel, so a write through another server on the same ledger wakes it too.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import queue
import secrets
import shutil
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any, TypeVar

import attrs
from aios_ledger.core import LedgerError
from aios_ledger.shell.clock import Clock, read_clock, system_clock
from aios_ledger.shell.db.connection import Database, Listener, fetch_all
from aios_ledger.shell.db.merkle import Integrator
from aios_ledger.shell.projection.bindings import RegisteredBindingResolver
from aios_ledger.shell.projection.store import InitialExecutionProjectionStore
from aios_ledger.shell.runs.store import RunStore
from aios_ledger.shell.tasks.ledger import TaskLedger
from aios_ledger.shell.tasks.spend import read_metric_spend
from starlette.concurrency import run_in_threadpool

T = TypeVar("T")
LOG = logging.getLogger("aios_ledger.api")

DEFAULT_LISTEN = "127.0.0.1:18892"
DEFAULT_MAX_BODY = 1024 * 1024
DEFAULT_MAX_WAITING_PER_TOKEN = 8
DEFAULT_RECHECK_SECONDS = 2.0
# The channels of `announce_work` and of `events_written`, and how often their listeners (and
# the announcer of events written) look up to see the server closing.
WORK_CHANNEL = "work"
EVENTS_CHANNEL = "events"
LISTEN_TICK_SECONDS = 0.5
DEFAULT_STREAM_POLL_SECONDS = 0.5
DEFAULT_STREAM_KEEPALIVE_SECONDS = 15.0
INTEGRATE_JOIN_SECONDS = 30.0
# `serve`'s connection guards (`connections.py`); NaN and infinity are no bound.
DEFAULT_HEADER_TIMEOUT = 10.0
MAX_HEADER_TIMEOUT = 3600.0
DEFAULT_MAX_CONNECTIONS = 500
DEFAULT_MAX_HEADER_BYTES = 64 * 1024
# Failures after which the writer is opened again: SQLite keeps a file read-only once opened so.
REOPEN_CODES = frozenset(
    {"DATABASE_READ_ONLY", "STORAGE_FULL", "STORAGE_IO_ERROR", "DATABASE_CANNOT_OPEN"}
)
REOPEN_INTERVAL_SECONDS = 1.0
# `/v1/ready` says STORAGE_FULL below this much room: a commit needs a few pages of WAL.
MIN_FREE_BYTES = 1024 * 1024


@attrs.frozen
class ApiSettings:
    db_path: str
    synchronous: str = "FULL"
    migrate: bool = True
    max_body: int = DEFAULT_MAX_BODY
    max_waiting_per_token: int = DEFAULT_MAX_WAITING_PER_TOKEN
    read_connections: int = 4
    body_timeout: float = 30.0
    recheck_seconds: float = DEFAULT_RECHECK_SECONDS
    clock: Clock = system_clock
    group_commit: int = 64
    # The witnesses whose cosignatures `POST /v1/checkpoint/cosignatures` accepts.
    witness_keys: tuple[str, ...] = ()
    # The verifier keys `GET /v1/log/verify` holds stored checkpoints to.
    checkpoint_keys: tuple[str, ...] = ()
    # The event stream's head poll, keep-alive comment, send timeout and longest life.
    stream_poll_seconds: float = DEFAULT_STREAM_POLL_SECONDS
    stream_keepalive_seconds: float = DEFAULT_STREAM_KEEPALIVE_SECONDS
    stream_send_timeout: float = 30.0
    stream_max_seconds: float = 3600.0
    # The background integrator's pause when a pass found nothing more waiting (PostgreSQL): the
    # integration lag's floor when writes are sparse.
    integrate_seconds: float = 0.05


class Stores:
    """The stores over one Database (which they share and do not own)."""

    def __init__(self, db: Database, clock: Clock) -> None:
        self.db = db
        self.tasks = TaskLedger(database=db, clock=clock)
        self.runs = RunStore(database=db, clock=clock)
        self.resolver = RegisteredBindingResolver(None, database=db)
        self.projections = InitialExecutionProjectionStore(
            None, self.resolver, database=db, clock=clock
        )


class Backend:
    def __init__(self, settings: ApiSettings) -> None:
        self.settings = settings
        self._databases: list[Database] = []
        # The writer opens first: it applies pending migrations, the readers find them done.
        writer_db = self._open(writer=True)
        self.writer = Stores(writer_db, settings.clock)
        # Why the writer cannot write (a refusal's code), until it is opened again and can.
        self._writer_fault: LedgerError | None = writer_db.read_only_fault()
        self._reopen_lock = threading.Lock()
        self._next_reopen = 0.0
        # Every connection closed and opening them again failed: all calls answer the fault.
        self._closed = False
        self._reader_count = 0
        self.on_batch: Callable[[int], None] | None = None
        self._write_turn: contextlib.AbstractContextManager[object]
        self._readers: queue.SimpleQueue[Stores] = queue.SimpleQueue()
        self._signal: asyncio.Event | None = None
        self._signal_loop: asyncio.AbstractEventLoop | None = None
        self._closing = threading.Event()
        self._listening: threading.Thread | None = None  # from the first long poll on
        # Those of the listeners and of the announcer of events written.
        self._threads: list[threading.Thread] = []
        self._events_written = threading.Event()
        self._announcing: threading.Thread | None = None
        self._announcing_lock = threading.Lock()
        self._waiting: dict[str, int] = {}
        # Signs the task list's cursors: a cursor is good for the server that gave it.
        self.cursor_key = secrets.token_bytes(32)
        # PostgreSQL's writes leave their Merkle leaves to an integrator: this server runs one,
        # on a pool of its own, so that requests' writers never wait for a pass's connection.
        self.integrator: Integrator | None = None
        self._integrating: threading.Thread | None = None
        if not writer_db.integrates_inline:
            self.integrator = Integrator(self._open())
            self._integrating = threading.Thread(target=self._integrate, daemon=True)
            self._integrating.start()
        pool_size = writer_db.pool_size
        if pool_size is not None:
            # Concurrent writers from the pool, readers from a pool of their own.
            self._write_turn = threading.BoundedSemaphore(pool_size)
            readers = self._open()
            for _ in range(max(1, settings.read_connections)):
                self._readers.put(Stores(readers, settings.clock))
            return
        self._start_writer(writer_db)
        # Without group commit, one store call at a time on the writer's connection.
        self._write_turn = (
            contextlib.nullcontext() if settings.group_commit > 0 else threading.Lock()
        )
        self._reader_count = max(1, settings.read_connections)
        for _ in range(self._reader_count):
            # A reader never commits, and at FULL it installs no WAL-copying rounds of its own.
            self._readers.put(Stores(self._open(), settings.clock))

    def _start_writer(self, db: Database) -> None:
        if self.settings.group_commit > 0:
            db.start_group_commit(max_batch=self.settings.group_commit, on_batch=self._batched)

    def _batched(self, size: int) -> None:
        if self.on_batch is not None:
            self.on_batch(size)

    def _open(self, *, writer: bool = False) -> Database:
        settings = self.settings
        level, migrate = (settings.synchronous, settings.migrate) if writer else ("FULL", False)
        db = Database(settings.db_path, synchronous=level, migrate=migrate)
        self._databases.append(db)
        return db

    def close(self) -> None:
        self._closing.set()
        if self._listening is not None and self._listening is not threading.current_thread():
            with contextlib.suppress(LedgerError):
                self.writer.db.notify(WORK_CHANNEL)  # the listener's wait ends now
        self._events_written.set()  # the announcer's wait ends now
        for thread in self._threads:
            if thread is not threading.current_thread():
                thread.join(LISTEN_TICK_SECONDS * 4)
        if self._integrating is not None:
            self._integrating.join(INTEGRATE_JOIN_SECONDS)  # a pass ends with its transaction
        for db in self._databases:
            with contextlib.suppress(LedgerError):
                db.close()
        self._databases.clear()

    # -- running store calls ---------------------------------------------------------------

    def write_now(self, work: Callable[[Stores], T], *, announce: bool = True) -> T:
        """Run `work` on the writer; then (`announce`) tell every server's event streams that
        the log may have grown (`events_written`)."""
        try:
            return self._write_retrying(work)
        finally:
            # A refusal may have sealed an event too.
            if announce:
                self.events_written()

    def _write_retrying(self, work: Callable[[Stores], T]) -> T:
        """`work` on the writer, tried again only when a reopen retired its writer unused."""
        while True:
            self._reopen_writer_if_faulty()
            fault = self._writer_fault
            if fault is not None and fault.code == "DATABASE_READ_ONLY":
                # Refused before it is tried: SQLite may begin a write it cannot finish (on a
                # read-only `-wal`), which would fail as an I/O error that names no file.
                raise LedgerError(fault.code, fault.detail)
            writer = self.writer
            try:
                with self._write_turn:
                    writer = self.writer
                    self._refuse_if_closed()
                    return work(writer)
            except LedgerError as refused:
                if refused.code == "GROUP_COMMIT_STOPPED":
                    with self._reopen_lock:  # a reopen under way has swapped the writer
                        retired = writer is not self.writer
                    if retired:
                        continue  # its writer was retired before the work was queued: never ran
                if refused.code in REOPEN_CODES and writer is self.writer:
                    self._writer_fault = refused
                raise

    def ready_now(self) -> None:
        """Refuse, saying why, unless a write can be committed now: the writer can write, its
        file system has room, and an empty write transaction commits."""
        self._reopen_writer_if_faulty()
        fault = self._writer_fault
        if fault is not None:
            raise LedgerError(fault.code, fault.detail)
        folder = self.writer.db.local_folder()
        if folder is not None:
            try:
                free = shutil.disk_usage(folder).free
            except OSError as exc:
                raise LedgerError("STORAGE_IO_ERROR", f"{folder[:200]!r}: {exc}") from None
            if free < MIN_FREE_BYTES:
                raise LedgerError(
                    "STORAGE_FULL",
                    f"{folder[:200]!r} has {free} bytes free (fewer than {MIN_FREE_BYTES}): "
                    "make room on its file system; writes resume without a restart",
                )
        # Row-locked: on PostgreSQL the ledger's lock shared, so that probes never queue writers.
        self.write_now(
            lambda stores: stores.db.write(lambda conn: None, row_locked=True), announce=False
        )

    def _reopen_writer_if_faulty(self) -> None:
        """Open a writer that could not write again, now and then, so that a file made writable
        again (or a disk given room) is written without a restart."""
        if self._writer_fault is None:
            return
        with self._reopen_lock:
            now = time.monotonic()
            if self._writer_fault is None or now < self._next_reopen:
                return
            self._next_reopen = now + REOPEN_INTERVAL_SECONDS
            if self._closed:
                self._reopen_every_connection()
                return
            try:
                fresh = self._open(writer=True)
            except LedgerError as refused:
                self._writer_fault = refused
                return
            fault = fresh.read_only_fault()
            if fault is not None:
                self._close(fresh)
                self._writer_fault = fault
                if self._reader_count:  # one Database per connection: SQLite's
                    self._reopen_every_connection()
                return
            self._start_writer(fresh)
            retired, self.writer = self.writer.db, Stores(fresh, self.settings.clock)
            self._writer_fault = None
            # No store call uses the retired connection while it closes (group commit drains).
            with self._write_turn:
                self._close(retired)

    def _reopen_every_connection(self) -> None:
        """SQLite shares a file's `-shm` among a process's connections, and one opened read-only
        stays so while any is open: so every connection is closed and opened again."""
        readers = [self._readers.get() for _ in range(self._reader_count)]
        with self._write_turn:
            for db in list(self._databases):
                self._close(db)
            self._closed = True
            try:
                writer = Stores(self._open(writer=True), self.settings.clock)
                fresh = [Stores(self._open(), self.settings.clock) for _ in readers]
            except LedgerError as refused:
                # Nothing half-open stays: the next try (a write, `/v1/ready`) opens all again.
                for db in list(self._databases):
                    self._close(db)
                self._writer_fault = refused
                fresh = readers
            else:
                self._writer_fault = writer.db.read_only_fault()
                self._start_writer(writer.db)
                self.writer = writer
                self._closed = False
            for stores in fresh:
                self._readers.put(stores)

    def _refuse_if_closed(self) -> None:
        fault = self._writer_fault
        if self._closed and fault is not None:
            raise LedgerError(fault.code, fault.detail)

    def _close(self, db: Database) -> None:
        self._databases.remove(db)
        with contextlib.suppress(LedgerError):
            db.close()

    def read_now(self, work: Callable[[Stores], T]) -> T:
        stores = self._readers.get()
        try:
            self._refuse_if_closed()
            return work(stores)
        finally:
            self._readers.put(stores)

    async def write(self, work: Callable[[Stores], T]) -> T:
        return await run_in_threadpool(self.write_now, work)

    async def read(self, work: Callable[[Stores], T]) -> T:
        return await run_in_threadpool(self.read_now, work)

    def task_counts(self) -> dict[str, int]:
        rows = self.read_now(lambda stores: stores.db.read(lambda c: fetch_all(c, "status_counts")))
        return {str(row["status"]): int(row["tasks"]) for row in rows}

    def spend(self) -> dict[str, Any]:
        return self.read_now(lambda stores: stores.db.read(read_metric_spend))

    # -- the Merkle log's integrator ----------------------------------------------------------

    def _integrate(self) -> None:
        """Passes until the server closes: at once again after a full batch, else after a
        pause; a refused pass (the database away) is tried again after `recheck_seconds`."""
        integrator = self.integrator
        assert integrator is not None
        while not self._closing.is_set():
            try:
                done = integrator.run_pass(read_clock(self.settings.clock))
            except LedgerError as refused:
                LOG.warning("the Merkle log's integration pass failed: %s", refused)
                self._closing.wait(self.settings.recheck_seconds)
                continue
            if done.appended:
                self.events_written()  # streams follow the tree: wake them on every server
            if not done.more:
                self._closing.wait(self.settings.integrate_seconds)

    def integration_now(self) -> dict[str, Any]:
        """The integration lag this server's integrator measured (`Integrator.status`)."""
        if self.integrator is None:
            return {"inline": True}
        return self.integrator.status()

    # -- long polls -------------------------------------------------------------------------

    def work_signal(self) -> asyncio.Event:
        """The event the next `announce_work` sets, taken before a claim is tried so that work
        arriving before the wait is not missed."""
        if self._signal is None:
            self._signal = asyncio.Event()
            self._signal_loop = asyncio.get_running_loop()
        if self._listening is None:
            self._listening = self._start(lambda: self._hear(WORK_CHANNEL, self._wake_from_thread))
        return self._signal

    def announce_work(self) -> None:
        """Notify the `work` channel; when that fails, this server's waiters are still woken."""
        try:
            self.writer.db.notify(WORK_CHANNEL)
        except LedgerError:
            self._wake_from_thread()

    def _wake_from_thread(self) -> None:
        loop = self._signal_loop
        if loop is not None:
            with contextlib.suppress(RuntimeError):  # its loop closed: nobody waits there
                loop.call_soon_threadsafe(self._wake_waiters)

    def _wake_waiters(self) -> None:
        if self._signal is not None:
            self._signal.set()
            self._signal = None

    def _hear(self, channel: str, heard: Callable[[], None]) -> None:
        """Call `heard` on each notification of `channel`, and once on listening for what was
        announced before, until the server closes; a failed listener is opened again, the
        waiters' own re-tries (polls) standing in meanwhile."""
        listener: Listener | None = None
        while not self._closing.is_set():
            try:
                if listener is None:
                    listener = self.writer.db.listen(channel)
                elif not listener.wait(LISTEN_TICK_SECONDS):
                    continue
            except LedgerError:
                if listener is not None:
                    listener.close()
                    listener = None
                self._closing.wait(self.settings.recheck_seconds)
                continue
            heard()
        if listener is not None:
            listener.close()

    def listen_for_events(self, heard: Callable[[], None]) -> None:
        """Call `heard` (from another thread) whenever a server on this ledger announces events
        written (`events_written`), until the server closes."""
        self._start(lambda: self._hear(EVENTS_CHANNEL, heard))

    def events_written(self) -> None:
        """Announce on the `events` channel that the log may have grown, from a thread of its
        own: the writes of a burst fold into one notification, off their requests' way."""
        self._events_written.set()
        if self._announcing is None:
            with self._announcing_lock:
                if self._announcing is None:
                    self._announcing = self._start(self._announce_events)

    def _announce_events(self) -> None:
        while not self._closing.is_set():
            if not self._events_written.wait(LISTEN_TICK_SECONDS) or self._closing.is_set():
                continue
            self._events_written.clear()
            with contextlib.suppress(LedgerError):  # the streams' polls stand in meanwhile
                self.writer.db.notify(EVENTS_CHANNEL)

    def _start(self, target: Callable[[], None]) -> threading.Thread:
        thread = threading.Thread(target=target, daemon=True)
        self._threads.append(thread)
        thread.start()
        return thread

    @contextlib.contextmanager
    def waiting(self, name: str) -> Iterator[None]:
        """Count a waiting poll of token `name`; `TOO_MANY_WAITING` beyond the limit."""
        held = self._waiting.get(name, 0)
        if held >= self.settings.max_waiting_per_token:
            raise LedgerError(
                "TOO_MANY_WAITING",
                f"this token already has {held} waiting claims (at most "
                f"{self.settings.max_waiting_per_token})",
            )
        self._waiting[name] = held + 1
        try:
            yield
        finally:
            left = self._waiting[name] - 1
            if left:
                self._waiting[name] = left
            else:
                del self._waiting[name]

    def waiting_now(self) -> int:
        return sum(self._waiting.values())
