"""The task list's access paths (core/tasks/listing.py `page_statement`, 0.x migration 0025's
indexes, 0028's for an agent) on both engines: each filter read through its own index (an
agent's tasks, a created or updated range, a status of few tasks) or the creation order pages
through exactly the tasks a plain reading of the whole table finds, newest first, each once;
and a read in creation order bounded by SCAN_BOUND leaves a page short with a cursor that goes
on below it, so that a search of few matches still finds every one, a bounded number of tasks
per page."""

from __future__ import annotations

import secrets
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from aios_ledger.core.tasks.listing import (
    SORTED_FILTER_BOUND,
    SORTED_STATUS_BOUND,
    TaskPageRequest,
    page_statement,
)
from aios_ledger.shell.db.connection import Database
from aios_ledger.shell.tasks import listing
from aios_ledger.shell.tasks.ledger import TaskLedger
from conftest import both_engines

pytest_generate_tests = both_engines

TASKS = 30
KEY = secrets.token_bytes(32)


@pytest.fixture
def ledger(ledger_target: Path | str) -> Iterator[tuple[Database, list[dict[str, Any]]]]:
    """TASKS tasks (every third needs `cap-3`, goals numbered), the first 8 claimed by two
    agents; and every task as the table holds it, newest first."""
    with Database(ledger_target) as db:
        tasks = TaskLedger(database=db)
        tasks.create_tasks(
            [
                (
                    {
                        "goal": f"listed goal {n:02d}",
                        "instructions": "i",
                        "required_capabilities": ["cap-3"] if n % 3 == 0 else [],
                    },
                    f"k-{n}",
                )
                for n in range(TASKS)
            ]
        )
        for agent in ("agent-a", "agent-b"):
            tasks.claim_many(agent_id=agent, capabilities=["cap-3"], lease_seconds=60, limit=4)
        every = walk(db, {}, limit=1000)
        assert len(every) == TASKS
        yield db, every


def walk(db: Database, filters: dict[str, Any], *, limit: int = 3) -> list[dict[str, Any]]:
    """Every page of `filters`, joined."""
    seen: list[dict[str, Any]] = []
    cursor: str | None = None
    for _ in range(1000):
        mapping = {**filters, "limit": limit, **({"cursor": cursor} if cursor else {})}
        page = listing.read_task_page(db, TaskPageRequest.from_mapping(mapping), KEY)
        seen += [dict(task) for task in page["tasks"]]
        cursor = page["next_cursor"]
        if cursor is None:
            return seen
    raise AssertionError("no last page")


@pytest.fixture
def chosen(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The statements the pages were read with."""
    names: list[str] = []

    def spy(request: TaskPageRequest, counted: dict[str, int]) -> str:
        names.append(page_statement(request, counted))
        return names[-1]

    monkeypatch.setattr(listing, "page_statement", spy)
    return names


def test_each_filter_pages_through_what_the_table_holds(
    ledger: tuple[Database, list[dict[str, Any]]], chosen: list[str]
) -> None:
    db, every = ledger
    middle = sorted(task["updated_at"] for task in every)[TASKS // 2]
    cases: list[tuple[dict[str, Any], Any, str]] = [
        ({"agent": "agent-a"}, lambda t: t["claimed_by"] == "agent-a", "tasks_page_of_agent"),
        ({"status": "CLAIMED"}, lambda t: t["status"] == "CLAIMED", "tasks_page_of_status"),
        (
            {"updated_from": middle},
            lambda t: t["updated_at"] >= middle,
            "tasks_page_of_updated",
        ),
        (
            {"created_to": every[0]["created_at"], "capability": "cap-3"},
            lambda t: (
                t["created_at"] <= every[0]["created_at"]
                and t["task_id"] in {x["task_id"] for x in every if "cap-3" in str(x)}
            ),
            "tasks_page_of_created",
        ),
        ({"search": "GOAL 1"}, lambda t: "goal 1" in t["goal"], "tasks_page"),
    ]
    for filters, matches, statement in cases:
        chosen.clear()
        expected = [task["task_id"] for task in every if matches(task)]
        assert expected, filters
        assert [task["task_id"] for task in walk(db, filters)] == expected, filters
        assert set(chosen) == {statement}, filters


def test_a_bounded_read_leaves_a_page_short_and_goes_on_below_it(
    ledger: tuple[Database, list[dict[str, Any]]], monkeypatch: pytest.MonkeyPatch
) -> None:
    db, every = ledger
    monkeypatch.setattr(listing, "SCAN_BOUND", 4)
    request = TaskPageRequest.from_mapping({"search": "listed goal 00", "limit": 5})
    first = listing.read_task_page(db, request, KEY)
    assert first["tasks"] == [] and first["next_cursor"] is not None  # 4 newest: no match
    found = walk(db, {"search": "listed goal 0"}, limit=5)
    assert [task["goal"] for task in found] == [f"listed goal {n:02d}" for n in range(9, -1, -1)]
    assert [t["task_id"] for t in walk(db, {}, limit=7)] == [t["task_id"] for t in every]


def test_the_filter_of_fewest_tasks_within_its_bound_is_read_through_its_index() -> None:
    of = TaskPageRequest.from_mapping
    both = of({"status": "FAILED", "created_from": "2026-01-01T00:00:00Z", "agent": "a"})
    assert page_statement(both, {"status": 10, "created": 3}) == "tasks_page_of_created"
    assert page_statement(both, {"status": 3, "created": 10}) == "tasks_page_of_status"
    over = {"status": SORTED_STATUS_BOUND + 1, "created": SORTED_FILTER_BOUND + 1}
    assert page_statement(both, {**over, "agent": 20}) == "tasks_page_of_agent"
    # An agent that held more tasks than the bound: the creation order, each task probed.
    assert page_statement(both, {**over, "agent": SORTED_FILTER_BOUND + 1}) == "tasks_page"
    assert page_statement(of({"search": "x"}), {}) == "tasks_page"
