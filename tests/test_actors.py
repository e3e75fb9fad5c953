"""Every event names who caused it: the token over HTTP and MCP, the identity the command line
or the library was given (declared, so unauthenticated), the ledger itself for its own work;
an event written before actors were recorded reads as unknown."""

from __future__ import annotations

import asyncio
import json
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from aios_ledger.core import LedgerError
from aios_ledger.core.actors import (
    UNKNOWN_ACTOR,
    Actor,
    actor_from_stored,
    actor_label,
    actor_label_of,
)
from aios_ledger.core.attest.accountability import who_did_what
from aios_ledger.core.tasks.history import task_history
from aios_ledger.shell import Database, TaskLedger
from aios_ledger.shell.actors import ACTOR_ENV, VIA_HEADER, acting_as, current_actor
from aios_ledger.shell.api.app import create_app
from aios_ledger.shell.api.backend import ApiSettings
from aios_ledger.shell.api.tokens import issue_token
from aios_ledger.shell.cli import main
from aios_ledger.shell.log.verification import verify_log
from starlette.applications import Starlette
from syrupy.assertion import SnapshotAssertion

TASK = {"goal": "g", "instructions": "i"}


def actors_of(path: Path, task_id: str | None = None) -> list[tuple[str, dict[str, Any] | None]]:
    """Each event's type and stored actor, read with the standard library."""
    with sqlite3.connect(path) as conn:
        rows = conn.execute(
            "SELECT event_type, actor FROM events WHERE ? IS NULL OR task_id = ? ORDER BY event_id",
            (task_id, task_id),
        ).fetchall()
    return [(kind, None if actor is None else json.loads(actor)) for kind, actor in rows]


# -- the record -------------------------------------------------------------------------------


def test_an_actor_is_named_checked_and_read_back() -> None:
    token = Actor("alice", "http", ("reviewer", "owner"))
    assert token.roles == ("owner", "reviewer")  # sorted, so one actor has one text
    assert token.authenticated
    assert token.label() == "alice (owner, reviewer, http)"
    declared = Actor("ci-bot", "cli")
    assert not declared.authenticated
    assert declared.label() == "ci-bot (cli, unauthenticated)"
    assert actor_from_stored(token.stored()) == token
    assert actor_label(declared.stored()) == "ci-bot (cli, unauthenticated)"
    assert actor_label_of(token.public()) == token.label()
    for bad in ("", " padded", "a\nb", "x" * 129):
        with pytest.raises(LedgerError) as refused:
            Actor(bad, "cli")
        assert refused.value.code == "ACTOR_INVALID"
    with pytest.raises(LedgerError, match="ACTOR_INVALID"):
        Actor("a", "carrier-pigeon")
    with pytest.raises(LedgerError, match="ACTOR_INVALID"):
        Actor("a", "http", ("Owner!",))


@pytest.mark.parametrize(
    "stored", [None, "not json", "[]", '{"name":"a"}', '{"name":1,"via":"cli","roles":[]}']
)
def test_an_event_that_names_no_actor_reads_as_unknown(stored: str | None) -> None:
    assert actor_from_stored(stored) is None
    assert actor_label(stored) == UNKNOWN_ACTOR


def test_history_shows_each_events_actor_and_unknown_for_older_ones() -> None:
    events: list[Any] = [
        {
            "event_id": 1,
            "task_id": "t",
            "agent_id": None,
            "event_type": "TASK_CREATED",
            "payload": {},
            "created_at": "2026-12-01T00:00:00.000Z",
            "actor": None,
        },
        {
            "event_id": 2,
            "task_id": "t",
            "agent_id": None,
            "event_type": "TASK_CANCELLED",
            "payload": {"reason": "r"},
            "created_at": "2026-12-01T00:00:01.000Z",
            "actor": Actor("owner-1", "http", ("owner",)).public(),
        },
    ]
    assert [entry["actor"] for entry in task_history(events)] == [
        "unknown",
        "owner-1 (owner, http)",
    ]


# -- the library --------------------------------------------------------------------------------


def test_the_library_acts_as_what_it_is_told_else_the_environment_else_the_user(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(ACTOR_ENV, raising=False)
    path = tmp_path / "ledger.db"
    with TaskLedger(path) as ledger:
        ledger.create_task(TASK, idempotency_key="a")
        monkeypatch.setenv(ACTOR_ENV, "nightly-job")
        ledger.create_task(TASK, idempotency_key="b")
        with acting_as(Actor("embedder", "library")):
            ledger.create_task(TASK, idempotency_key="c")
        assert verify_log(ledger.database).intact
    (_, first), (_, second), (_, third) = actors_of(path)
    assert first is not None and first["via"] == "library" and first["name"]  # the OS user
    assert second == {"name": "nightly-job", "via": "library", "roles": []}
    assert third == {"name": "embedder", "via": "library", "roles": []}


def test_a_write_queued_behind_others_names_its_own_caller(tmp_path: Path) -> None:
    """The actor is read where the call comes in, not where the write runs: two threads sharing
    one ledger, each acting as its own caller, each write all their tasks (one transaction at a
    time on the shared connection) and get their own actor on their own events."""
    import sys
    import threading

    # Threads switch as often as they can, so that their transactions would interleave.
    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    path = tmp_path / "ledger.db"
    refused: list[LedgerError] = []
    try:
        with TaskLedger(path) as ledger:

            def create(name: str) -> None:
                with acting_as(Actor(name, "library")):
                    for n in range(20):
                        try:
                            ledger.create_task(
                                {**TASK, "task_id": f"{name}-{n}"}, idempotency_key=f"{name}{n}"
                            )
                        except LedgerError as exc:
                            refused.append(exc)

            names = ("left", "right")
            threads = [threading.Thread(target=create, args=(name,)) for name in names]
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join()
    finally:
        sys.setswitchinterval(interval)
    assert refused == []
    with sqlite3.connect(path) as conn:
        events = conn.execute("SELECT task_id, actor FROM events").fetchall()
    assert len(events) == 40
    for task_id, actor in events:
        assert json.loads(actor)["name"] == task_id.split("-")[0]


# -- the command line ---------------------------------------------------------------------------


@pytest.fixture
def ledger_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.delenv(ACTOR_ENV, raising=False)
    monkeypatch.chdir(tmp_path)  # no ./aios-ledger.toml but the tests' own
    path = tmp_path / "ledger.db"
    assert main(["--db", str(path), "init"]) == 0
    return path


def create(path: Path, key: str, *flags: str) -> int:
    request = path.parent / f"{key}.json"
    request.write_text(json.dumps({"idempotency_key": key, "task": {**TASK, "task_id": key}}))
    return main(["--db", str(path), *flags, "task", "create", "--json", str(request)])


def test_the_command_line_acts_as_its_flag_the_environment_or_the_config(
    ledger_file: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    assert create(ledger_file, "by-flag", "--as", "alice") == 0
    monkeypatch.setenv(ACTOR_ENV, "from-env")
    assert create(ledger_file, "by-env") == 0
    assert create(ledger_file, "flag-wins", "--as", "bob") == 0
    monkeypatch.delenv(ACTOR_ENV)
    config = ledger_file.parent / "aios-ledger.toml"
    config.write_text('[identity]\nactor = "carol"\n')
    assert create(ledger_file, "by-config") == 0
    config.unlink()
    assert create(ledger_file, "by-default") == 0
    names = {kind_actor[1]["name"] for kind_actor in actors_of(ledger_file)[:4] if kind_actor[1]}
    assert names == {"alice", "from-env", "bob", "carol"}
    for _, actor in actors_of(ledger_file):
        assert actor is not None and actor["via"] == "cli" and actor["roles"] == []
    *_, (_, default) = actors_of(ledger_file)
    assert default is not None and default["name"] not in names  # the OS user
    capsys.readouterr()
    assert main(["--db", str(ledger_file), "task", "history", "by-flag"]) == 0
    history = json.loads(capsys.readouterr().out)
    assert history[0]["actor"] == "alice (cli, unauthenticated)"
    assert main(["--db", str(ledger_file), "events", "by-flag"]) == 0
    events = json.loads(capsys.readouterr().out)
    assert events[0]["actor"] == {
        "name": "alice",
        "via": "cli",
        "roles": [],
        "authenticated": False,
    }
    # `status` lists the last events with their actors the same way, not as stored text.
    assert main(["--db", str(ledger_file), "status"]) == 0
    last = json.loads(capsys.readouterr().out)["last_events"]
    assert {event["actor"]["name"] for event in last} >= {"alice", "from-env", "bob", "carol"}
    assert all(event["actor"]["via"] == "cli" for event in last)


def test_a_name_that_is_no_identity_is_refused_and_writes_nothing(
    ledger_file: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert create(ledger_file, "bad", "--as", "a\tb") == 1
    assert capsys.readouterr().err.startswith("ACTOR_INVALID: --as:")
    assert actors_of(ledger_file) == []


def test_the_process_identity_does_not_outlive_the_command(ledger_file: Path) -> None:
    assert create(ledger_file, "x", "--as", "transient") == 0
    assert current_actor().name != "transient"


# -- the API ------------------------------------------------------------------------------------


@pytest.fixture
def api(tmp_path: Path) -> Iterator[tuple[Starlette, dict[str, str], Path]]:
    path = tmp_path / "ledger.db"
    with Database(path) as db:
        tokens = {
            "owner-1": issue_token(db, "owner-1", ["owner"])["token"],
            "agent-7": issue_token(db, "agent-7", ["agent"], any_capability=True)["token"],
            "reviewer-2": issue_token(db, "reviewer-2", ["reviewer"])["token"],
        }
    application = create_app(ApiSettings(db_path=str(path)))
    yield application, tokens, path
    application.state.backend.close()


def call(
    application: Starlette, token: str, method: str, url: str, body: Any = None, **headers: str
) -> httpx.Response:
    async def send() -> httpx.Response:
        transport = httpx.ASGITransport(app=application)
        async with httpx.AsyncClient(transport=transport, base_url="http://api") as client:
            return await client.request(
                method, url, json=body, headers={"Authorization": f"Bearer {token}", **headers}
            )

    return asyncio.run(send())


def test_each_write_over_http_names_its_token_and_roles(
    api: tuple[Starlette, dict[str, str], Path],
) -> None:
    application, tokens, path = api
    created = call(
        application,
        tokens["owner-1"],
        "POST",
        "/v1/tasks",
        {"idempotency_key": "c", "task": {**TASK, "task_id": "t-http"}},
    )
    assert created.status_code in (200, 201), created.text
    claimed = call(
        application,
        tokens["agent-7"],
        "POST",
        "/v1/claims",
        {"capabilities": [], "lease_seconds": 60},
        **{VIA_HEADER: "mcp"},
    )
    assert claimed.status_code == 200, claimed.text
    lease = claimed.json()["lease_token"]
    submitted = call(
        application,
        tokens["agent-7"],
        "POST",
        "/v1/tasks/t-http/result",
        {"lease_token": lease, "result": {"ok": True}, "idempotency_key": "s"},
    )
    assert submitted.status_code == 200, submitted.text
    verified = call(
        application,
        tokens["reviewer-2"],
        "POST",
        "/v1/tasks/t-http/verification",
        {"decision": "SUCCEEDED", "reason": "looks right", "idempotency_key": "v"},
    )
    assert verified.status_code == 200, verified.text
    by_type = {
        kind: (actor["name"], actor["via"], actor["roles"])
        for kind, actor in actors_of(path, "t-http")
        if actor is not None
    }
    assert by_type == {
        "TASK_CREATED": ("owner-1", "http", ["owner"]),
        "TASK_CLAIMED": ("agent-7", "mcp", ["agent"]),
        "RESULT_SUBMITTED": ("agent-7", "http", ["agent"]),
        "TASK_VERIFIED": ("reviewer-2", "http", ["reviewer"]),
    }
    history = call(application, tokens["owner-1"], "GET", "/v1/tasks/t-http/history").json()
    verified_entry = [entry for entry in history if entry["event"] == "TASK_VERIFIED"]
    assert verified_entry[0]["actor"] == "reviewer-2 (reviewer, http)"
    events = call(application, tokens["owner-1"], "GET", "/v1/tasks/t-http/events").json()
    assert events[0]["actor"]["authenticated"] is True
    with Database(path) as db:
        assert verify_log(db).intact


def test_who_did_what_is_read_from_the_events_alone(golden: SnapshotAssertion) -> None:
    """A task's record as a person asks it: created, projected, held, judged (by a reviewer and
    by the ledger itself), written and refused, each by the actor its event names."""
    owner = Actor("owner-1", "http", ("owner",)).public()
    agent = Actor("agent-7", "http", ("agent",)).public()
    reviewer = Actor("reviewer-2", "http", ("reviewer",)).public()

    def event(n: int, kind: str, actor: Any, payload: Any, agent_id: str | None = None) -> Any:
        return {
            "event_id": n,
            "task_id": "t",
            "agent_id": agent_id,
            "event_type": kind,
            "payload": payload,
            "created_at": f"2026-12-01T00:00:{n:02d}.000Z",
            "actor": actor,
        }

    events = [
        event(1, "TASK_CREATED", None, {}),
        event(2, "TASK_INITIAL_EXECUTION_PROJECTION_AUTHORIZED", owner, {}),
        event(3, "TASK_CLAIMED", agent, {"attempt": 1}, "agent-7"),
        event(4, "TASK_VERIFIED", reviewer, {"decision": "NEEDS_REWORK"}),
        event(5, "TASK_CLAIMED", agent, {"attempt": 2}, "agent-8"),
        event(6, "TASK_VERIFIED", agent, {"decision": "SUCCEEDED", "automatic": True}),
        event(7, "GOVERNED_WRITE_REFUSED", owner, {"code": "PROTECTED_REF"}),
        event(8, "GOVERNED_WRITE_APPLIED", owner, {"ref": "refs/heads/agent/x"}),
    ]
    record = who_did_what("t", events)
    assert record["created_by"] == "unknown"
    assert record["held_by"] == ["attempt 1: agent-7", "attempt 2: agent-8"]
    assert golden == record
