"""The WAL checkpoint runs beside the writers: every write is kept, nothing is left running, and
the log starts over in every cycle."""

from __future__ import annotations

import itertools
import statistics
import threading
import time
from pathlib import Path

import apsw
import pytest
from aios_ledger.core.wal_checkpoints import THRESHOLD_PAGES
from aios_ledger.shell import Database, TaskLedger
from aios_ledger.shell.db.connection import fetch_value
from aios_ledger.shell.db.engines import sqlite_checkpoints as checkpointer_module
from engine_support import sqlite_database

BATCHES = 6
PER_BATCH = 1500
# These writes leave about 27 MB in a WAL never copied back (22 MB before the Merkle log and
# v4 seals, 17 MB before seals covered rows).
UNCHECKPOINTED_WAL = 26 * 1024 * 1024


def _fill(ledger: TaskLedger, first: int) -> None:
    for batch in range(BATCHES):
        ledger.create_tasks(
            (
                {"goal": f"goal {n}", "instructions": "run", "success_criteria": ["ok"]},
                f"create-{first}-{batch}-{n}",
            )
            for n in range(PER_BATCH)
        )


def _checkpointers() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name == "aios-ledger-checkpointer"]


def _count(path: Path) -> tuple[int, str]:
    with Database(path) as db:
        check = db.read(lambda conn: fetch_value(conn, "pragma_integrity_check"))
    with TaskLedger(path) as ledger:
        tasks = len(ledger.list_tasks(limit=BATCHES * PER_BATCH + 1))
    return tasks, str(check)


def test_writes_past_the_threshold_hand_the_checkpoint_over_and_keep_every_write(
    tmp_path: Path,
) -> None:
    path = tmp_path / "ledger.db"
    with TaskLedger(path, synchronous="NORMAL") as ledger:
        _fill(ledger, 0)
        rounds = sqlite_database(ledger.database).checkpoints
        assert rounds is not None
        assert rounds.helper is not None  # the WAL crossed the threshold
    assert rounds.helper is None
    assert _checkpointers() == []
    assert _count(path) == (BATCHES * PER_BATCH, "ok")


def test_without_a_checkpointer_the_writer_checkpoints_itself(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    class Dead:
        """A checkpointer whose thread could not open its connection: asked once, never again."""

        alive = False
        copied = None
        requests = 0

        def __init__(self, *args: object) -> None:
            pass

        def request(self) -> None:
            Dead.requests += 1

        def stop(self) -> None:
            pass

    monkeypatch.setattr(checkpointer_module, "CheckpointThread", Dead)
    path = tmp_path / "ledger.db"
    with TaskLedger(path, synchronous="NORMAL") as ledger:
        _fill(ledger, 1)
        wal = Path(f"{path}-wal")
        # Checkpointed inline as SQLite would: the WAL was reset and reused, not grown without end.
        assert wal.stat().st_size < UNCHECKPOINTED_WAL / 2
    assert Dead.requests == 1
    assert _count(path) == (BATCHES * PER_BATCH, "ok")


class _CountingCheckpointer(checkpointer_module.CheckpointThread):
    requests = 0

    def request(self) -> None:
        _CountingCheckpointer.requests += 1
        super().request()


class _PromptCheckpointer(_CountingCheckpointer):
    """A helper that keeps up: the commit that hands a round over waits for it to end. On a
    loaded machine the real thread may not get a core for a while, and the log then runs to the
    backlog; what this test checks is the rounds' logic, not the scheduler."""

    def request(self) -> None:
        super().request()
        deadline = time.monotonic() + 10
        while self.copied is None and self.alive and time.monotonic() < deadline:
            time.sleep(0.0005)


STEADY_TASKS = 1500  # about 10 frames a commit: some 15,000 frames, a dozen cycles


def test_a_steady_writer_at_normal_starts_the_log_over_every_cycle_in_few_rounds(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """One writer, one commit after another, no reader: the helper copies the bulk in a round or
    a few, the writer the rest, and the log starts over soon after it crosses the threshold.
    (Woken by every commit past the threshold, the helper never let the log start over: it grew
    to 4 times the threshold in every cycle, with some 200 wake-ups each.) The file is reused,
    never cut back: its size limit at NORMAL holds a whole cycle."""
    monkeypatch.setattr(checkpointer_module, "CheckpointThread", _PromptCheckpointer)
    monkeypatch.setattr(_CountingCheckpointer, "requests", 0)
    path = tmp_path / "ledger.db"
    frames: list[int] = []
    wal_sizes: list[int] = []
    wal = Path(f"{path}-wal")
    with TaskLedger(path, synchronous="NORMAL") as ledger:
        database = sqlite_database(ledger.database)
        rounds = database.checkpoints
        assert rounds is not None

        def recording(conn: apsw.Connection, name: str, pages: int) -> int:
            frames.append(pages)
            return rounds.on_wal(conn, name, pages)

        database.conn.set_wal_hook(recording)
        for n in range(STEADY_TASKS):
            ledger.create_task(
                {"goal": f"goal {n}", "instructions": "run", "success_criteria": ["ok"]},
                idempotency_key=f"steady-{n}",
            )
            wal_sizes.append(wal.stat().st_size)
    peaks = [before for before, after in itertools.pairwise(frames) if after < before]
    assert len(peaks) >= 5, peaks
    assert statistics.median(peaks) < 2 * THRESHOLD_PAGES, peaks
    assert _CountingCheckpointer.requests <= 8 * len(peaks), (_CountingCheckpointer.requests, peaks)
    assert wal_sizes == sorted(wal_sizes)
    assert _count(path) == (STEADY_TASKS, "ok")
