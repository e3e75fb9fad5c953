"""Part 7 of the benchmark compares the ledger's heartbeat with a flat rewrite of it. The
comparison means something only if the rewrite does the same work: these tests hold it to the
ledger's answers, rows, seals and refusals."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from aios_ledger.shell import TaskLedger
from aios_ledger.shell.log.verification import verify_log
from legacy_fixtures import dump
from test_tasks_support import Clock, refusal

from bench.layers import flat_heartbeat

TOKEN = "t" * 43
TASK_ID = "task-layers-1"
CLAIMED_AT = datetime(2026, 11, 30, 6, 0, tzinfo=UTC)


def claimed_ledger(path: Path) -> tuple[TaskLedger, Clock]:
    clock = Clock(CLAIMED_AT)
    ledger = TaskLedger(path, clock=clock)
    ledger.create_task(
        {
            "task_id": TASK_ID,
            "goal": "g",
            "instructions": "do it",
            "success_criteria": ["ok"],
            "required_capabilities": ["python"],
        },
        idempotency_key="create-1",
    )
    ledger.claim(
        agent_id="agent-1",
        capabilities=["python"],
        lease_seconds=60,
        task_id=TASK_ID,
        lease_token=TOKEN,
    )
    clock.advance(30)
    return ledger, clock


def contents(store: TaskLedger) -> list[str]:
    return dump(Path(store.database.path))


@pytest.fixture
def pair(tmp_path: Path) -> Any:
    """Two files in the same state: one for the ledger's heartbeat, one for the flat one."""
    ledger, _ = claimed_ledger(tmp_path / "ledger.db")
    flat, flat_clock = claimed_ledger(tmp_path / "flat.db")
    yield ledger, flat, flat_clock
    ledger.close()
    flat.close()


def test_the_flat_heartbeat_answers_and_writes_what_the_ledger_does(pair: Any) -> None:
    ledger, flat, clock = pair
    for lease_seconds in (120, 3600):
        expected = ledger.heartbeat(TASK_ID, lease_token=TOKEN, lease_seconds=lease_seconds)
        answer = flat_heartbeat(flat.database.conn, TASK_ID, TOKEN, lease_seconds, clock=clock)
        assert answer == expected
    assert contents(flat) == contents(ledger)
    assert verify_log(flat.database).intact


def refusal_codes(pair: Any, task_id: Any, token: Any, lease_seconds: Any) -> tuple[str, str]:
    """The codes the ledger's heartbeat and the flat one refuse with; the flat file unchanged."""
    ledger, flat, clock = pair
    before = contents(flat)
    by_ledger = refusal(
        lambda: ledger.heartbeat(task_id, lease_token=token, lease_seconds=lease_seconds)
    )
    by_flat = refusal(
        lambda: flat_heartbeat(flat.database.conn, task_id, token, lease_seconds, clock=clock)
    )
    assert contents(flat) == before
    assert not flat.database.conn.in_transaction
    return by_ledger, by_flat


@pytest.mark.parametrize(
    ("task_id", "token", "lease_seconds", "code"),
    [
        ("no such task", TOKEN, 60, "FIELDS_INVALID"),
        (7, TOKEN, 60, "FIELDS_INVALID"),
        (TASK_ID, "short", 60, "FIELDS_INVALID"),
        (TASK_ID, TOKEN, 0, "FIELDS_INVALID"),
        (TASK_ID, TOKEN, True, "FIELDS_INVALID"),
        (TASK_ID, TOKEN, 10**9, "FIELDS_INVALID"),
        ("task-missing", TOKEN, 60, "TASK_NOT_FOUND"),
        (TASK_ID, "u" * 43, 60, "LEASE_INVALID"),
    ],
)
def test_the_flat_heartbeat_refuses_a_call_the_ledger_refuses(
    pair: Any, task_id: Any, token: Any, lease_seconds: Any, code: str
) -> None:
    assert refusal_codes(pair, task_id, token, lease_seconds) == (code, code)


@pytest.mark.parametrize(
    ("change", "code"),
    [
        ("lease_expires_at = '2026-11-30T06:00:10Z'", "LEASE_EXPIRED"),
        ("status = 'SUBMITTED'", "INVALID_TRANSITION"),
    ],
)
def test_the_flat_heartbeat_refuses_a_row_the_ledger_refuses(
    pair: Any, change: str, code: str
) -> None:
    ledger, flat, _ = pair
    for store in (ledger, flat):
        store.database.conn.execute(f"UPDATE tasks SET {change} WHERE task_id = ?", (TASK_ID,))
    assert refusal_codes(pair, TASK_ID, TOKEN, 60) == (code, code)
