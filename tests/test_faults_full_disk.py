"""A full disk, for real: the ledger fills up, refuses, keeps what it acknowledged, carries on.

Two honest limits that need no root: `PRAGMA max_page_count` (SQLite's own SQLITE_FULL), and a
file-size limit (`RLIMIT_FSIZE`) on a child process, so that the kernel itself refuses the write
(EFBIG) while the ledger is appending to its WAL.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

from aios_ledger.core import LedgerError
from aios_ledger.shell import Database, TaskLedger
from engine_support import sqlite_database
from faults_support import STORAGE_CODES, integrity, log_intact
from legacy_fixtures import dump
from test_tasks_support import Clock

FILLER = "x" * 2000


def _task(number: int) -> dict[str, Any]:
    return {"task_id": f"fill-{number}", "goal": "g", "instructions": FILLER}


def test_a_full_database_refuses_writes_and_keeps_what_it_acknowledged(tmp_path: Path) -> None:
    path = tmp_path / "full.db"
    acknowledged: list[str] = []
    refusals = 0
    with TaskLedger(path, clock=Clock()) as ledger:
        conn = sqlite_database(ledger.database).conn
        pages = int(str(conn.execute("PRAGMA page_count").fetchall()[0][0]))
        conn.execute(f"PRAGMA max_page_count = {pages + 12}")
        for number in range(400):
            before = dump(path)
            try:
                ledger.create_task(_task(number), idempotency_key=f"fill-{number}")
            except LedgerError as refused:
                assert refused.code == "STORAGE_FULL", refused
                refusals += 1
                assert dump(path) == before
                if refusals == 3:
                    break
                continue
            acknowledged.append(f"fill-{number}")
        assert refusals == 3 and acknowledged
        # Full, the other writes still answer all or nothing.
        before = dump(path)
        try:
            ledger.claim(agent_id="w", capabilities=[], lease_seconds=60, task_id=acknowledged[0])
        except LedgerError as refused:
            assert refused.code == "STORAGE_FULL"
            assert dump(path) == before
    assert integrity(path) == "ok"
    assert log_intact(path)
    print(f"\nmax_page_count: {len(acknowledged)} acknowledged, {refusals} refused STORAGE_FULL")
    # Room again (a new connection has no page limit): nothing acknowledged is lost.
    with TaskLedger(path, clock=Clock()) as ledger:
        stored = {task["task_id"] for task in ledger.list_tasks(limit=1000)}
        assert set(acknowledged) <= stored
        ledger.create_task(_task(999), idempotency_key="fill-999")
    assert log_intact(path)


CHILD = textwrap.dedent(
    """
    import json, resource, signal, sys
    from aios_ledger.core import LedgerError
    from aios_ledger.shell import TaskLedger

    path, limit = sys.argv[1], int(sys.argv[2])
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # EFBIG instead of a kill
    acknowledged, codes = [], []
    with TaskLedger(path) as ledger:
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))
        for number in range(2000):
            task = {"task_id": f"fill-{number}", "goal": "g", "instructions": "x" * 2000}
            try:
                ledger.create_task(task, idempotency_key=f"fill-{number}")
            except LedgerError as refused:
                codes.append(refused.code)
                if len(codes) == 3:
                    break
            else:
                acknowledged.append(task["task_id"])
        try:
            ledger.close()
        except LedgerError as refused:
            codes.append(refused.code)
    print(json.dumps({"acknowledged": acknowledged, "codes": codes}))
    """
)


def test_a_file_size_limit_refuses_writes_without_losing_any(tmp_path: Path) -> None:
    path = tmp_path / "limited.db"
    Database(path).close()
    limit = path.stat().st_size + 256 * 1024
    done = subprocess.run(
        [sys.executable, "-c", CHILD, str(path), str(limit)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr
    report = json.loads(done.stdout)
    print(f"\nRLIMIT_FSIZE: {len(report['acknowledged'])} acknowledged, refused {report['codes']}")
    assert report["codes"] and set(report["codes"]) <= STORAGE_CODES, report["codes"]
    assert report["acknowledged"]
    assert integrity(path) == "ok"
    assert log_intact(path)
    with TaskLedger(path) as ledger:
        stored = {task["task_id"] for task in ledger.list_tasks(limit=10_000)}
        assert set(report["acknowledged"]) <= stored
        ledger.create_task(_task(9999), idempotency_key="after-the-limit")
    assert log_intact(path)
