"""Statements are prepared once per connection: a ledger in steady state compiles no SQL.

SQLite calls a connection's authorizer while it compiles a statement, and only then, so counting
those calls counts compilations. A statement can be compiled again behind apsw's statement cache:
SQLite marks one for recompiling when a bound parameter may change its plan (a bound LIMIT, for
one). The claim reads its candidates with a bound LIMIT, and so do run-event pages and
evidence; before the ledger fixed query plans, every claim compiled that statement again
(33 µs of a 40 µs read).
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterator
from pathlib import Path

import apsw
import pytest
from aios_ledger.core.runs import EvidenceReadRequest, ExecutionTarget
from aios_ledger.shell import Database, RunEvidenceReader, RunStore, TaskLedger
from engine_support import sqlite_database

TASK = {"goal": "g", "instructions": "do it", "success_criteria": ["ok"]}


@pytest.fixture
def ledger(tmp_path: Path) -> Iterator[TaskLedger]:
    with TaskLedger(tmp_path / "ledger.db", synchronous="NORMAL") as opened:
        yield opened


def _compilations(database: Database) -> Callable[[], int]:
    """Start counting compilations on the connection; the result reads the count."""
    compiled: list[int] = []

    def authorize(*_: object) -> int:
        compiled.append(1)
        return int(apsw.SQLITE_OK)

    # Installing an authorizer expires every prepared statement, so the caller warms up after.
    sqlite_database(database).conn.authorizer = authorize
    return lambda: len(compiled)


def _lifecycle(ledger: TaskLedger, serial: int) -> None:
    ledger.create_task(TASK, idempotency_key=f"create-{serial}")
    claim = ledger.claim(agent_id="a", capabilities=[], lease_seconds=60)
    assert claim is not None
    task_id, token = claim["task_id"], claim["lease_token"]
    ledger.heartbeat(task_id, lease_token=token, lease_seconds=60)
    ledger.submit_result(
        task_id, lease_token=token, result={"summary": "done"}, idempotency_key=f"submit-{serial}"
    )
    ledger.verify(task_id, decision="SUCCEEDED", reason="ok", idempotency_key=f"verify-{serial}")


def test_the_transitions_of_later_tasks_compile_nothing(ledger: TaskLedger) -> None:
    compiled = _compilations(ledger.database)
    serials = itertools.count()
    _lifecycle(ledger, next(serials))
    warm = compiled()
    assert warm > 0  # the counter does see compilations

    for _ in range(3):
        _lifecycle(ledger, next(serials))

    assert compiled() == warm


def test_a_read_compiles_once_whatever_limit_is_bound(ledger: TaskLedger) -> None:
    ledger.create_tasks([(TASK, f"create-{n}") for n in range(5)])
    compiled = _compilations(ledger.database)
    ledger.claim_many(agent_id="a", capabilities=[], lease_seconds=60, limit=1)
    ledger.list_tasks(status="QUEUED", limit=1)
    warm = compiled()

    claimed = ledger.claim_many(agent_id="a", capabilities=[], lease_seconds=60, limit=3)
    listed = ledger.list_tasks(status="CLAIMED", limit=2)

    assert (len(claimed), len(listed)) == (3, 2)
    assert compiled() == warm


def test_run_events_and_evidence_compile_once_whatever_limit_is_bound(tmp_path: Path) -> None:
    with RunStore(tmp_path / "runs.db") as runs:
        run = runs.create_run("session-1", "prompt", run_id="run-1")
        reader = RunEvidenceReader(runs)
        target = ExecutionTarget("session-1", run.run_id)
        compiled = _compilations(runs.database)
        runs.append_event(run.run_id, "note", {"n": 0})
        reader.read(EvidenceReadRequest(target, max_events=1))
        warm = compiled()

        for n in range(1, 4):
            runs.append_event(run.run_id, "note", {"n": n})
        evidence = reader.read(EvidenceReadRequest(target, max_events=2))
        events = runs.run_events(run.run_id, limit=3)

        assert (len(evidence.events), len(events)) == (2, 3)
        assert compiled() == warm
