"""SQLite's: copying the WAL back at synchronous=NORMAL beside the writers, not inside the commit
that crosses the auto-checkpoint's threshold (a latency spike for that caller), in rounds that
`core.wal_checkpoints` decides. At FULL SQLite's own auto-checkpoint stays.
"""

from __future__ import annotations

import contextlib
import threading

import apsw
from aios_ledger.core.wal_checkpoints import ROUND_LEVELS, CheckpointAction, checkpoint_step
from aios_ledger.shell.db.statements import statement_texts


class CheckpointThread:
    """PASSIVE checkpoints (never blocking, never changing what is durable) on a connection of
    its own, in a daemon thread: one round per request. `copied` is None while a round runs,
    then how many frames it left copied."""

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
        # Read after every commit, where Thread.is_alive (a lock round trip) showed in profiles.
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
    """The WAL hook of one writer connection: after each commit, hand a round to the thread or
    copy here, as `core.wal_checkpoints` decides."""

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
    """Replace SQLite's auto-checkpoint on `conn` with rounds where they pay; None elsewhere."""
    if path == ":memory:" or synchronous not in ROUND_LEVELS:
        return None
    rounds = CheckpointRounds(path, vfs, synchronous)
    conn.set_wal_hook(rounds.on_wal)
    return rounds
