"""Who held a task stays known (0.x migration 0028, core/tasks/holders.py), on both engines:
`claimed_by` is cleared at submit and at a requeue (the older runtime's contract), yet the agent
that held a task in any attempt still finds it through `GET /v1/tasks?agent=`, `task list
--agent` and the console's filter and agent page; every task view carries its `last_holder`,
and `GET /v1/tasks/{task_id}` (`task show`) the holder of each attempt."""

from __future__ import annotations

import json
import secrets
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import apsw
import pytest
from aios_ledger.core.tasks.listing import TaskPageRequest, page_statement
from aios_ledger.shell.api.backend import ApiSettings
from aios_ledger.shell.api.tokens import issue_token
from aios_ledger.shell.cli import main
from aios_ledger.shell.db.connection import Database
from aios_ledger.shell.db.engines.postgresql import PARAMETER as _PARAMETER
from aios_ledger.shell.db.statements import statements
from aios_ledger.shell.serve.app import served_app
from aios_ledger.shell.tasks import listing
from aios_ledger.shell.tasks.ledger import TaskLedger
from conftest import both_engines
from schema_support import schema_script
from starlette.testclient import TestClient
from test_tasks_support import Clock

pytest_generate_tests = both_engines

KEY = secrets.token_bytes(32)
WORKER, OTHER, REVIEWER = "demo-worker", "worker-2", "reviewer-1"


def new_task(ledger: TaskLedger, task_id: str) -> None:
    task = {"task_id": task_id, "goal": f"goal of {task_id}", "instructions": "i"}
    ledger.create_task({**task, "max_attempts": 5}, idempotency_key=f"create-{task_id}")


def claimed(ledger: TaskLedger, agent: str, task_id: str) -> str:
    claim = ledger.claim(agent_id=agent, capabilities=[], lease_seconds=60, task_id=task_id)
    assert claim is not None and claim["claimed_by"] == agent
    return claim["lease_token"]


def submitted(ledger: TaskLedger, agent: str, task_id: str, key: str) -> None:
    token = claimed(ledger, agent, task_id)
    answer = ledger.submit_result(task_id, lease_token=token, result={"ok": 1}, idempotency_key=key)
    assert answer["claimed_by"] is None  # the seed's: the holder is cleared at submit


def verified(ledger: TaskLedger, task_id: str, decision: str, key: str) -> None:
    ledger.verify(
        task_id, decision=decision, reason="checked", idempotency_key=key, reviewer=REVIEWER
    )


@pytest.fixture
def done(ledger_target: Path | str) -> Iterator[Path | str]:
    """`t-done`: claimed by demo-worker, submitted and verified SUCCEEDED; `t-two`: held by
    demo-worker (released), then by worker-2 (submitted); `t-other`: worker-2's alone;
    `t-never`: never claimed."""
    with TaskLedger(ledger_target, clock=Clock()) as ledger:
        for task_id in ("t-done", "t-two", "t-other", "t-never"):
            new_task(ledger, task_id)
        submitted(ledger, WORKER, "t-done", "s-done")
        verified(ledger, "t-done", "SUCCEEDED", "v-done")
        token = claimed(ledger, WORKER, "t-two")
        ledger.release("t-two", lease_token=token, reason="handing over")
        submitted(ledger, OTHER, "t-two", "s-two")
        submitted(ledger, OTHER, "t-other", "s-other")
        assert ledger.get("t-done")["status"] == "SUCCEEDED"
    yield ledger_target


@pytest.fixture
def client(done: Path | str) -> Iterator[tuple[TestClient, str]]:
    """The app `serve` runs (API and console) over the ledger, in process, with an auditor's
    token."""
    with Database(done) as db:
        token = issue_token(db, "auditor-1", ["auditor"])["token"]
    app = served_app(ApiSettings(db_path=str(done)))
    try:
        yield TestClient(app, base_url="http://127.0.0.1"), token
    finally:
        app.state.backend.close()


def ids(tasks: Sequence[Mapping[str, Any]]) -> list[str]:
    return [task["task_id"] for task in tasks]


def test_the_api_finds_every_task_an_agent_held_with_its_holders(
    client: tuple[TestClient, str],
) -> None:
    http, token = client
    bearer = {"Authorization": f"Bearer {token}"}

    def listed(agent: str, **more: Any) -> list[dict[str, Any]]:
        answer = http.get("/v1/tasks", params={"agent": agent, **more}, headers=bearer)
        assert answer.status_code == 200, answer.text
        return list(answer.json()["tasks"])

    mine = listed(WORKER)
    assert ids(mine) == ["t-two", "t-done"]  # newest first; verified and handed over alike
    done = mine[1]
    assert (done["status"], done["claimed_by"], done["last_holder"]) == ("SUCCEEDED", None, WORKER)
    assert ids(listed(OTHER)) == ["t-other", "t-two"]
    assert ids(listed(WORKER, status="SUCCEEDED")) == ["t-done"]
    assert ids(listed(WORKER, limit=1)) == ["t-two"]
    assert listed("nobody") == []
    every = http.get("/v1/tasks", headers=bearer).json()["tasks"]
    assert {task["task_id"]: task["last_holder"] for task in every} == {
        "t-never": None,
        "t-other": OTHER,
        "t-two": OTHER,
        "t-done": WORKER,
    }
    two = http.get("/v1/tasks/t-two", headers=bearer).json()
    assert two["last_holder"] == OTHER and two["claimed_by"] is None
    assert [(h["attempt"], h["agent_id"]) for h in two["holders"]] == [(1, WORKER), (2, OTHER)]
    assert all(h["claimed_at"].endswith("Z") for h in two["holders"])
    never = http.get("/v1/tasks/t-never", headers=bearer).json()
    assert (never["holders"], never["last_holder"]) == ([], None)


def test_the_console_lists_an_agents_tasks_and_links_each_holder(
    client: tuple[TestClient, str],
) -> None:
    http, token = client
    assert http.post("/sign-in", data={"token": token}, follow_redirects=False).status_code == 303
    page = http.get("/tasks", params={"agent": WORKER})
    assert page.status_code == 200, page.text
    assert 'href="/tasks/t-done"' in page.text and 'href="/tasks/t-two"' in page.text
    assert 'href="/tasks/t-other"' not in page.text
    assert '<th scope="col">Last holder</th>' in page.text
    assert f'<a href="/agents/{WORKER}" class="holder-link">{WORKER}</a>' in page.text
    assert f'<a href="/agents/{OTHER}" class="holder-link">{OTHER}</a>' in page.text  # t-two's
    own = http.get(f"/agents/{WORKER}")
    assert own.status_code == 200, own.text
    assert f"<h1>Agent {WORKER}</h1>" in own.text
    assert 'href="/tasks/t-done"' in own.text and 'href="/tasks/t-two"' in own.text
    assert 'href="/tasks/t-other"' not in own.text and 'href="/tasks/t-never"' not in own.text
    assert "has held no task" in http.get("/agents/nobody").text


def test_the_agents_page_pages_by_cursor(done: Path | str) -> None:
    """An agent's page is the task list's keyset page: a next page's link, each task once."""
    from aios_ledger.shell.web.pages import agents

    with Database(done) as db:
        token = issue_token(db, "auditor-1", ["auditor"])["token"]
    app = served_app(ApiSettings(db_path=str(done)))
    original = agents.AGENT_PAGE_SIZE
    try:
        agents.AGENT_PAGE_SIZE = 1
        http = TestClient(app, base_url="http://127.0.0.1")
        http.post("/sign-in", data={"token": token}, follow_redirects=False)
        first = http.get(f"/agents/{OTHER}").text
        assert 'href="/tasks/t-other"' in first and 'href="/tasks/t-two"' not in first
        start = first.index('<a rel="next" href="') + len('<a rel="next" href="')
        following = first[start : first.index('"', start)].replace("&amp;", "&")
        second = http.get(following).text
        assert 'href="/tasks/t-two"' in second and 'href="/tasks/t-other"' not in second
        assert 'rel="next"' not in second
    finally:
        agents.AGENT_PAGE_SIZE = original
        app.state.backend.close()


def test_the_command_line_lists_an_agents_tasks_and_shows_the_holders(
    done: Path | str, capsys: pytest.CaptureFixture[str]
) -> None:
    def run(*argv: str) -> Any:
        assert main(["--db", str(done), *argv]) == 0
        return json.loads(capsys.readouterr().out)

    mine = run("task", "list", "--agent", WORKER)
    assert ids(mine) == ["t-two", "t-done"]
    assert [task["last_holder"] for task in mine] == [OTHER, WORKER]
    assert ids(run("task", "list", "--agent", WORKER, "--status", "SUCCEEDED")) == ["t-done"]
    assert run("task", "list", "--agent", "nobody") == []
    every = run("task", "list")
    assert [task["last_holder"] for task in every] == [WORKER, OTHER, OTHER, None]
    shown = run("task", "show", "t-two")
    assert [(h["attempt"], h["agent_id"]) for h in shown["holders"]] == [(1, WORKER), (2, OTHER)]


def test_the_last_holder_while_claimed_after_submit_and_after_requeues(
    ledger_target: Path | str,
) -> None:
    clock = Clock()
    with TaskLedger(ledger_target, clock=clock) as ledger:
        new_task(ledger, "t")

        def holder() -> tuple[str, str | None, str | None]:
            (listed,) = ledger.list_tasks()
            page = listing.read_task_page(ledger.database, TaskPageRequest.from_mapping({}), KEY)
            assert page["tasks"][0]["last_holder"] == listed["last_holder"]
            assert ledger.get("t")["last_holder"] == listed["last_holder"]
            return listed["status"], listed["claimed_by"], listed["last_holder"]

        assert holder() == ("QUEUED", None, None)
        token = claimed(ledger, WORKER, "t")
        assert holder() == ("CLAIMED", WORKER, WORKER)
        ledger.submit_result("t", lease_token=token, result={"ok": 1}, idempotency_key="s1")
        assert holder() == ("SUBMITTED", None, WORKER)
        verified(ledger, "t", "NEEDS_REWORK", "v1")  # requeued: the seed's claimed_by=NULL
        assert holder() == ("QUEUED", None, WORKER)
        clock.advance(3600)  # past the retry's backoff
        claimed(ledger, OTHER, "t")
        assert holder() == ("CLAIMED", OTHER, OTHER)
        clock.advance(120)
        assert ledger.expire_leases()["count"] == 1  # requeued by its lease's end
        assert holder() == ("QUEUED", None, OTHER)
        clock.advance(3600)
        claimed(ledger, WORKER, "t")  # the first holder again, a third attempt
        assert holder() == ("CLAIMED", WORKER, WORKER)
        holders = [(h["attempt"], h["agent_id"]) for h in ledger.get("t")["holders"]]
        assert holders == [(1, WORKER), (2, OTHER), (3, WORKER)]
        for agent in (WORKER, OTHER):
            assert ids(ledger.list_tasks(agent=agent)) == ["t"]  # each once


def test_an_agent_of_many_tasks_is_read_in_creation_order_with_the_same_answer(
    done: Path | str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Over SORTED_FILTER_BOUND held tasks the page is read in creation order, each task
    probed for a claim of the agent (events_claims_by_agent): the same tasks as through the
    agent's claims, paged alike."""
    chosen: list[str] = []

    def read_all(agent: str) -> list[str]:
        found: list[str] = []
        cursor: str | None = None
        while True:
            mapping = {"agent": agent, "limit": 1, **({"cursor": cursor} if cursor else {})}
            with Database(done) as db:
                page = listing.read_task_page(db, TaskPageRequest.from_mapping(mapping), KEY)
            found += ids(page["tasks"])
            cursor = page["next_cursor"]
            if cursor is None:
                return found

    def spy(request: TaskPageRequest, counted: dict[str, int]) -> str:
        chosen.append(page_statement(request, counted))
        return chosen[-1]

    monkeypatch.setattr(listing, "page_statement", spy)
    through_claims = {agent: read_all(agent) for agent in (WORKER, OTHER)}
    assert set(chosen) == {"tasks_page_of_agent"}
    chosen.clear()

    def in_creation_order(request: TaskPageRequest, counted: dict[str, int]) -> str:
        chosen.append("tasks_page")
        return "tasks_page"

    monkeypatch.setattr(listing, "page_statement", in_creation_order)
    assert {agent: read_all(agent) for agent in (WORKER, OTHER)} == through_claims
    assert through_claims == {WORKER: ["t-two", "t-done"], OTHER: ["t-other", "t-two"]}


# The holders' reads and the access path each must take on SQLite (its planner has no
# statistics; PostgreSQL's picks by them: measured at 100,000 tasks in docs/console.md).
PLANS = {
    "tasks_count_of_agent": ("events USING COVERING INDEX events_claims_by_agent (agent_id=?)",),
    "tasks_page_of_agent": (
        "events USING COVERING INDEX events_claims_by_agent (agent_id=?)",
        "tasks USING INDEX sqlite_autoindex_tasks_1 (task_id=?)",
    ),
    "tasks_page": (
        "tasks USING INDEX tasks_by_seq (seq>? AND seq<?)",
        "claim USING COVERING INDEX events_claims_by_agent (agent_id=? AND task_id=?)",
    ),
    "task_holders": ("events USING INDEX events_claims_by_task (task_id=?)",),
    "task_last_holders": ("events USING INDEX events_claims_by_task (task_id=?)",),
}


@pytest.mark.parametrize("name", sorted(PLANS))
def test_the_holders_reads_are_index_reads_on_sqlite(name: str) -> None:
    conn = apsw.Connection(":memory:")
    conn.execute(schema_script())
    text = statements("sqlite")[name].sql
    params = {"agent": "a", "task_id": "t", "task_ids_json": '["t"]', "after_seq": 9, "bound": 9}
    asked = {match.group(2) for match in _PARAMETER.finditer(text) if match.group(2)}
    plan = [
        row[3]
        for row in conn.execute(
            f"EXPLAIN QUERY PLAN {text}", {key: params.get(key, 1) for key in asked}
        )
    ]
    conn.close()
    for expected in PLANS[name]:
        assert any(expected in step for step in plan), (name, plan)
    assert not any(step.startswith("SCAN events") or step == "SCAN tasks" for step in plan), plan
