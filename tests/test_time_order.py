"""One timestamp form everywhere, and claims in creation order (issue 17 item 8)."""

from __future__ import annotations

import contextlib
import json
import re
import sqlite3
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from aios_ledger.shell import AUTHORIZATION_ENV, TaskLedger
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_tasks_support import SEED_AUTHORIZATION, START, Clock

MILLISECOND_TEXT = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z")
LOOKS_LIKE_TIME = re.compile(r"\d{4}-\d\d-\d\dT\d\d:")


@pytest.fixture(autouse=True)
def _authorization(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(AUTHORIZATION_ENV, SEED_AUTHORIZATION)


def _create(ledger: TaskLedger, task_id: str, **fields: Any) -> None:
    task = {"task_id": task_id, "goal": "g", "instructions": "i", **fields}
    ledger.create_task(task, idempotency_key=f"create-{task_id}")


def _claim_all(ledger: TaskLedger) -> list[str]:
    order = []
    while (claim := ledger.claim(agent_id="w", capabilities=[], lease_seconds=60)) is not None:
        order.append(claim["task_id"])
    return order


def _texts(value: Any) -> Iterator[str]:
    """Every string in a stored value, JSON texts opened."""
    if isinstance(value, str):
        yield value
        if value[:1] in "{[":
            with contextlib.suppress(ValueError):  # text that only starts like JSON
                yield from _texts(json.loads(value))
    elif isinstance(value, dict):
        for item in value.values():
            yield from _texts(item)
    elif isinstance(value, list):
        for item in value:
            yield from _texts(item)


def _stored_times(path: Path) -> list[str]:
    con = sqlite3.connect(path)
    try:
        tables = [
            name
            for (name,) in con.execute(
                "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%'"
            )
        ]
        found = []
        for table in tables:
            for row in con.execute(f"SELECT * FROM {table}"):  # names from the catalogue
                found += [text for value in row for text in _texts(value)]
    finally:
        con.close()
    return [text for text in found if LOOKS_LIKE_TIME.match(text)]


@settings(
    max_examples=8,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(st.integers(min_value=0, max_value=86_400_000))
def test_every_time_a_lifecycle_writes_has_the_one_form(tmp_path: Path, offset_ms: int) -> None:
    clock = Clock(START + timedelta(milliseconds=offset_ms))
    path = tmp_path / f"form-{offset_ms}.db"
    with TaskLedger(path, clock=clock, jitter=lambda: 0.0) as ledger:
        _create(ledger, "t1", deadline="2030-01-01T00:00:00+02:00", not_before="2026-01-01T00:00Z")
        claim = ledger.claim(agent_id="w", capabilities=[], lease_seconds=60)
        assert claim is not None
        ledger.heartbeat("t1", lease_token=claim["lease_token"], lease_seconds=90)
        ledger.submit_result(
            "t1", lease_token=claim["lease_token"], result={"ok": 1}, idempotency_key="s"
        )
        ledger.verify("t1", decision="NEEDS_REWORK", reason="again", idempotency_key="v")
    times = _stored_times(path)
    assert times, "the lifecycle stored no time"
    assert [text for text in times if not MILLISECOND_TEXT.fullmatch(text)] == []


def test_equal_priorities_in_one_millisecond_are_claimed_in_creation_order(tmp_path: Path) -> None:
    # Ids that sort against their creation order, all at one fixed moment.
    created = [f"t-{index:02d}" for index in reversed(range(12))]
    with TaskLedger(tmp_path / "order.db", clock=Clock(), jitter=lambda: 0.0) as ledger:
        for task_id in created:
            _create(ledger, task_id, priority=5)
        _create(ledger, "urgent", priority=9)
        assert [task["task_id"] for task in ledger.list_tasks("QUEUED")] == ["urgent", *created]
        assert _claim_all(ledger) == ["urgent", *created]
