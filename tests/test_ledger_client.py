"""`LedgerClient` against the server `serve` runs (uvicorn in this process, loopback port).

Its answers are TaskLedger's: every keyed write is replayed by a TaskLedger on the server's own
file with the same key, which answers the recorded answer, and must equal what the client got;
reads through the client equal the same reads on the file; a refusal carries the code
TaskLedger gives for the same call. Retries: a claim whose answer is lost is answered again with
the same task and lease (the key the client drew), and a server that is down is
`API_UNAVAILABLE` after the bounded retries.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from aios_ledger.core import LedgerError, RetryLaterError
from aios_ledger.core.tasks.answers import TaskView
from aios_ledger.shell import LedgerClient, TaskLedger
from aios_ledger.shell.remote.client import problem_error
from aios_ledger.shell.tasks.surface import new_lease_token
from aios_ledger.shell.work.worker import LEASE_LOST
from api_server import ApiServer, free_port

AGENT = "agent-1"


def _task(task_id: str, **fields: Any) -> dict[str, Any]:
    return {"task_id": task_id, "goal": "g", "instructions": "i", **fields}


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ApiServer]:
    with ApiServer(tmp_path_factory.mktemp("api") / "ledger.db") as running:
        yield running


@pytest.fixture(scope="module")
def clients(server: ApiServer) -> Iterator[dict[str, LedgerClient]]:
    made = {
        role: LedgerClient(server.url, server.issue(name, role))
        for role, name in (("owner", "owner-1"), ("agent", AGENT), ("reviewer", "reviewer-1"))
    }
    yield made
    for client in made.values():
        client.close()


@pytest.fixture
def local(server: ApiServer) -> Iterator[TaskLedger]:
    with TaskLedger(server.db) as ledger:
        yield ledger


def same_as_replay(first: Any, replay: Any) -> bool:
    """A recorded answer and the ledger's replay of it: equal but for the replay's flag."""
    if isinstance(first, list):
        return len(first) == len(replay) and all(map(same_as_replay, first, replay))
    if "idempotent" in replay:
        assert replay["idempotent"] is True and first["idempotent"] is False
        return bool({**first, "idempotent": True} == replay)
    return bool(first == replay)


def _code(call: Callable[[], object]) -> str:
    with pytest.raises(LedgerError) as refused:
        call()
    return refused.value.code


def test_a_whole_lifecycle_answers_as_the_task_ledger(
    clients: dict[str, LedgerClient], local: TaskLedger
) -> None:
    owner, agent, reviewer = clients["owner"], clients["agent"], clients["reviewer"]
    task = _task("task-life", max_attempts=2, priority=5)
    created = owner.create_task(task, idempotency_key="create-life")
    assert same_as_replay(created, local.create_task(task, idempotency_key="create-life"))
    assert same_as_replay(created, owner.create_task(task, idempotency_key="create-life"))

    batch = [(_task("task-b1"), "create-b1"), (_task("task-b2"), "create-b2")]
    assert same_as_replay(owner.create_tasks(batch), local.create_tasks(batch))

    token = new_lease_token()
    claim = agent.claim(
        agent_id=AGENT,
        capabilities=[],
        lease_seconds=60,
        task_id="task-life",
        idempotency_key="claim-life",
        lease_token=token,
    )
    assert claim is not None and claim["lease_token"] == token
    assert claim["claimed_by"] == AGENT
    replayed = local.claim(
        agent_id=AGENT,
        capabilities=[],
        lease_seconds=60,
        task_id="task-life",
        idempotency_key="claim-life",
        lease_token=token,
    )
    assert same_as_replay(claim, replayed)

    beat = agent.heartbeat("task-life", lease_token=token, lease_seconds=90)
    assert beat["lease_expires_at"] == local.get("task-life")["lease_expires_at"]
    assert set(beat) == set(local.heartbeat("task-life", lease_token=token, lease_seconds=90))

    result = {"summary": "done"}
    submitted = agent.submit_result(
        "task-life", lease_token=token, result=result, idempotency_key="submit-life"
    )
    assert same_as_replay(
        submitted,
        local.submit_result(
            "task-life", lease_token=token, result=result, idempotency_key="submit-life"
        ),
    )
    verdict = {"decision": "NEEDS_REWORK", "reason": "again", "idempotency_key": "verify-life"}
    verified = reviewer.verify("task-life", **verdict)
    assert same_as_replay(verified, local.verify("task-life", **verdict))
    assert verified["status"] == "QUEUED"

    cancelled = owner.cancel("task-life", reason="enough", idempotency_key="cancel-life")
    again_cancelled = local.cancel("task-life", reason="enough", idempotency_key="cancel-life")
    assert same_as_replay(cancelled, again_cancelled)
    retried = owner.retry("task-life", reason="once more", idempotency_key="retry-life")
    again_retried = local.retry("task-life", reason="once more", idempotency_key="retry-life")
    assert same_as_replay(retried, again_retried)

    # Claimed without a key (the client draws one), then given back.
    owner.create_task(_task("task-rel", priority=9), idempotency_key="create-rel")
    taken = agent.claim(agent_id=AGENT, capabilities=[], lease_seconds=60, task_id="task-rel")
    assert taken is not None and taken["attempt"] == 1
    released = agent.release("task-rel", lease_token=taken["lease_token"], reason="stopping")
    assert released["status"] == local.get("task-rel")["status"] == "QUEUED"
    assert owner.cancel("task-rel", reason="done", idempotency_key="cancel-rel")["status"] == (
        "CANCELLED"
    )

    for client in (owner, agent, reviewer):
        assert client.get("task-life") == local.get("task-life")
        assert client.events("task-life") == local.events("task-life")
        assert client.history("task-life") == local.history("task-life")
        # The API lists newest first (a page of the console's order); the same tasks.
        assert _by_id(client.list_tasks()) == _by_id(local.list_tasks())
        assert _by_id(client.list_tasks("QUEUED", limit=5)) == _by_id(
            local.list_tasks("QUEUED", limit=5)
        )

    many = agent.claim_many(agent_id=AGENT, capabilities=[], lease_seconds=60, limit=5)
    assert sorted(answer["task_id"] for answer in many) == ["task-b1", "task-b2", "task-life"]
    assert agent.claim_many(agent_id=AGENT, capabilities=[], lease_seconds=60, limit=5) == []
    assert agent.claim(agent_id=AGENT, capabilities=[], lease_seconds=60) is None


def test_refusals_carry_the_task_ledgers_codes(
    clients: dict[str, LedgerClient], local: TaskLedger
) -> None:
    owner, agent, reviewer = clients["owner"], clients["agent"], clients["reviewer"]
    owner.create_task(_task("task-refused"), idempotency_key="create-refused")
    calls: list[tuple[Callable[[], object], Callable[[], object]]] = [
        (lambda: owner.get("task-none"), lambda: local.get("task-none")),
        (lambda: owner.events("task-none"), lambda: local.events("task-none")),
        (
            lambda: owner.create_task(_task("task-other"), idempotency_key="create-refused"),
            lambda: local.create_task(_task("task-other"), idempotency_key="create-refused"),
        ),
        (
            lambda: reviewer.verify(
                "task-refused", decision="SUCCEEDED", reason="r", idempotency_key="v-refused"
            ),
            lambda: local.verify(
                "task-refused", decision="SUCCEEDED", reason="r", idempotency_key="v-refused"
            ),
        ),
        (
            lambda: owner.retry("task-refused", reason="r", idempotency_key="r-refused"),
            lambda: local.retry("task-refused", reason="r", idempotency_key="r-refused"),
        ),
        (
            lambda: agent.heartbeat("task-refused", lease_token="x" * 32, lease_seconds=60),
            lambda: local.heartbeat("task-refused", lease_token="x" * 32, lease_seconds=60),
        ),
        (lambda: owner.list_tasks("NOT_A_STATUS"), lambda: local.list_tasks("NOT_A_STATUS")),
        (
            lambda: agent.claim(
                agent_id=AGENT, capabilities=[], lease_seconds=60, task_id="task-none"
            ),
            lambda: local.claim(
                agent_id=AGENT, capabilities=[], lease_seconds=60, task_id="task-none"
            ),
        ),
    ]
    before = local.events("task-refused")
    for remote, in_process in calls:
        assert _code(remote) == _code(in_process)
    assert local.events("task-refused") == before


def test_roles_and_tokens_are_refused_with_their_codes(
    server: ApiServer, clients: dict[str, LedgerClient]
) -> None:
    owner, agent = clients["owner"], clients["agent"]
    forbidden = _code(lambda: agent.create_task(_task("task-x"), idempotency_key="k-x"))
    assert forbidden == "FORBIDDEN"
    assert _code(lambda: owner.claim(agent_id=AGENT, capabilities=[], lease_seconds=5)) == (
        "FORBIDDEN"
    )
    with LedgerClient(server.url, "not-a-token-" + "x" * 30) as stranger:
        assert _code(stranger.list_tasks) == "UNAUTHENTICATED"


def test_a_claim_whose_answer_was_lost_is_answered_again_with_the_same_lease(
    server: ApiServer, clients: dict[str, LedgerClient], local: TaskLedger
) -> None:
    """The recorded answer is dropped on its way back (as by a connection reset); the client sends
    the same key and lease token again and gets the same task, which the ledger claimed once."""
    clients["owner"].create_task(_task("task-lost"), idempotency_key="create-lost")

    class LosingRecordedAnswer(httpx.HTTPTransport):
        def __init__(self) -> None:
            super().__init__()
            self.bodies: list[dict[str, Any]] = []

        def handle_request(self, request: httpx.Request) -> httpx.Response:
            response = super().handle_request(request)
            if request.url.path == "/v1/claims":
                self.bodies.append(json.loads(request.read()))
                if len(self.bodies) == 1:
                    response.read()
                    raise httpx.ReadError("the answer was lost", request=request)
            return response

    transport = LosingRecordedAnswer()
    token = server.issue("agent-lost", "agent")
    with LedgerClient(server.url, token, transport=transport, backoff=0.001) as agent:
        claim = agent.claim(
            agent_id="agent-lost", capabilities=[], lease_seconds=60, task_id="task-lost"
        )
    assert claim is not None and claim["task_id"] == "task-lost"
    first, second = transport.bodies
    assert first == second and first["idempotency_key"].startswith("claim:")
    assert claim["lease_token"] == first["lease_token"]
    kinds = [event["event_type"] for event in local.events("task-lost")]
    assert kinds == ["TASK_CREATED", "TASK_CLAIMED"]


class LosingRecordedAnswer(httpx.HTTPTransport):
    """Lets each request of `paths` reach the server, and loses the recorded answer to it."""

    def __init__(self, *paths: str) -> None:
        super().__init__()
        self.paths = paths
        self.sent: list[str] = []

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        response = super().handle_request(request)
        if request.url.path in self.paths:
            self.sent.append(request.url.path)
            if self.sent.count(request.url.path) == 1:
                response.read()
                raise httpx.ReadError("the answer was lost", request=request)
        return response


def test_a_claim_of_one_task_through_claim_many_is_keyed_and_answered_again(
    server: ApiServer, clients: dict[str, LedgerClient], local: TaskLedger
) -> None:
    """A worker with one free slot claims through `claim_many(limit=1)`: a lost answer is asked
    again with the same key and lease token and names the same task, claimed once."""
    clients["owner"].create_task(_task("task-one", priority=50), idempotency_key="create-one")
    transport = LosingRecordedAnswer("/v1/claims")
    token = server.issue("agent-one", "agent")
    with LedgerClient(server.url, token, transport=transport, backoff=0.001) as agent:
        (claim,) = agent.claim_many(
            agent_id="agent-one", capabilities=[], lease_seconds=60, limit=1
        )
    assert claim["task_id"] == "task-one" and transport.sent == ["/v1/claims"] * 2
    kinds = [event["event_type"] for event in local.events("task-one")]
    assert kinds == ["TASK_CREATED", "TASK_CLAIMED"]


def test_heartbeat_and_release_are_idempotent_in_effect_when_retried(
    server: ApiServer, clients: dict[str, LedgerClient], local: TaskLedger
) -> None:
    """A heartbeat whose answer was lost is sent again and extends the same lease again; a
    release whose answer was lost is sent again and refused as the lease is gone: either way
    the task is where the caller asked (the worker reads those codes as "not ours")."""
    clients["owner"].create_task(_task("task-again"), idempotency_key="create-again")
    beat, back = "/v1/tasks/task-again/heartbeat", "/v1/tasks/task-again/release"
    transport = LosingRecordedAnswer(beat, back)
    token = server.issue("agent-again", "agent")
    with LedgerClient(server.url, token, transport=transport, backoff=0.001) as agent:
        claim = agent.claim(
            agent_id="agent-again", capabilities=[], lease_seconds=60, task_id="task-again"
        )
        assert claim is not None
        answer = agent.heartbeat("task-again", lease_token=claim["lease_token"], lease_seconds=90)
        assert answer["lease_expires_at"] == local.get("task-again")["lease_expires_at"]
        with pytest.raises(LedgerError) as refused:
            agent.release("task-again", lease_token=claim["lease_token"], reason="done")
    assert refused.value.code in LEASE_LOST
    assert transport.sent == [beat, beat, back, back]
    assert local.get("task-again")["status"] == "QUEUED"
    kinds = [event["event_type"] for event in local.events("task-again")]
    assert kinds == [
        "TASK_CREATED",
        "TASK_CLAIMED",
        "TASK_HEARTBEAT",
        "TASK_HEARTBEAT",
        "TASK_RELEASED",
    ]


def test_a_server_that_is_down_is_api_unavailable_after_the_retries() -> None:
    url = f"http://127.0.0.1:{free_port()}"
    with LedgerClient(url, "t" * 40, retries=2, backoff=0.001) as client:
        assert _code(client.list_tasks) == "API_UNAVAILABLE"
        assert _code(lambda: client.heartbeat("t", lease_token="x" * 32, lease_seconds=5)) == (
            "API_UNAVAILABLE"
        )


def test_bad_urls_and_tokens_are_refused_before_any_request() -> None:
    assert _code(lambda: LedgerClient("ftp://example", "t" * 40)) == "API_URL_INVALID"
    assert _code(lambda: LedgerClient("http://127.0.0.1:1", "")) == "TOKEN_INVALID"
    assert "t" * 40 not in repr(LedgerClient("http://127.0.0.1:1", "t" * 40))


def test_the_server_commits_concurrent_requests_in_groups(tmp_path: Path) -> None:
    """Every write request lands in exactly one group commit (the batch-size histogram sums to
    the writes); all of them are committed."""
    with ApiServer(tmp_path / "ledger.db") as server:
        owner = LedgerClient(server.url, server.issue("owner-g", "owner"))
        auditor = server.issue("auditor-g", "auditor")
        threads, each = 8, 6

        def create(number: int) -> None:
            for serial in range(each):
                task_id = f"task-g-{number}-{serial}"
                owner.create_task(_task(task_id), idempotency_key=task_id)

        workers = [threading.Thread(target=create, args=(n,)) for n in range(threads)]
        for worker in workers:
            worker.start()
        for worker in workers:
            worker.join()
        assert len(owner.list_tasks(limit=1000)) == threads * each
        metrics = httpx.get(
            f"{server.url}/metrics", headers={"Authorization": f"Bearer {auditor}"}
        ).text
        owner.close()
    total = _sample(metrics, "aios_ledger_group_commit_batch_size_sum")
    commits = _sample(metrics, "aios_ledger_group_commit_batch_size_count")
    assert total == threads * each
    assert 1 <= commits <= total


def _sample(metrics: str, name: str) -> float:
    for line in metrics.splitlines():
        if line.startswith(name + " "):
            return float(line.split()[1])
    raise AssertionError(f"{name} not in the metrics")


def _by_id(tasks: list[TaskView]) -> list[TaskView]:
    return sorted(tasks, key=lambda task: task["task_id"])


@pytest.mark.parametrize(
    ("status", "headers", "retry_after"),
    [
        (503, {"Retry-After": "1"}, 1),  # the database away
        (429, {"Retry-After": "42"}, 42),  # a budget spent
        (503, {}, None),  # no word on when: a plain refusal
        (400, {"Retry-After": "5"}, None),  # a refusal no wait lifts
    ],
)
def test_a_refusal_the_server_says_when_to_retry_keeps_its_wait(
    status: int, headers: dict[str, str], retry_after: int | None
) -> None:
    problem = {"code": "DATABASE_UNAVAILABLE", "detail": "the database is away"}
    error = problem_error(httpx.Response(status, json=problem, headers=headers))
    assert error.code == "DATABASE_UNAVAILABLE"
    assert getattr(error, "retry_after", None) == retry_after
    assert isinstance(error, RetryLaterError) == (retry_after is not None)
