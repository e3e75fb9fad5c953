"""Shared machinery of the fault sweeps: which fault positions to try, and the after-checks.

A sweep measures how many reads, writes and syncs an operation makes on a clean run (open,
operation, close), then fails the Nth of them for N across that whole range (every N under
`AIOS_SOAK=1`, an even sample of them otherwise).
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable
from pathlib import Path

import apsw
from aios_ledger.core import LedgerError
from aios_ledger.shell.db.connection import Database
from aios_ledger.shell.log.verification import verify_log
from faults import FaultPlan

SOAK = os.environ.get("AIOS_SOAK") == "1"
SAMPLES = 8
STORAGE_CODES = frozenset(
    {
        "STORAGE_IO_ERROR",
        "STORAGE_FULL",
        "STORAGE_ERROR",
        "DATABASE_CORRUPT",
        "DATABASE_CANNOT_OPEN",
    }
)
# (id, persistent, full disk)
MODES = (
    ("once", False, False),
    ("from-then-on", True, False),
    ("once-full", False, True),
    ("from-then-on-full", True, True),
)


class Tally:
    """What a whole sweep did, for RELIABILITY-faults-input.md (printed with `-s`)."""

    runs = 0
    injected = 0
    refused = 0
    completed = 0

    @classmethod
    def reset(cls) -> None:
        cls.runs = cls.injected = cls.refused = cls.completed = 0


def positions(total: int) -> list[int]:
    """Fault positions 1..total+1 (the last one is past the operation: it must complete)."""
    every = list(range(1, total + 2))
    if SOAK or len(every) <= SAMPLES:
        return every
    step = len(every) / SAMPLES
    chosen = {every[int(i * step)] for i in range(SAMPLES)} | {every[0], every[-1]}
    return sorted(chosen)


def copy_database(source: Path, target: Path) -> Path:
    for suffix in ("", "-wal"):
        origin = Path(f"{source}{suffix}")
        if origin.exists():
            shutil.copyfile(origin, f"{target}{suffix}")
    return target


def _connect(path: Path) -> apsw.Connection:
    # apsw, never the stdlib sqlite3: that is a second copy of SQLite in this process, and its
    # closing connection drops the POSIX locks of the ledger's open connections and deletes
    # their WAL under them (sqlite.org/howtocorrupt.html, "multiple copies of SQLite").
    return apsw.Connection(str(path))


def integrity(path: Path) -> str:
    con = _connect(path)
    try:
        return str(con.execute("PRAGMA integrity_check").fetchall()[0][0])
    finally:
        con.close()


def log_intact(path: Path) -> bool:
    with Database(path) as db:
        return verify_log(db).intact


def faulted(
    plan: FaultPlan,
    operation: str,
    nth: int,
    persistent: bool,
    full: bool,
    work: Callable[[], object],
) -> str:
    """Run `work` with the Nth `operation` failing; 'completed' or the LedgerError's code.

    Anything that is not a LedgerError propagates and fails the test."""
    plan.arm(operation, nth, persistent=persistent, full=full)
    before = plan.injected
    try:
        work()
        outcome = "completed"
    except LedgerError as refused:
        outcome = refused.code
    finally:
        plan.disarm()
    Tally.runs += 1
    Tally.injected += plan.injected - before
    if outcome == "completed":
        Tally.completed += 1
    else:
        Tally.refused += 1
    return outcome


def measured(plan: FaultPlan, work: Callable[[], object]) -> dict[str, int]:
    plan.disarm()
    plan.calls.clear()
    work()
    return dict(plan.calls)


def report(title: str) -> str:
    return (
        f"{title}: {Tally.runs} faulted runs, {Tally.injected} faults injected, "
        f"{Tally.refused} refused, {Tally.completed} completed, 0 anomalies"
    )
