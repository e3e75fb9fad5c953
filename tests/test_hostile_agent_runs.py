"""A hostile agent against the evidence runs: squatting the run of an attempt it does not
hold, writing into another agent's attempt, outliving its own lease, passing for a task's
session by its token's name; through the server `serve` runs, the real worker and reviewer
command lines, and the library on both engines.

Figures: 35 hostile cases tried, 35 refused (25 squatting creates over HTTP: 8 forms before
each of the two attempts and after the first, and one by a token named like the task's
session; 5 appends over HTTP; 5 calls of the library); each refusal a LedgerError with a
stable code that changed nothing, and the holder's task still went through its review to
SUCCEEDED.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from aios_ledger.core import LedgerError
from aios_ledger.core.tasks.attempts import is_reserved_run, refuse_reserved
from aios_ledger.shell import LedgerClient, RunStore, TaskLedger, verify_log
from api_server import ApiServer, HeldClock
from conftest import both_engines, fresh_target
from hostile_support import problem as refused
from test_remote_work import remote
from test_worker_e2e import AGENT, REVIEWER, create, task, wait_until_due

pytest_generate_tests = both_engines

# Every form a squatter could take an attempt's run (or a review's) in, before its holder does.
SQUATS: tuple[dict[str, str], ...] = (
    {"run_id": "task-squat@1"},
    {"run_id": "task-squat@2"},
    {"run_id": "task-squat@3"},
    {"run_id": "task-squat@99"},
    {"run_id": "task-squat@2", "session_id": "task:task-squat"},
    {"run_id": "any-name", "session_id": "task:task-squat"},
    {"run_id": "review:task-squat:1:1"},
    {"run_id": "free-id", "session_id": "review:task-squat:1:1"},
)


@pytest.fixture
def server(tmp_path: Path) -> Iterator[ApiServer]:
    with ApiServer(tmp_path / "ledger.db", clock=HeldClock()) as running:
        yield running


def agent_client(server: ApiServer, name: str) -> httpx.Client:
    return server.client(token=server.issue(name, "agent"))


def squat(attacker: httpx.Client) -> None:
    """Every squat refused RUN_ID_RESERVED, and none of them left a run behind."""
    for body in SQUATS:
        answer = attacker.post("/v1/runs", json={"prompt": "attempt 2", **body})
        refused(answer, 403, "RUN_ID_RESERVED")
        if not body["run_id"].startswith("task-squat@"):
            assert attacker.get(f"/v1/runs/{body['run_id']}").status_code == 404


def work(server: ApiServer, token: Path, attempt: int) -> None:
    worked = remote(
        "worker", "--api", server.url, "--token-file", str(token), "--agent-id", "holder",
        "--exec", AGENT, "--until-empty",
    )  # fmt: skip
    assert worked.returncode == 0, worked.stderr
    assert f"task task-squat attempt {attempt}: submitted" in worked.stderr
    assert "RUN_CONFLICT" not in worked.stderr and "evidence not recorded" not in worked.stderr


def review(server: ApiServer, token: Path) -> str:
    reviewed = remote("review", "--api", server.url, "--token-file", str(token), "--exec", REVIEWER)
    assert reviewed.returncode == 0, reviewed.stderr
    (verdict,) = json.loads(reviewed.stdout)["reviews"]
    assert verdict["outcome"] == "verified", verdict
    return str(verdict["decision"])


def test_a_squatter_cannot_take_an_attempts_run_and_the_holders_task_moves_on(
    server: ApiServer, tmp_path: Path
) -> None:
    """The finding: `POST /v1/runs {"run_id": "t@2"}` answered 201, and the holder's worker
    then exited RUN_CONFLICT on attempt 2, its task stuck CLAIMED and its review failing."""
    create(server.db, "task-squat", retry={"base_seconds": 1, "max_seconds": 1})
    holder = server.token_file(tmp_path, "holder", "agent")
    reviewer = server.token_file(tmp_path, "reviewer", "reviewer")
    attacker = agent_client(server, "mallory")
    squat(attacker)
    assert attacker.get("/v1/runs/task-squat@1").status_code == 404  # the claim's to create
    work(server, holder, 1)
    squat(attacker)  # now for the attempt after the one that ran
    forged = attacker.post("/v1/runs/task-squat@1/events", json={"kind": "stderr", "payload": {}})
    refused(forged, 403, "NOT_RUN_OWNER")
    assert review(server, reviewer) == "NEEDS_REWORK"
    wait_until_due(server.db, "task-squat")
    squat(attacker)  # the task is QUEUED again: attempt 2 is next
    work(server, holder, 2)
    assert review(server, reviewer) == "SUCCEEDED"
    final = task(server.db, "task-squat")
    assert (final["status"], final["attempt"]) == ("SUCCEEDED", 2)
    for attempt in (1, 2):
        run = attacker.get(f"/v1/runs/task-squat@{attempt}").json()
        assert (run["session_id"], run["prompt"]) == ("task:task-squat", f"attempt {attempt}")
        assert run["event_count"] >= 1  # the worker's own events, at least its exit


def test_a_token_named_like_a_tasks_session_cannot_write_its_evidence(server: ApiServer) -> None:
    """An agent's own runs are those of its session (its name): a token named `task:T` passed
    for the owner of task T's evidence runs, and appended to the holder's attempt."""
    create(server.db, "task-named")
    impostor = agent_client(server, "task:task-named")
    with LedgerClient(server.url, server.issue("holder", "agent")) as holder:
        claim = holder.claim(agent_id="holder", capabilities=[], lease_seconds=60)
        assert claim is not None
        token = str(claim["lease_token"])
        body = {"kind": "stderr", "payload": {"line": "forged"}, "lease_token": token}
        refused(impostor.post("/v1/runs/task-named@1/events", json=body), 403, "NOT_RUN_OWNER")
        own = impostor.post("/v1/runs", json={"prompt": "mine", "run_id": "mine"})
        refused(own, 403, "RUN_ID_RESERVED")  # its default session is a task's
        holder.append_event("task-named@1", "stderr", {"line": "real"}, lease_token=token)
        assert [e.payload() for e in holder.run_events("task-named@1")] == [{"line": "real"}]


def test_the_holder_appends_to_its_attempts_run_only_under_its_lease(server: ApiServer) -> None:
    """The holder of an attempt whose lease passed (the task still CLAIMED, nobody expired it)
    was let append, as was a caller sending another lease's token or none."""
    create(server.db, "task-lease")
    create(server.db, "task-other")
    token = server.issue("holder", "agent")
    agent = server.client(token=token)
    clock = server.clock
    assert isinstance(clock, HeldClock)
    clock.hold()
    with LedgerClient(server.url, token) as holder:
        claim = holder.claim(
            agent_id="holder", capabilities=[], lease_seconds=1, task_id="task-lease"
        )
        other = holder.claim(
            agent_id="holder", capabilities=[], lease_seconds=60, task_id="task-other"
        )
        assert claim is not None and other is not None
        path, event = "/v1/runs/task-lease@1/events", {"kind": "stderr", "payload": {}}
        refused(agent.post(path, json=event), 409, "LEASE_INVALID")
        wrong = {**event, "lease_token": other["lease_token"]}
        refused(agent.post(path, json=wrong), 409, "LEASE_INVALID")
        clock.advance(1.5)  # past the 1 s lease on the server's clock, not waited out
        late = {**event, "lease_token": claim["lease_token"]}
        refused(agent.post(path, json=late), 409, "LEASE_EXPIRED")
        assert holder.get_run("task-lease@1").event_count == 0


@pytest.mark.usefixtures("engine_targets")
def test_the_library_refuses_reserved_runs_and_appends_without_the_lease() -> None:
    """Over the library as over HTTP: the claim creates its attempt's run (on both engines);
    nobody creates a run in a reserved form, and an attempt's run takes events only with the
    current lease's token. Every refusal leaves the runs and the log as they were."""
    ledger = TaskLedger(fresh_target())
    runs = RunStore(database=ledger.database)
    try:
        for task_id in ("t1", "t2"):
            ledger.create_task(task_body(task_id), idempotency_key=f"create-{task_id}")
        claims = ledger.claim_many(agent_id="a", capabilities=[], lease_seconds=60, limit=2)
        assert [(runs.get_run(f"{c['task_id']}@1").session_id) for c in claims] == [
            "task:t1",
            "task:t2",
        ]
        cases: list[tuple[Any, str]] = [
            (lambda: runs.create_run("task:t1", "attempt 2", run_id="t1@2"), "RUN_ID_RESERVED"),
            (lambda: runs.create_run("mallory", "attempt 2", run_id="t1@2"), "RUN_ID_RESERVED"),
            (lambda: runs.append_event("t1@1", "stderr", {}), "LEASE_INVALID"),
            (
                lambda: runs.append_event("t1@1", "x", {}, lease_token=claims[1]["lease_token"]),
                "LEASE_INVALID",
            ),
            (lambda: runs.create_attempt_run("t1", 2), "RUN_NOT_FOUND"),  # not claimed yet
        ]
        for call, code in cases:
            with pytest.raises(LedgerError) as refusal:
                call()
            assert refusal.value.code == code
        with pytest.raises(LedgerError):
            runs.get_run("t1@2")
        assert runs.get_run("t1@1").event_count == 0
        runs.append_event("t1@1", "stderr", {"line": "ok"}, lease_token=claims[0]["lease_token"])
        assert runs.create_attempt_run("t1", 1) == runs.get_run("t1@1")  # the claim's, again
        assert verify_log(ledger.database).intact
    finally:
        ledger.close()


def task_body(task_id: str) -> dict[str, Any]:
    return {
        "task_id": task_id,
        "goal": "g",
        "instructions": "i",
        "success_criteria": [{"id": "done", "description": "done"}],
        "required_capabilities": [],
        "constraints": {},
        "metadata": {},
        "priority": 0,
        "max_attempts": 3,
    }


def test_the_reserved_forms() -> None:
    for run_id in ("t@1", "a@b@12", "review:t:1:1"):
        assert is_reserved_run(run_id)
    for run_id in ("t@", "t@x", "run-0123", "t@1x", "reviewer:1"):
        assert not is_reserved_run(run_id)
    for session, run_id in (("task:t", "free"), ("review:t:1:1", "free"), ("alice", "t@3")):
        with pytest.raises(LedgerError) as refusal:
            refuse_reserved(session, run_id)
        assert str(refusal.value).startswith("RUN_ID_RESERVED")
    refuse_reserved("alice", "alice-run-1")
