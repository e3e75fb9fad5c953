"""The HTTP API through real HTTP: the server `serve` runs, in this process on a loopback port.

The whole lifecycle, every route against every role (allowed roles get their answer, the others
403 FORBIDDEN, no token 401 UNAUTHENTICATED), agents that cannot act as another or on a task
they do not hold, idempotent claim replay, a long poll woken by a new task, problem+json codes,
the body limit, revoked tokens, the waiting-poll limit and the metrics."""

from __future__ import annotations

import concurrent.futures
import json
import secrets
import socket
import threading
from collections.abc import Callable, Iterator
from typing import Any

import attrs
import httpx
import pytest
from aios_ledger.core import project_execution_envelope
from aios_ledger.core.proofs import cosignature, cosignature_message, parse_note
from aios_ledger.shell.api.review_routes import review_operations
from aios_ledger.shell.proofs.keys import Signer, read_key_file
from api_server import ROLE_NAMES, SECOND_AGENT, ApiServer, HeldClock, Scenario, cli
from conftest import postgres_url
from legacy_fixtures import (
    CAPABILITY,
    CONSTRAINTS,
    CRITERIA,
    GOAL,
    INSTRUCTIONS,
    binding,
    projection_mapping,
)

ROLES = tuple(ROLE_NAMES)
# The witness the module's server accepts cosignatures of (set by the `server` fixture).
_WITNESS: dict[str, Signer] = {}
PROBLEM = "application/problem+json"


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ApiServer]:
    path = tmp_path_factory.mktemp("api") / "ledger.db"
    # A checkpoint signed at start (and after every million events), and one witness's key.
    keys = path.parent / "keys"
    keys.mkdir()
    cli("key", "generate", "--name", "ledger.example/api", "--out", str(keys / "log.key"))
    cli("key", "generate", "--name", "witness.example/w1", "--out", str(keys / "w1.key"))
    _WITNESS["w1"] = read_key_file(keys / "w1.key")
    # Waiting claims re-try on their own only every 120 s: a poll that returns with a task
    # within its 30 s was woken by the write that made the task.
    with ApiServer(
        path,
        "--max-body",
        "65536",
        "--max-waiting-per-token",
        "2",
        "--recheck-seconds",
        "120",
        "--checkpoint-key",
        str(keys / "log.key"),
        "--checkpoint-every-events",
        "1000000",
        "--witness-key",
        _WITNESS["w1"].verifier.text(),
        role_tokens=True,
        clock=HeldClock(),
    ) as running:
        yield running


@pytest.fixture(autouse=True)
def _clients_closed(request: pytest.FixtureRequest) -> Iterator[None]:
    """A test's clients closed when it ends: the module's server would otherwise keep their idle
    connections open, up to its --max-connections, while the tests go on."""
    yield
    for name in ("server", "pg_server"):
        if name in request.fixturenames:
            request.getfixturevalue(name).close_clients()


@pytest.fixture
def scene(server: ApiServer) -> Scenario:
    return Scenario(server)


def problem(answer: httpx.Response, status: int, code: str) -> dict[str, Any]:
    assert answer.status_code == status, answer.text
    assert answer.headers["content-type"].startswith(PROBLEM)
    document = answer.json()
    assert document["code"] == code, document
    assert document["status"] == status
    assert document["type"].endswith(code.lower().replace("_", "-"))
    return dict(document)


# -- the lifecycle ----------------------------------------------------------------------------


@pytest.fixture(scope="module")
def pg_server(postgres_database: str | None) -> Iterator[ApiServer]:
    """The same server on a fresh PostgreSQL schema: concurrent writers from its pool, no group
    commit."""
    url = postgres_url(postgres_database)
    with ApiServer(url, "--recheck-seconds", "120", role_tokens=True, clock=HeldClock()) as server:
        yield server


def test_the_whole_lifecycle(scene: Scenario) -> None:
    whole_lifecycle(scene)


def test_the_whole_lifecycle_with_tokens_on_postgresql(pg_server: ApiServer) -> None:
    """`serve --db postgresql://…`: the lifecycle, concurrent writers, and a token issued and
    revoked with the command line while the server runs."""
    scene = Scenario(pg_server)
    whole_lifecycle(scene)
    # Ten agents' claims and heartbeats at once go through the pool's concurrent writers.
    tasks = {scene.queued() for _ in range(10)}
    body = {"capabilities": [scene.cap], "lease_seconds": 60}
    with concurrent.futures.ThreadPoolExecutor(max_workers=10) as pool:
        claims = list(pool.map(lambda _: scene.agent.post("/v1/claims", json=body), range(10)))
    assert [c.status_code for c in claims] == [200] * 10
    assert {c.json()["task_id"] for c in claims} == tasks  # each once: no double lease
    token = issue_with_cli(pg_server, "auditor-pg", "auditor")
    auditor = pg_server.client(token=token)
    assert auditor.get("/v1/log/verify").json()["intact"] is True
    revoke_with_cli(pg_server, "auditor-pg")
    problem(auditor.get("/v1/log/head"), 401, "UNAUTHENTICATED")
    problem(pg_server.client().get("/v1/log/head"), 401, "UNAUTHENTICATED")
    assert token not in pg_server.log()


def issue_with_cli(server: ApiServer, name: str, role: str) -> str:
    issued = cli("--db", str(server.target), "token", "issue", name, "--role", role)
    return str(json.loads(issued)["token"])


def revoke_with_cli(server: ApiServer, name: str) -> None:
    cli("--db", str(server.target), "token", "revoke", name)


def whole_lifecycle(scene: Scenario) -> None:
    assert isinstance(scene.server, ApiServer)
    clock = scene.server.clock
    assert isinstance(clock, HeldClock)
    try:
        _whole_lifecycle(scene, clock)
    finally:
        clock.release()


def _whole_lifecycle(scene: Scenario, clock: HeldClock) -> None:
    task_id = scene.queued(retry={"base_seconds": 1, "max_seconds": 1})
    claim = scene.agent.post("/v1/claims", json={"capabilities": [scene.cap], "lease_seconds": 60})
    assert claim.status_code == 200, claim.text
    claimed = claim.json()
    assert (claimed["task_id"], claimed["claimed_by"]) == (task_id, "agent-1")
    lease = claimed["lease_token"]
    beat = scene.agent.post(
        f"/v1/tasks/{task_id}/heartbeat", json={"lease_token": lease, "lease_seconds": 120}
    )
    assert beat.status_code == 200 and beat.json()["revision"] == 3
    key = scene.key()
    result = {"lease_token": lease, "result": {"notes": "done"}, "idempotency_key": key}
    submitted = scene.agent.post(f"/v1/tasks/{task_id}/result", json=result)
    assert submitted.status_code == 200 and submitted.json()["status"] == "SUBMITTED"
    # The answer was lost: the same call again replays it.
    again = scene.agent.post(f"/v1/tasks/{task_id}/result", json=result)
    assert again.status_code == 200 and again.json()["idempotent"] is True
    # A body cannot name the reviewer: the verdict is sealed with the token's name alone.
    verdict = {"decision": "NEEDS_REWORK", "reason": "more", "idempotency_key": scene.key()}
    named = {**verdict, "agent_id": "someone-else"}
    refused = scene.reviewer.post(f"/v1/tasks/{task_id}/verification", json=named)
    assert refused.status_code == 422, refused.text
    # Back in the queue after its backoff (1 s): not claimable before it is due, claimable
    # once the server's clock, held from the verdict on, has passed it.
    clock.hold()
    verified = scene.reviewer.post(f"/v1/tasks/{task_id}/verification", json=verdict)
    assert verified.status_code == 200 and verified.json()["status"] == "QUEUED"
    again_body = {"capabilities": [scene.cap], "lease_seconds": 60}
    assert scene.agent.post("/v1/claims", json=again_body).status_code == 204
    clock.advance(1.5)
    claim = scene.agent.post("/v1/claims", json=again_body)
    assert claim.status_code == 200, claim.text
    lease = claim.json()["lease_token"]
    result = {"lease_token": lease, "result": {"notes": "more"}, "idempotency_key": scene.key()}
    assert scene.agent.post(f"/v1/tasks/{task_id}/result", json=result).status_code == 200
    verdict = {"decision": "SUCCEEDED", "reason": "good", "idempotency_key": scene.key()}
    assert scene.reviewer.post(f"/v1/tasks/{task_id}/verification", json=verdict).status_code == 200
    task = scene.owner.get(f"/v1/tasks/{task_id}").json()
    assert (task["status"], task["attempt"], task["result"]) == ("SUCCEEDED", 2, {"notes": "more"})
    listed = scene.owner.get(f"/v1/tasks/{task_id}/events").json()
    verdicts = [e for e in listed if e["event_type"] == "TASK_VERIFIED"]
    assert [verdict["payload"]["reviewer"] for verdict in verdicts] == [ROLE_NAMES["reviewer"]] * 2
    events = [e["event_type"] for e in listed]
    assert events == [
        "TASK_CREATED",
        "TASK_CLAIMED",
        "TASK_HEARTBEAT",
        "RESULT_SUBMITTED",
        "TASK_VERIFIED",
        "TASK_CLAIMED",
        "RESULT_SUBMITTED",
        "TASK_VERIFIED",
    ]
    history = scene.owner.get(f"/v1/tasks/{task_id}/history").json()
    assert history[-1]["next_state"] == "SUCCEEDED"
    assert scene.owner.get("/v1/log/verify").json()["intact"] is True


def test_a_batch_of_tasks_and_a_batch_claim(scene: Scenario) -> None:
    body = [
        {
            "idempotency_key": scene.key(),
            "task": {"goal": f"g{n}", "instructions": "i", "required_capabilities": [scene.cap]},
        }
        for n in range(3)
    ]
    created = scene.owner.post("/v1/tasks", json=body)
    assert created.status_code == 201 and len(created.json()) == 3
    claims = scene.agent.post(
        "/v1/claims", json={"capabilities": [scene.cap], "lease_seconds": 60, "limit": 5}
    )
    assert claims.status_code == 200
    assert sorted(c["goal"] for c in claims.json()) == ["g0", "g1", "g2"]
    empty = scene.agent.post(
        "/v1/claims", json={"capabilities": [scene.cap], "lease_seconds": 60, "limit": 5}
    )
    assert empty.status_code == 204 and empty.content == b""
    mixed = scene.agent.post(
        "/v1/claims",
        json={"capabilities": [scene.cap], "lease_seconds": 60, "limit": 2, "task_id": "x"},
    )
    problem(mixed, 422, "FIELDS_INVALID")


# -- every route against every role -----------------------------------------------------------


@attrs.frozen
class Headers:
    """In place of a body: a GET that carries these headers (the workspace's lease token)."""

    values: dict[str, str]


@attrs.frozen
class Streamed:
    """In place of a body: a GET of an event stream, closed once its status is in."""


@attrs.frozen
class Case:
    """A route, the roles allowed on it, and how to build a request an allowed role succeeds
    with: (path, JSON body, `Headers` or None) from a fresh scenario."""

    method: str
    roles: frozenset[str]
    build: Callable[[Scenario], tuple[str, Any]]
    success: int = 200


def _projectable(scene: Scenario) -> tuple[str, Any]:
    """A task and a registered binding the initial projection accepts."""
    task_id = "task-" + secrets.token_hex(8)
    created = scene.owner.post(
        "/v1/tasks",
        json={
            "idempotency_key": scene.key(),
            "task": {
                "task_id": task_id,
                "goal": GOAL,
                "instructions": INSTRUCTIONS,
                "success_criteria": CRITERIA,
                "constraints": CONSTRAINTS,
                # A projection needs a task without capabilities; not yet due, no other test's
                # claim takes it.
                "not_before": "2099-01-01T00:00:00Z",
            },
        },
    )
    assert created.status_code == 201, created.text
    bound = binding(task_id=task_id, idempotency_key=scene.key())
    put = scene.owner.put(f"/v1/bindings/{task_id}/{bound.job_id}", json=bound.public())
    assert put.status_code == 200, put.text
    runtime_input = {
        "goal": GOAL,
        "instructions": INSTRUCTIONS,
        "success_criteria": CRITERIA,
        "constraints": CONSTRAINTS,
        "scope": {"scope_type": "legacy", "tenant_id": None, "project_id": None},
        "trace_id": task_id,
    }
    envelope = project_execution_envelope(
        bound,
        {
            "action": "agent_runtime",
            "adapter": "openclaw",
            "capability_scope": [CAPABILITY],
            "runtime_input": runtime_input,
        },
    )
    request = projection_mapping(
        expected_execution_digest=envelope["execution_digest"],
        idempotency_key=scene.key(),
    )
    return f"/v1/tasks/{task_id}/projection", request


def _held(scene: Scenario, action: str, **body: Any) -> tuple[str, Any]:
    """A task agent-1 holds, and the body of `action` on it with its lease token."""
    task_id, lease = scene.claimed()
    return f"/v1/tasks/{task_id}/{action}", {"lease_token": lease, **body}


def _workspace(scene: Scenario) -> tuple[str, Any]:
    """The base of a task agent-1 holds, with its lease token (an unbound task: 409)."""
    task_id, lease = scene.claimed()
    return f"/v1/tasks/{task_id}/workspace", Headers({"Aios-Lease-Token": lease})


def _bound(scene: Scenario) -> tuple[str, Any]:
    task_id = scene.queued()
    bound = binding(task_id=task_id, idempotency_key=scene.key())
    return f"/v1/bindings/{task_id}/{bound.job_id}", bound.public()


def _registered(scene: Scenario) -> tuple[str, Any]:
    path, body = _bound(scene)
    assert scene.owner.put(path, json=body).status_code == 200
    return path, None


def _move(scene: Scenario) -> dict[str, Any]:
    return {"reason": "r", "idempotency_key": scene.key()}


def _paused(scene: Scenario) -> str:
    task_id = scene.queued()
    answer = scene.owner.post(f"/v1/tasks/{task_id}/pause", json=_move(scene))
    assert answer.status_code == 200, answer.text
    return task_id


def _run_event(scene: Scenario) -> tuple[str, Any]:
    return f"/v1/runs/{scene.run()}/events", {"kind": "note", "payload": {"n": 1}}


def _cosigned(scene: Scenario) -> tuple[str, Any]:
    """The server's checkpoint cosigned by the witness it was given."""
    note = parse_note(scene.owner.get("/v1/checkpoint").text)
    witness = _WITNESS["w1"]
    line = cosignature(witness.verifier, 1, witness.sign(cosignature_message(note.text, 1)))
    return "/v1/checkpoint/cosignatures", {"note": note.with_signature(line).encode()}


def _aux_missing(suffix: str) -> Callable[[Scenario], tuple[str, Any]]:
    # No auxiliary run is spawned over HTTP: an allowed role reaches the ledger, which answers
    # RUN_NOT_FOUND (404); a forbidden role never gets that far.
    return lambda scene: (f"/v1/auxiliary-runs/aux-none{suffix}", None)


# A witness token takes the checkpoint routes and nothing else.
ANY = frozenset(ROLES) - {"witness"}
CHECKPOINT_READERS = PROOF_READERS = frozenset(ROLES)
AUDIT = frozenset({"auditor", "owner"})
AGENT, REVIEWER, OWNER = frozenset({"agent"}), frozenset({"reviewer"}), frozenset({"owner"})

CASES: dict[str, Case] = {
    "metrics": Case("GET", AUDIT, lambda s: ("/metrics", None)),
    "create": Case(
        "POST",
        OWNER,
        lambda s: (
            "/v1/tasks",
            {
                "idempotency_key": s.key(),
                "task": {"goal": "g", "instructions": "i", "required_capabilities": [s.cap]},
            },
        ),
        201,
    ),
    "list": Case("GET", ANY, lambda s: ("/v1/tasks?limit=5", None)),
    "get": Case("GET", ANY, lambda s: (f"/v1/tasks/{s.queued()}", None)),
    "events": Case("GET", ANY, lambda s: (f"/v1/tasks/{s.queued()}/events", None)),
    "history": Case("GET", ANY, lambda s: (f"/v1/tasks/{s.queued()}/history", None)),
    "event stream": Case("GET", ANY, lambda s: ("/v1/events/stream", Streamed())),
    "claim": Case(
        "POST",
        AGENT,
        lambda s: (
            "/v1/claims",
            {"capabilities": [s.cap], "lease_seconds": 60, "task_id": s.queued()},
        ),
    ),
    "heartbeat": Case("POST", AGENT, lambda s: _held(s, "heartbeat", lease_seconds=60)),
    "result": Case("POST", AGENT, lambda s: _held(s, "result", result={}, idempotency_key=s.key())),
    "release": Case("POST", AGENT, lambda s: _held(s, "release", reason="stop")),
    "verification": Case(
        "POST",
        REVIEWER,
        lambda s: (
            f"/v1/tasks/{s.submitted()}/verification",
            {"decision": "FAILED", "reason": "no", "idempotency_key": s.key()},
        ),
    ),
    "cancel": Case(
        "POST",
        OWNER,
        lambda s: (f"/v1/tasks/{s.queued()}/cancel", {"reason": "r", "idempotency_key": s.key()}),
    ),
    "retry": Case(
        "POST",
        OWNER,
        lambda s: (f"/v1/tasks/{s.cancelled()}/retry", {"reason": "r", "idempotency_key": s.key()}),
    ),
    "pause": Case(
        "POST",
        OWNER,
        lambda s: (f"/v1/tasks/{s.queued()}/pause", {"reason": "r", "idempotency_key": s.key()}),
    ),
    "resume": Case("POST", OWNER, lambda s: (f"/v1/tasks/{_paused(s)}/resume", _move(s))),
    "binding put": Case("PUT", OWNER, _bound),
    "binding get": Case("GET", ANY, _registered),
    "projection": Case("POST", OWNER, _projectable),
    # The governed-write routes (issue 19): an allowed role reaches the ledger, which refuses a
    # task that is not bound to a repository (409), as `aux get` reaches a missing run (404).
    "proposal": Case(
        "POST",
        AGENT,
        lambda s: (
            f"/v1/tasks/{s.queued()}/proposal",
            {"lease_token": "x" * 43, "bundle_base64": "AAAA"},
        ),
        409,
    ),
    "workspace": Case("GET", AGENT, _workspace, 409),
    "governed write": Case(
        "POST",
        OWNER,
        lambda s: (f"/v1/tasks/{s.queued()}/governed-write", {"idempotency_key": s.key()}),
        409,
    ),
    "run create": Case("POST", AGENT, lambda s: ("/v1/runs", {"prompt": "p"}), 201),
    "run append": Case("POST", AGENT, _run_event, 201),
    "run get": Case("GET", ANY, lambda s: (f"/v1/runs/{s.run()}", None)),
    "run events": Case("GET", ANY, lambda s: (f"/v1/runs/{s.run()}/events", None)),
    "aux list": Case("GET", ANY, lambda s: ("/v1/auxiliary-runs?limit=5", None)),
    "aux get": Case("GET", ANY, _aux_missing(""), 404),
    "aux events": Case("GET", ANY, _aux_missing("/events"), 404),
    "whoami": Case("GET", ANY, lambda s: ("/v1/whoami", None)),
    "idle": Case("GET", AGENT, lambda s: (f"/v1/claims/idle?capabilities={s.cap}", None)),
    "status": Case("GET", ANY, lambda s: ("/v1/status", None)),
    "spend": Case("GET", ANY, lambda s: ("/v1/spend", None)),
    "head": Case("GET", ANY, lambda s: ("/v1/log/head", None)),
    "verify": Case("GET", AUDIT, lambda s: ("/v1/log/verify", None)),
    "export": Case("GET", AUDIT, lambda s: ("/v1/log/export", None)),
    "tree head": Case("GET", PROOF_READERS, lambda s: ("/v1/proofs/tree-head", None)),
    "inclusion": Case("GET", PROOF_READERS, lambda s: ("/v1/proofs/inclusion/1", None)),
    "consistency": Case("GET", PROOF_READERS, lambda s: ("/v1/proofs/consistency?old=1", None)),
    "checkpoint": Case("GET", CHECKPOINT_READERS, lambda s: ("/v1/checkpoint", None)),
    "cosignature": Case("POST", frozenset({"witness", "owner"}), _cosigned),
    # Any reader may ask; a commit no landed write names is 404 (tests/test_attest_commits.py
    # asks of one that landed).
    "commit why": Case("GET", ANY, lambda s: ("/v1/commits/" + "ab" * 20, None), 404),
}


def _send(client: httpx.Client, case: Case, path: str, body: Any) -> httpx.Response:
    if isinstance(body, Headers):
        return client.request(case.method, path, headers=body.values)
    if isinstance(body, Streamed):
        with client.stream(case.method, path) as response:
            if response.status_code != 200:
                response.read()  # a refusal's problem document
            return response
    return (
        client.request(case.method, path, json=body)
        if body is not None
        else client.request(case.method, path)
    )


def test_the_case_table_covers_every_route_but_the_open_ones(server: ApiServer) -> None:
    document = httpx.get(server.url + "/openapi.json").json()
    guarded = {
        (method.upper(), path)
        for path, entry in document["paths"].items()
        for method, operation in entry.items()
        if operation.get("security") != []
    }
    # The review-run routes are the client's, checked in tests/test_remote_work.py.
    guarded -= {(operation.method, operation.path) for operation in review_operations()}
    # The recovery projection needs a captured task: its roles are checked below on their own.
    assert len(guarded) == len(CASES) + 1


@pytest.mark.parametrize("role", ROLES)
@pytest.mark.parametrize("route", list(CASES))
def test_every_route_for_every_role(server: ApiServer, route: str, role: str) -> None:
    case = CASES[route]
    scene = Scenario(server)
    path, body = case.build(scene)
    answer = _send(server.client(role), case, path, body)
    if role in case.roles:
        assert answer.status_code == case.success, answer.text
    else:
        problem(answer, 403, "FORBIDDEN")
    problem(_send(server.client(), case, path, body), 401, "UNAUTHENTICATED")
    wrong = server.client(token="not-a-token-" + secrets.token_hex(8))
    problem(_send(wrong, case, path, body), 401, "UNAUTHENTICATED")


@pytest.mark.parametrize("role", ROLES)
def test_the_recovery_projection_is_the_owners(server: ApiServer, role: str) -> None:
    path = "/v1/tasks/task-none/projection-from-source-capture"
    answer = server.client(role).post(path, json={})
    if role == "owner":
        # The owner reaches the document's check (an empty request is not a recovery).
        problem(answer, 422, "FIELDS_INVALID")
    else:
        problem(answer, 403, "FORBIDDEN")


def test_open_routes_need_no_token(server: ApiServer) -> None:
    assert httpx.get(server.url + "/v1/health").json() == {"status": "ok"}
    document = httpx.get(server.url + "/openapi.json").json()
    assert document["openapi"].startswith("3.1")


# -- agents act only as themselves, on what they hold -----------------------------------------


def test_an_agent_cannot_claim_as_another(scene: Scenario) -> None:
    scene.queued()
    answer = scene.agent.post(
        "/v1/claims",
        json={"capabilities": [scene.cap], "lease_seconds": 60, "agent_id": SECOND_AGENT},
    )
    problem(answer, 422, "FIELDS_INVALID")
    assert "agent_id" in answer.json()["detail"]


def test_a_foreign_task_is_refused_to_another_agent(scene: Scenario, server: ApiServer) -> None:
    task_id, lease = scene.claimed()
    other = server.client(SECOND_AGENT)
    beat = {"lease_token": lease, "lease_seconds": 60}
    problem(other.post(f"/v1/tasks/{task_id}/heartbeat", json=beat), 403, "NOT_TASK_HOLDER")
    result = {"lease_token": lease, "result": {}, "idempotency_key": scene.key()}
    problem(other.post(f"/v1/tasks/{task_id}/result", json=result), 403, "NOT_TASK_HOLDER")
    release = {"lease_token": lease, "reason": "mine now"}
    problem(other.post(f"/v1/tasks/{task_id}/release", json=release), 403, "NOT_TASK_HOLDER")
    task = scene.owner.get(f"/v1/tasks/{task_id}").json()
    assert (task["status"], task["claimed_by"], task["revision"]) == ("CLAIMED", "agent-1", 2)


def test_runs_belong_to_their_agent(scene: Scenario, server: ApiServer) -> None:
    run_id = scene.run()
    assert scene.agent.get(f"/v1/runs/{run_id}").json()["session_id"] == "agent-1"
    other = server.client(SECOND_AGENT)
    append = {"kind": "note", "payload": None}
    problem(other.post(f"/v1/runs/{run_id}/events", json=append), 403, "NOT_RUN_OWNER")
    problem(other.post("/v1/runs", json={"prompt": "p", "session_id": "agent-1"}), 403, "FORBIDDEN")
    assert scene.agent.post(f"/v1/runs/{run_id}/events", json=append).status_code == 201
    assert [e["seq"] for e in scene.agent.get(f"/v1/runs/{run_id}/events").json()] == [1]


# -- claims: replay and long polls ------------------------------------------------------------


def test_the_same_idempotency_key_gives_the_same_claim(scene: Scenario) -> None:
    scene.queued()
    scene.queued()
    body = {
        "capabilities": [scene.cap],
        "lease_seconds": 60,
        "idempotency_key": scene.key(),
        "lease_token": "lease-" + secrets.token_hex(16),
    }
    first = scene.agent.post("/v1/claims", json=body)
    second = scene.agent.post("/v1/claims", json=body)
    assert first.status_code == second.status_code == 200
    assert second.json()["task_id"] == first.json()["task_id"]
    assert second.json()["idempotent"] is True
    other_token = {**body, "lease_token": "lease-" + secrets.token_hex(16)}
    problem(scene.agent.post("/v1/claims", json=other_token), 409, "IDEMPOTENCY_CONFLICT")


def test_a_waiting_claim_is_woken_by_a_new_task(scene: Scenario) -> None:
    answers: list[httpx.Response] = []
    body = {"capabilities": [scene.cap], "lease_seconds": 60, "wait_seconds": 30}
    waiter = threading.Thread(
        target=lambda: answers.append(scene.agent.post("/v1/claims", json=body))
    )
    waiter.start()
    # The poll is waiting once the server counts it.
    auditor = scene.server.client("auditor")
    while "aios_ledger_waiting_claims 1.0" not in auditor.get("/metrics").text:
        assert waiter.is_alive()
    task_id = scene.queued()
    waiter.join(timeout=60)
    (answer,) = answers
    assert answer.status_code == 200, answer.text
    assert answer.json()["task_id"] == task_id


def test_a_poll_with_nothing_to_take_answers_204(scene: Scenario) -> None:
    body = {"capabilities": [scene.cap], "lease_seconds": 60, "wait_seconds": 1}
    answer = scene.agent.post("/v1/claims", json=body)
    assert answer.status_code == 204


def test_waiting_polls_per_token_are_bounded(scene: Scenario, server: ApiServer) -> None:
    body = {"capabilities": [scene.cap], "lease_seconds": 60, "wait_seconds": 20}
    answers: list[httpx.Response] = []
    agent2 = server.client(SECOND_AGENT)
    waiters = [
        threading.Thread(target=lambda: answers.append(agent2.post("/v1/claims", json=body)))
        for _ in range(2)
    ]
    for waiter in waiters:
        waiter.start()
    auditor = server.client("auditor")
    while "aios_ledger_waiting_claims 2.0" not in auditor.get("/metrics").text:
        assert all(waiter.is_alive() for waiter in waiters)
    problem(agent2.post("/v1/claims", json=body), 429, "TOO_MANY_WAITING")
    # Another token is not held to agent-2's count.
    quick = {**body, "wait_seconds": 0}
    assert scene.agent.post("/v1/claims", json=quick).status_code == 204
    # Two tasks end both waits.
    scene.queued()
    scene.queued()
    for waiter in waiters:
        waiter.join(timeout=60)
    assert sorted(a.status_code for a in answers) == [200, 200]


# -- refusals ----------------------------------------------------------------------------------


def test_problem_codes(scene: Scenario, server: ApiServer) -> None:
    problem(scene.owner.get("/v1/tasks/task-nope"), 404, "TASK_NOT_FOUND")
    problem(scene.owner.get("/v1/nowhere"), 404, "ROUTE_NOT_FOUND")
    problem(scene.owner.delete("/v1/tasks"), 405, "METHOD_NOT_ALLOWED")
    problem(scene.owner.get("/v1/tasks?limit=zero"), 422, "FIELDS_INVALID")
    problem(scene.owner.get("/v1/tasks?limit=0"), 422, "FIELDS_INVALID")
    bad_json = scene.owner.post("/v1/tasks", content=b"{not json")
    problem(bad_json, 422, "JSON_INVALID")
    deep = b"[" * 100 + b"]" * 100
    problem(scene.owner.post("/v1/tasks", content=deep), 422, "JSON_TOO_DEEP")
    extra = {"idempotency_key": scene.key(), "task": {"goal": "g", "instructions": "i"}, "x": 1}
    problem(scene.owner.post("/v1/tasks", json=extra), 422, "FIELDS_INVALID")
    task_id = scene.queued()
    # The document's schema passes it; the core's own rule refuses it (a state refusal).
    beat = {"lease_token": "t" * 32, "lease_seconds": 60}
    refused = scene.agent.post(f"/v1/tasks/{task_id}/heartbeat", json=beat)
    assert refused.status_code == 409 and refused.json()["code"] in {
        "LEASE_INVALID",
        "INVALID_TRANSITION",
    }
    cancel = {"reason": "r", "idempotency_key": scene.key()}
    assert scene.owner.post(f"/v1/tasks/{task_id}/cancel", json=cancel).status_code == 200
    problem(
        scene.owner.post(f"/v1/tasks/{task_id}/cancel", json={**cancel, "reason": "other"}),
        409,
        "IDEMPOTENCY_CONFLICT",
    )
    bound = binding(task_id=task_id, idempotency_key=scene.key())
    elsewhere = scene.owner.put(f"/v1/bindings/{task_id}/other-job", json=bound.public())
    problem(elsewhere, 422, "FIELDS_INVALID")
    problem(scene.owner.get(f"/v1/bindings/{task_id}/none"), 404, "GOVERNED_BINDING_NOT_FOUND")
    # No token text in any answer, ever.
    assert server.tokens["owner"] not in elsewhere.text


def test_a_body_over_the_limit_is_413_before_parsing(scene: Scenario) -> None:
    huge = b'{"idempotency_key":"k","task":{"goal":"' + b"g" * 70_000 + b'"}}'
    problem(scene.owner.post("/v1/tasks", content=huge), 413, "BODY_TOO_LARGE")

    def chunks() -> Iterator[bytes]:  # no Content-Length: the bytes are counted as they come
        for _ in range(20):
            yield b" " * 8192

    streamed = scene.owner.post("/v1/tasks", content=chunks())
    problem(streamed, 413, "BODY_TOO_LARGE")
    assert scene.owner.get("/v1/tasks?limit=1").status_code == 200


def _response_head_and_body(connection: socket.socket) -> bytes:
    """One whole response read from `connection` (a body of `content-length` bytes)."""
    received = b""
    while b"\r\n\r\n" not in received:
        received += connection.recv(65536)
    head, _, body = received.partition(b"\r\n\r\n")
    length = next(
        int(line.split(b":", 1)[1])
        for line in head.split(b"\r\n")
        if line.lower().startswith(b"content-length:")
    )
    while len(body) < length:
        body += connection.recv(65536)
    return head


def test_the_rest_of_a_body_answered_413_is_never_read_as_the_next_request(
    server: ApiServer,
) -> None:
    """A chunked body is answered 413 as soon as it is over the limit; what the client sends of
    it afterwards (here more than a request head may hold) is discarded, never parsed as another
    request's head (431), and the next request on the connection is answered."""
    host, port = server.url.removeprefix("http://").split(":")
    chunk = b"2000\r\n" + b" " * 0x2000 + b"\r\n"
    with socket.create_connection((host, int(port)), timeout=60) as connection:
        connection.sendall(
            (
                "POST /v1/tasks HTTP/1.1\r\n"
                f"Host: {host}\r\n"
                f"Authorization: Bearer {server.tokens['owner']}\r\n"
                "Content-Type: application/json\r\n"
                "Transfer-Encoding: chunked\r\n\r\n"
            ).encode()
            + chunk * 9
        )
        assert _response_head_and_body(connection).startswith(b"HTTP/1.1 413 ")
        connection.sendall(chunk * 12 + b"0\r\n\r\nGET /v1/health HTTP/1.1\r\nHost: h\r\n\r\n")
        assert _response_head_and_body(connection).startswith(b"HTTP/1.1 200 ")


def test_the_tokens_refusal_comes_before_the_bodys(scene: Scenario, server: ApiServer) -> None:
    """The body is read before the one hop that checks the token: a refused token or role is
    still what the answer says, never the body's size, shape or validity."""
    huge = b'{"idempotency_key":"k","task":{"goal":"' + b"g" * 70_000 + b'"}}'
    garbage = b"{not json"
    unknown = server.client(token="not-a-token-" + secrets.token_hex(8))
    for body in (huge, garbage, b"{}"):
        problem(server.client().post("/v1/tasks", content=body), 401, "UNAUTHENTICATED")
        problem(unknown.post("/v1/tasks", content=body), 401, "UNAUTHENTICATED")
        problem(scene.agent.post("/v1/tasks", content=body), 403, "FORBIDDEN")
    problem(scene.owner.post("/v1/tasks", content=garbage), 422, "JSON_INVALID")


def test_a_slow_client_does_not_hold_the_writer(scene: Scenario, server: ApiServer) -> None:
    """A client that sends half its body and stops: the others' writes go on meanwhile (no
    write starts before its body is in)."""
    host, port = server.url.removeprefix("http://").split(":")
    with socket.create_connection((host, int(port))) as slow:
        head = (
            "POST /v1/tasks HTTP/1.1\r\n"
            f"Host: {host}\r\n"
            f"Authorization: Bearer {server.tokens['owner']}\r\n"
            "Content-Type: application/json\r\n"
            "Content-Length: 1000\r\n\r\n"
        )
        slow.sendall(head.encode() + b'{"idempotency_key": "slow", "task": {"goal": "')
        task_id = scene.queued()
        claimed = scene.agent.post(
            "/v1/claims", json={"capabilities": [scene.cap], "lease_seconds": 60}
        )
        assert claimed.status_code == 200 and claimed.json()["task_id"] == task_id


def test_a_revoked_token_is_refused(server: ApiServer) -> None:
    token = issue_with_cli(server, "auditor-tmp", "auditor")
    client = server.client(token=token)
    assert client.get("/v1/log/head").status_code == 200
    revoke_with_cli(server, "auditor-tmp")
    problem(client.get("/v1/log/head"), 401, "UNAUTHENTICATED")
    assert token not in server.log()


def test_metrics_count_requests_by_route_template(scene: Scenario) -> None:
    task_id = scene.queued()
    scene.owner.get(f"/v1/tasks/{task_id}")
    text = scene.server.client("auditor").get("/metrics").text
    assert 'route="/v1/tasks/{task_id}"' in text
    assert task_id not in text
    assert 'aios_ledger_tasks{status="QUEUED"}' in text
    assert "aios_ledger_group_commit_batch_size_bucket" in text
    for token in scene.server.tokens.values():
        assert token not in text


def test_proofs_over_http_check_against_the_tree_head(server: ApiServer) -> None:
    proofs_check_against_the_tree_head(Scenario(server))


# Its own test, so that it takes `pg_server` and is marked `postgresql` (`make check`).
def test_proofs_over_http_check_against_the_tree_head_on_postgresql(pg_server: ApiServer) -> None:
    proofs_check_against_the_tree_head(Scenario(pg_server))


def proofs_check_against_the_tree_head(scene: Scenario) -> None:
    """The Merkle log's routes: a proof each reader can check with the core's verifier alone."""
    from aios_ledger.core.log.merkle import parse_proof

    scene.queued()
    head = scene.agent.get("/v1/proofs/tree-head").json()
    root = bytes.fromhex(head["root"])
    included = scene.agent.get(f"/v1/proofs/inclusion/1?size={head['size']}")
    assert included.status_code == 200, included.text
    parse_proof(included.json()).check(root)
    consistent = scene.agent.get(f"/v1/proofs/consistency?old=1&new={head['size']}")
    parse_proof(consistent.json()).check(root)
    problem(scene.agent.get("/v1/proofs/inclusion/abc"), 422, "FIELDS_INVALID")
    beyond = f"/v1/proofs/consistency?old={head['size'] + 1}&new={head['size']}"
    problem(scene.agent.get(beyond), 422, "TREE_SIZE_INVALID")
    problem(scene.agent.get("/v1/proofs/inclusion/999999"), 404, "EVENT_NOT_FOUND")
