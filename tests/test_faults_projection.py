"""I/O faults under the projection: it completes, or refuses with the database unchanged."""

from __future__ import annotations

import os
import sqlite3
from collections.abc import Iterator
from pathlib import Path

import pytest
from aios_ledger.core import LedgerError
from aios_ledger.shell import AUTHORIZATION_ENV, Database, InitialExecutionProjectionStore
from faults import OPERATIONS, FaultPlan, FaultVFS
from legacy_fixtures import OWNER, TASK, dump, legacy_database, projection_request, resolver, rows

SOAK = os.environ.get("AIOS_SOAK") == "1"
MAX_NTH = 40 if SOAK else 14


@pytest.fixture(scope="module")
def fault_vfs() -> Iterator[tuple[FaultVFS, FaultPlan]]:
    plan = FaultPlan()
    vfs = FaultVFS("aios-fault-projection", plan)
    yield vfs, plan
    vfs.unregister()


def projected(path: Path) -> bool:
    return rows(path, "SELECT revision FROM tasks") == [(2,)]


@pytest.mark.parametrize("operation", OPERATIONS)
@pytest.mark.parametrize("persistent", [False, True], ids=["once", "from-then-on"])
@pytest.mark.parametrize("full", [False, True], ids=["io-error", "disk-full"])
def test_projection_under_faults_is_all_or_nothing(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    fault_vfs: tuple[FaultVFS, FaultPlan],
    operation: str,
    persistent: bool,
    full: bool,
) -> None:
    monkeypatch.setenv(AUTHORIZATION_ENV, OWNER)
    vfs, plan = fault_vfs
    outcomes: set[str] = set()
    for nth in range(1, MAX_NTH + 1):
        path = legacy_database(tmp_path / f"{operation}-{nth}.db")
        Database(path).close()  # adopt first, so that `before` is the migrated database
        before = dump(path)
        plan.arm(operation, nth, persistent=persistent, full=full)
        try:
            store = InitialExecutionProjectionStore(path, resolver, vfs=vfs.vfs_name)
            store.project(TASK, projection_request())
            store.close()
            outcome = "completed"
        except LedgerError as refused:
            outcome = refused.code
        finally:
            plan.disarm()
        outcomes.add(outcome)
        with sqlite3.connect(path) as con:
            assert con.execute("PRAGMA integrity_check").fetchone() == ("ok",)
        con.close()
        if outcome == "completed":
            assert projected(path)
        else:
            assert outcome in {
                "STORAGE_IO_ERROR",
                "STORAGE_FULL",
                "DATABASE_CORRUPT",
                "STORAGE_ERROR",
                "DATABASE_CANNOT_OPEN",
            }, outcome
            after = dump(path)
            assert after == before or projected(path), f"{operation} #{nth}: half applied"
    assert outcomes - {"completed"}, "no fault was ever injected"
