"""SQLite's: copying the write-ahead log back at synchronous=NORMAL, beside the writers instead
of inside one of their commits.

Instead of SQLite's auto-checkpoint, which copies the WAL back inside the commit that crosses
1000 pages (a latency spike for that caller), a file database hands the copy to a
`CheckpointThread` with its own connection, started on first need and stopped with the
Database, in rounds that `core.wal_checkpoints` decides: the helper copies the bulk, the writer
the short rest, and the log starts over (it holds up to `BACKLOG_FACTOR` times the threshold
before the writer copies it all itself). At FULL, the default, SQLite's own auto-checkpoint
stays (`core.wal_checkpoints.ROUND_LEVELS` says why).
"""

from __future__ import annotations

import contextlib
import threading

import apsw
from aios_ledger.core.wal_checkpoints import ROUND_LEVELS, CheckpointAction, checkpoint_step
from aios_ledger.shell.db.statements import statement_texts


class CheckpointThread:
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
            conn.execute(statement_texts()[f"pragma_synchronous_{synchronous.lower()}"])
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


class CheckpointRounds:
    """The WAL hook of one writer connection: after each commit, hand a round of copying to the
    `CheckpointThread`, or copy here, as `core.wal_checkpoints` decides from the log's length
    and the last round's progress."""

    def __init__(self, path: str, vfs: str | None, synchronous: str) -> None:
        self._thread_args = (path, vfs, synchronous)
        self.helper: CheckpointThread | None = None
        self._handed_over = False

    def on_wal(self, conn: apsw.Connection, name: str, pages: int) -> int:
        helper = self.helper
        step = checkpoint_step(
            pages,
            handed_over=self._handed_over,
            copied=None if helper is None else helper.copied,
            helper_alive=helper is None or helper.alive,
        )
        self._handed_over = step.handed_over
        if step.action is CheckpointAction.HAND_OVER:
            if helper is None:
                helper = self.helper = CheckpointThread(*self._thread_args)
            helper.request()
        elif step.action is CheckpointAction.CHECKPOINT_HERE:
            with contextlib.suppress(apsw.Error):
                conn.wal_checkpoint(name, apsw.SQLITE_CHECKPOINT_PASSIVE)
        return int(apsw.SQLITE_OK)

    def stop(self) -> None:
        if self.helper is not None:
            self.helper.stop()
            self.helper = None


def install_checkpoint_rounds(
    conn: apsw.Connection, path: str, vfs: str | None, synchronous: str
) -> CheckpointRounds | None:
    """Replace SQLite's auto-checkpoint on `conn` with rounds, where rounds pay (a file database
    at a level of `ROUND_LEVELS`); None where SQLite's own stays."""
    if path == ":memory:" or synchronous not in ROUND_LEVELS:
        return None
    rounds = CheckpointRounds(path, vfs, synchronous)
    conn.set_wal_hook(rounds.on_wal)
    return rounds
