"""The WAL checkpoint runs beside the writers: every write is kept, nothing is left running."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest
from aios_ledger.shell import Database, TaskLedger
from aios_ledger.shell import database as database_module
from aios_ledger.shell.database import fetch_value

BATCHES = 6
PER_BATCH = 1500
UNCHECKPOINTED_WAL = 16 * 1024 * 1024  # these writes leave about 17 MB in a WAL never copied back


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
        assert ledger.database._checkpointer is not None  # the WAL crossed the threshold
    assert ledger.database._checkpointer is None
    assert _checkpointers() == []
    assert _count(path) == (BATCHES * PER_BATCH, "ok")


def test_without_a_checkpointer_the_writer_checkpoints_itself(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    class Dead:
        alive = False

        def __init__(self, *args: object) -> None:
            self.stopped = False

        def request(self) -> None:  # pragma: no cover - never asked while dead
            raise AssertionError("a dead checkpointer was asked")

        def stop(self) -> None:
            self.stopped = True

    monkeypatch.setattr(database_module, "_Checkpointer", Dead)
    path = tmp_path / "ledger.db"
    with TaskLedger(path) as ledger:
        _fill(ledger, 1)
        wal = Path(f"{path}-wal")
        # Checkpointed inline as SQLite would: the WAL was reset and reused, not grown without end.
        assert wal.stat().st_size < UNCHECKPOINTED_WAL / 2
    assert _count(path) == (BATCHES * PER_BATCH, "ok")
