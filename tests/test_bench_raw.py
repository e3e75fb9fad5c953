"""The benchmark's raw baselines stay the ledger's statements: part 1's raw lifecycle (which parts
2, 5 and 7 reuse) issues the very statements the ledger's lifecycle does, in the same order and
with the same parameter names, and part 9's raw PostgreSQL loops run their jobs through.

When the ledger's transitions change their statements, these fail and say how, instead of the
benchmark failing half way through `make bench`."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import apsw
import pytest
from aios_ledger.shell import TaskLedger
from aios_ledger.shell.db.statements import statement_texts
from conftest import ledger_schema_url
from engine_support import sqlite_database

from bench.harness import check_parameters
from bench.transitions import LedgerLoop, RawLoop

ROOT = Path(__file__).resolve().parents[1]
_NAMES = {text: name for name, text in statement_texts().items()}


def statements_of(conn: apsw.Connection, work: Callable[[], None]) -> list[tuple[str, list[str]]]:
    """Each statement `work` runs on `conn`: its registry name and the names it binds."""
    seen: list[tuple[str, list[str]]] = []

    def trace(_cursor: apsw.Cursor, text: str, bindings: Any) -> bool:
        names = sorted(bindings) if isinstance(bindings, dict) else []
        seen.append((_NAMES.get(text, text), names))
        return True

    conn.exec_trace = trace
    try:
        work()
    finally:
        conn.exec_trace = None
    return seen


def test_the_raw_lifecycle_runs_the_ledgers_statements_in_the_ledgers_order(
    tmp_path: Path,
) -> None:
    ledger = LedgerLoop(tmp_path / "ledger.db", "NORMAL")
    raw = RawLoop(tmp_path / "raw.db", "NORMAL")
    try:
        # The second lifecycle of each: a file's first transaction also prepares its statements.
        ledger.lifecycle()
        raw.lifecycle()
        expected = statements_of(sqlite_database(ledger.database).conn, ledger.lifecycle)
        found = statements_of(raw.conn, raw.lifecycle)
    finally:
        ledger.close()
        raw.close()
    assert all(name in statement_texts() for name, _ in expected), expected
    assert found == expected


def test_a_write_that_binds_other_parameters_than_the_registry_declares_is_refused() -> None:
    params = {
        "event_id": 1,
        "chain": "task:t",
        "chain_seq": 1,
        "prev_seal": "0" * 64,
        "seal": "s",
        "sealed_at_adoption": 0,
        "seal_version": 5,
        "row_changes": "{}",
        "chained_row_digest": "sha256:" + "0" * 64,
    }
    check_parameters("insert_seal", params)
    with pytest.raises(RuntimeError, match=r"lacks \['seal_version'\] and binds \[\]"):
        check_parameters("insert_seal", {k: v for k, v in params.items() if k != "seal_version"})
    with pytest.raises(RuntimeError, match=r"lacks \[\] and binds \['sealed'\]"):
        check_parameters("insert_seal", {**params, "sealed": 1})


@pytest.mark.parametrize("system", ["raw", "raw-pipelined"])
def test_part_nines_raw_loops_run_their_jobs_on_postgresql(
    system: str, postgres_database: str | None
) -> None:
    url = ledger_schema_url(postgres_database)
    TaskLedger(url).close()  # migrated, as part 9 prepares each schema
    done = subprocess.run(
        [sys.executable, "-m", "bench.pg_worker", system, url, "3", "0", "p"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    assert done.returncode == 0, done.stderr[-2000:]
    with TaskLedger(url) as ledger:
        finished = ledger.list_tasks("SUCCEEDED")
    assert sorted(task["task_id"] for task in finished) == ["raw-p-0", "raw-p-1", "raw-p-2"]
