"""Pausing and resuming a task: the operation pair the transition table gained as two rows
(issue 27), on both engines, in process, on the command line and over HTTP.

A QUEUED task paused (PAUSED) is claimed by no one, named or not, until it is resumed (QUEUED
again, its attempts and schedule as they were). A task in any other status is refused
`INVALID_TRANSITION` and nothing changes: above all a CLAIMED one, whose holder is at work on
it (an owner cancels it to stop it, or pauses it once it is back in the queue). A paused task
may be cancelled. Each move is idempotent by its key, sealed (`TASK_PAUSED`, `TASK_RESUMED`,
with the reason and the status before and after), and over HTTP the owner's alone.
"""

from __future__ import annotations

import io
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from aios_ledger.core import LedgerError
from aios_ledger.core.tasks.requests import PauseRequest, ResumeRequest
from aios_ledger.shell import LedgerClient, TaskLedger, verify_log
from aios_ledger.shell.cli import main
from api_server import ApiServer
from conftest import both_engines
from test_tasks_support import Clock

pytest_generate_tests = both_engines


@pytest.fixture
def ledger(ledger_target: str | Path) -> Iterator[TaskLedger]:
    with TaskLedger(ledger_target, clock=Clock(), jitter=lambda: 0.0) as opened:
        yield opened


def _create(ledger: TaskLedger, task_id: str, priority: int = 0) -> None:
    task = {"task_id": task_id, "goal": "g", "instructions": "i", "priority": priority}
    ledger.create_task(task, idempotency_key=f"create-{task_id}")


def pause(task_id: str, key: str, reason: str = "the release freeze") -> PauseRequest:
    return PauseRequest.from_mapping({"task_id": task_id, "reason": reason, "idempotency_key": key})


def resume(task_id: str, key: str, reason: str = "the freeze is over") -> ResumeRequest:
    return ResumeRequest.from_mapping(
        {"task_id": task_id, "reason": reason, "idempotency_key": key}
    )


def _claim(ledger: TaskLedger, task_id: str | None = None) -> Any:
    return ledger.claim(agent_id="w1", capabilities=[], lease_seconds=60, task_id=task_id)


def _code(call: Any) -> str:
    with pytest.raises(LedgerError) as refused:
        call()
    return refused.value.code


def test_a_paused_task_is_claimed_by_no_one_until_it_is_resumed(ledger: TaskLedger) -> None:
    _create(ledger, "urgent", priority=10)
    _create(ledger, "later")
    paused = ledger.apply(pause("urgent", "pause-1"))
    assert paused["status"] == "PAUSED" and paused["previous_status"] == "QUEUED"
    assert paused["idempotent"] is False and paused["revision"] == 2
    assert [task["task_id"] for task in ledger.list_tasks("PAUSED")] == ["urgent"]
    # The higher priority is passed over, and a claim that names it is refused.
    assert _code(lambda: _claim(ledger, "urgent")) == "INVALID_TRANSITION"
    first = _claim(ledger)
    assert first is not None and first["task_id"] == "later"
    assert _claim(ledger) is None
    resumed = ledger.apply(resume("urgent", "resume-1"))
    assert resumed["status"] == "QUEUED" and resumed["previous_status"] == "PAUSED"
    again = _claim(ledger)
    assert again is not None and again["task_id"] == "urgent" and again["attempt"] == 1
    events = ledger.events("urgent")
    assert [event["event_type"] for event in events] == [
        "TASK_CREATED",
        "TASK_PAUSED",
        "TASK_RESUMED",
        "TASK_CLAIMED",
    ]
    assert events[1]["payload"] == {
        "reason": "the release freeze",
        "previous_status": "QUEUED",
        "next_state": "PAUSED",
    }
    assert events[1]["agent_id"] is None
    history = ledger.history("urgent")
    assert [entry["next_state"] for entry in history[1:3]] == ["PAUSED", "QUEUED"]
    assert [entry["reason"] for entry in history[1:3]] == [
        "the release freeze",
        "the freeze is over",
    ]
    report = verify_log(ledger.database)
    assert report.intact, report.public()


def test_each_move_is_idempotent_by_its_key(ledger: TaskLedger) -> None:
    _create(ledger, "t1")
    first = ledger.apply(pause("t1", "pause-t1"))
    again = ledger.apply(pause("t1", "pause-t1"))
    assert again == {**first, "idempotent": True}
    other = pause("t1", "pause-t1", reason="another reason")
    assert _code(lambda: ledger.apply(other)) == "IDEMPOTENCY_CONFLICT"
    ledger.apply(resume("t1", "resume-t1"))
    # The recorded answer is given again for its key, though the task has moved on since.
    assert ledger.apply(pause("t1", "pause-t1"))["status"] == "PAUSED"
    assert ledger.get("t1")["status"] == "QUEUED"
    kinds = [event["event_type"] for event in ledger.events("t1")]
    assert kinds == ["TASK_CREATED", "TASK_PAUSED", "TASK_RESUMED"]


def test_only_a_queued_task_is_paused_and_only_a_paused_one_resumed(ledger: TaskLedger) -> None:
    """Pausing a CLAIMED task is refused: its holder is at work on it, and a pause that took
    effect only at its release would need a column of its own. Nothing changes."""
    _create(ledger, "held")
    claim = _claim(ledger, "held")
    before = (ledger.get("held"), ledger.events("held"))
    assert _code(lambda: ledger.apply(pause("held", "pause-held"))) == "INVALID_TRANSITION"
    assert _code(lambda: ledger.apply(resume("held", "resume-held"))) == "INVALID_TRANSITION"
    assert (ledger.get("held"), ledger.events("held")) == before
    # The holder carries on, and the refused keys stay free.
    ledger.submit_result(
        "held", lease_token=claim["lease_token"], result={"ok": True}, idempotency_key="s"
    )
    assert _code(lambda: ledger.apply(pause("held", "pause-held"))) == "INVALID_TRANSITION"
    _create(ledger, "waiting")
    assert _code(lambda: ledger.apply(resume("waiting", "resume-w"))) == "INVALID_TRANSITION"
    assert _code(lambda: ledger.apply(pause("nobody", "pause-n"))) == "TASK_NOT_FOUND"
    assert ledger.apply(pause("waiting", "pause-held"))["status"] == "PAUSED"


def test_a_paused_task_may_be_cancelled_and_retried(ledger: TaskLedger) -> None:
    _create(ledger, "t1")
    ledger.apply(pause("t1", "p1"))
    cancelled = ledger.cancel("t1", reason="not needed", idempotency_key="c1")
    assert cancelled["status"] == "CANCELLED" and cancelled["previous_status"] == "PAUSED"
    assert _code(lambda: ledger.apply(resume("t1", "r1"))) == "INVALID_TRANSITION"
    assert ledger.retry("t1", reason="needed after all", idempotency_key="r2")["status"] == (
        "QUEUED"
    )


def test_bad_moves_are_refused_with_their_codes(ledger: TaskLedger) -> None:
    _create(ledger, "t1")
    for raw in (
        {"task_id": "t1", "reason": "r"},
        {"task_id": "t1", "reason": 5, "idempotency_key": "k"},
        {"task_id": "t1", "reason": "r", "idempotency_key": "k", "extra": 1},
        ["t1"],
    ):
        assert _code(lambda raw=raw: PauseRequest.from_mapping(raw)) == "FIELDS_INVALID"
    built = PauseRequest(task_id="t1", reason="x" * 5000, idempotency_key="k")  # type: ignore[arg-type]
    assert _code(lambda: ledger.apply(built)) == "FIELDS_INVALID"
    assert ledger.get("t1")["status"] == "QUEUED"


def _cli(target: str | Path, *argv: str, stdin: str | None = None) -> tuple[int, Any]:
    captured = io.StringIO()
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr("sys.stdout", captured)
        if stdin is not None:
            patch.setattr("sys.stdin", io.TextIOWrapper(io.BytesIO(stdin.encode())))
        code = main(["--db", str(target), *argv])
    text = captured.getvalue().strip()
    return code, json.loads(text) if text else None


def test_pause_and_resume_on_the_command_line(ledger_target: str | Path) -> None:
    assert _cli(ledger_target, "init")[0] == 0
    task = {"idempotency_key": "c1", "task": {"task_id": "t1", "goal": "g", "instructions": "i"}}
    assert _cli(ledger_target, "task", "create", "--json", "-", stdin=json.dumps(task))[0] == 0
    move = ("--reason", "freeze", "--idempotency-key", "pause-t1")
    code, paused = _cli(ledger_target, "task", "pause", "t1", *move)
    assert code == 0 and paused["status"] == "PAUSED" and paused["idempotent"] is False
    code, again = _cli(ledger_target, "task", "pause", "t1", *move)
    assert code == 0 and again["idempotent"] is True
    claim = json.dumps({"agent_id": "w1", "capabilities": [], "lease_seconds": 60})
    assert _cli(ledger_target, "claim", "--json", "-", stdin=claim) == (0, None)
    code, listed = _cli(ledger_target, "task", "list", "--status", "PAUSED", "--json")
    assert code == 0 and [entry["task_id"] for entry in listed] == ["t1"]
    thaw = ("--reason", "thaw", "--idempotency-key", "resume-t1")
    code, resumed = _cli(ledger_target, "task", "resume", "t1", *thaw)
    assert code == 0 and resumed["status"] == "QUEUED"
    code, claimed = _cli(ledger_target, "claim", "--json", "-", stdin=claim)
    assert code == 0 and claimed["task_id"] == "t1"
    # A refusal is `CODE: detail` and a non-zero exit.
    code, _ = _cli(ledger_target, "task", "resume", "t1", "--reason", "x", "--idempotency-key", "k")
    assert code != 0


def test_pause_and_resume_over_http(ledger_target: str | Path) -> None:
    """The owner's alone (an agent's or a reviewer's token is FORBIDDEN); the routes, their
    bodies and their role come from the transition table; a resume wakes the waiting claims;
    `LedgerClient.apply` sends the record itself."""
    with ApiServer(ledger_target, role_tokens=True) as server:
        owner, agent = server.client("owner"), server.client("agent")
        body = {
            "idempotency_key": "c1",
            "task": {"task_id": "t1", "goal": "g", "instructions": "i"},
        }
        assert owner.post("/v1/tasks", json=body).status_code == 201
        move = {"reason": "freeze", "idempotency_key": "pause-t1"}
        for who in ("agent", "reviewer"):
            refused = server.client(who).post("/v1/tasks/t1/pause", json=move)
            assert refused.status_code == 403 and refused.json()["code"] == "FORBIDDEN"
        paused = owner.post("/v1/tasks/t1/pause", json=move)
        assert paused.status_code == 200 and paused.json()["status"] == "PAUSED"
        claim = {"capabilities": [], "lease_seconds": 60}
        assert agent.post("/v1/claims", json=claim).status_code == 204
        unknown = owner.post("/v1/tasks/t1/resume", json={**move, "agent_id": "owner-1"})
        assert unknown.status_code == 422 and unknown.json()["code"] == "FIELDS_INVALID"
        document = owner.get("/openapi.json").json()
        assert document["paths"]["/v1/tasks/{task_id}/pause"]["post"]["x-roles"] == ["owner"]
        with LedgerClient(server.url, server.tokens["owner"]) as client:
            resumed = client.apply(resume("t1", "resume-t1"))
            assert resumed["status"] == "QUEUED" and resumed["previous_status"] == "PAUSED"
            assert client.apply(resume("t1", "resume-t1"))["idempotent"] is True
            with pytest.raises(LedgerError) as refused_move:
                client.apply(resume("t1", "resume-again"))
            assert refused_move.value.code == "INVALID_TRANSITION"
        taken = agent.post("/v1/claims", json=claim)
        assert taken.status_code == 200 and taken.json()["task_id"] == "t1"
