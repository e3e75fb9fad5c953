"""WAL growth: a long-lived reader pins the write-ahead log, so it grows while writers go on;
once the reader has finished and a few more writes have happened, the -wal file is back within
its bound.

The bound: every ledger connection sets `wal_autocheckpoint` (1000 pages: a commit that leaves
the WAL at 1000 pages or more checkpoints it) and `journal_size_limit` (4 MiB: when a writer
starts the WAL over after a complete checkpoint, the file is cut back to that size). In steady
state the WAL holds at most about 1000 frames of (page size + 24 bytes), 4 120 032 bytes with
4 KiB pages, plus one transaction; after a reader kept it from being checkpointed, the first
commit checkpoints it completely, the next one starts it over and truncates the file to
4 MiB. So the bound checked is max(journal_size_limit, autocheckpoint frames) plus the frames of
one write, which this test keeps under 256 KiB. Without the `journal_size_limit`, SQLite keeps a
WAL file at the largest size it ever reached.

At synchronous=NORMAL a background helper copies the log in rounds and the writer copies the
rest (`core.wal_checkpoints`): the log may grow to BACKLOG_FACTOR times the threshold before the
writer copies it all itself, and the `journal_size_limit` there (16 MiB) holds that many frames,
so the bound is max(16 MiB, BACKLOG_FACTOR times the frames) plus the same slack; after the
reader, the first commit copies the whole log and the next starts it over.
"""

from __future__ import annotations

import os
from pathlib import Path

import apsw
import pytest
from aios_ledger.core.wal_checkpoints import BACKLOG_FACTOR
from aios_ledger.shell import Database, TaskLedger
from engine_support import sqlite_database
from reliability_figures import record_figures

SOAK = os.environ.get("AIOS_SOAK") == "1"
SLACK = 256 * 1024
FRAME_HEADER = 24
WAL_HEADER = 32


def wal_size(db: Path) -> int:
    wal = Path(f"{db}-wal")
    return wal.stat().st_size if wal.exists() else 0


def wal_bound(db: Path, synchronous: str) -> int:
    """The bound from the settings of a ledger connection (read, so that a ledger without them
    gets the bound it would have, and fails on the WAL it leaves, not on a missing setting)."""
    with Database(db, synchronous=synchronous) as database:
        settings = {
            name: int(next(iter(sqlite_database(database).conn.execute(f"PRAGMA {name}")))[0])
            for name in ("journal_size_limit", "wal_autocheckpoint", "page_size")
        }
    frames = settings["wal_autocheckpoint"] * (BACKLOG_FACTOR if synchronous == "NORMAL" else 1)
    steady = WAL_HEADER + frames * (settings["page_size"] + FRAME_HEADER)
    return max(settings["journal_size_limit"], steady) + SLACK


def create(ledger: TaskLedger, n: int, size: int) -> None:
    ledger.create_task({"goal": "g", "instructions": "x" * size}, idempotency_key=f"wal-{n}")


@pytest.mark.parametrize("synchronous", ["FULL", "NORMAL"])
def test_the_wal_returns_to_its_bound_after_a_long_reader(tmp_path: Path, synchronous: str) -> None:
    db = tmp_path / "wal.sqlite3"
    bound = wal_bound(db, synchronous)
    grow_to = (8 if SOAK else 3) * bound
    counter = 0
    with TaskLedger(db, synchronous=synchronous) as ledger:
        create(ledger, counter, 10)
        reader = apsw.Connection(str(db))
        reader.execute("BEGIN")
        seen = list(reader.execute("SELECT count(*) FROM tasks"))
        # Writers go on while the reader's snapshot pins the log.
        while wal_size(db) <= grow_to:
            counter += 1
            create(ledger, counter, 60_000)
        peak = wal_size(db)
        assert list(reader.execute("SELECT count(*) FROM tasks")) == seen  # its snapshot held
        reader.execute("COMMIT")
        reader.close()
        for _ in range(3):
            counter += 1
            create(ledger, counter, 10)
        settled = wal_size(db)
        assert settled <= bound, (settled, bound, peak)
        # And it stays there while writing goes on.
        for _ in range(200 if SOAK else 40):
            counter += 1
            create(ledger, counter, 60_000)
            assert wal_size(db) <= bound
    record_figures(
        "wal" if synchronous == "FULL" else "wal_normal",
        {"bound": bound, "peak_with_reader": peak, "after_reader": settled, "writes": counter},
    )
