"""The governed-write routes through real HTTP (the server `serve` runs, in this process): a remote
worker uploads its agent's bundle, the owner writes it; the roles, a garbage or hostile upload,
a stranger's upload and a refused write answer their problem codes, and the repository's ref log
agrees with the ledger afterwards."""

from __future__ import annotations

import base64
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from aios_ledger.shell.db.connection import Database
from aios_ledger.shell.git.proposals import bundle_workspace
from aios_ledger.shell.log.verification import verify_log
from api_server import ApiServer
from git_support import (
    CAPABILITY,
    assert_reflog_agrees,
    binding,
    edit,
    governed_task,
    make_repository,
    prepare_workspace,
    ref,
    register,
    repository_files,
    runtime_result,
)

PROBLEM = "application/problem+json"


@pytest.fixture
def live(tmp_path: Path) -> Iterator[tuple[ApiServer, Path, str]]:
    db = tmp_path / "ledger.db"
    with ApiServer(db, role_tokens=True) as server:
        bare, base = make_repository(tmp_path)
        register(db, bare)
        yield server, bare, base
        with Database(db) as opened:
            assert verify_log(opened).intact
        assert_reflog_agrees(db, bare)


def problem(answer: httpx.Response, status: int, code: str) -> None:
    assert answer.status_code == status, answer.text
    assert answer.headers["content-type"].startswith(PROBLEM)
    assert answer.json()["code"] == code


def _claim(server: ApiServer, task_id: str) -> dict[str, Any]:
    answer = server.client("agent").post(
        "/v1/claims",
        json={"capabilities": [CAPABILITY], "lease_seconds": 300, "task_id": task_id},
    )
    assert answer.status_code == 200, answer.text
    return dict(answer.json())


def _bundle(server: ApiServer, claimed: dict[str, Any], files: dict[str, str], base: str) -> bytes:
    """What a remote worker does: a workspace, the agent's commits, the bundle's bytes."""
    with Database(server.db) as db:
        space = prepare_workspace(db, claimed, agent_id="agent-1")
    assert space is not None
    try:
        edit(space, files)
        out = Path(space.root, "p.bundle")
        assert bundle_workspace(space.path, base, author="agent-1", out=out)
        return out.read_bytes()
    finally:
        space.remove()


def test_an_uploaded_proposal_is_written_by_the_owner(live: tuple[ApiServer, Path, str]) -> None:
    server, bare, base = live
    governed_task(server.db, "task-api", binding("task-api", base))
    claimed = _claim(server, "task-api")
    data = _bundle(server, claimed, {"api.txt": "over http\n"}, base)
    agent = server.client("agent")
    url = "/v1/tasks/task-api/proposal"
    body = {"lease_token": claimed["lease_token"], "bundle_base64": base64.b64encode(data).decode()}
    # Another agent may not propose for a task it does not hold; an owner is not an agent.
    problem(server.client("agent-2").post(url, json=body), 403, "NOT_TASK_HOLDER")
    problem(server.client("owner").post(url, json=body), 403, "FORBIDDEN")
    uploaded = agent.post(url, json=body)
    assert uploaded.status_code == 201, uploaded.text
    assert uploaded.json()["changed_files"] == ["api.txt"]
    again = agent.post(url, json=body)
    assert again.status_code == 200 and again.json()["idempotent"] is True
    result = runtime_result(claimed, ["api.txt"])
    submitted = agent.post(
        "/v1/tasks/task-api/result",
        json={"lease_token": claimed["lease_token"], "result": result, "idempotency_key": "s"},
    )
    assert submitted.status_code == 200, submitted.text
    write = {"idempotency_key": "write-api"}
    # Not verified yet: refused, and nothing reaches the repository.
    before = repository_files(bare)
    problem(
        server.client("owner").post("/v1/tasks/task-api/governed-write", json=write),
        409,
        "TASK_NOT_VERIFIED",
    )
    assert repository_files(bare) == before
    verdict = {"decision": "SUCCEEDED", "reason": "good", "idempotency_key": "v"}
    assert (
        server.client("reviewer").post("/v1/tasks/task-api/verification", json=verdict).status_code
        == 200
    )
    # The refused key keeps its refusal (recorded, with who tried): a write takes a new key.
    problem(
        server.client("owner").post("/v1/tasks/task-api/governed-write", json=write),
        409,
        "TASK_NOT_VERIFIED",
    )
    write = {"idempotency_key": "write-api-verified"}
    problem(
        server.client("agent").post("/v1/tasks/task-api/governed-write", json=write),
        403,
        "FORBIDDEN",
    )
    written = server.client("owner").post("/v1/tasks/task-api/governed-write", json=write)
    assert written.status_code == 200, written.text
    assert written.json()["state"] == "APPLIED"
    assert ref(bare, "refs/heads/agent/task-api") == uploaded.json()["head_oid"]
    replay = server.client("owner").post("/v1/tasks/task-api/governed-write", json=write)
    assert replay.status_code == 200 and replay.json()["idempotent"] is True


def test_hostile_uploads_are_refused_without_touching_the_repository(
    live: tuple[ApiServer, Path, str],
) -> None:
    server, bare, base = live
    governed_task(server.db, "task-bad", binding("task-bad", base))
    claimed = _claim(server, "task-bad")
    agent, url = server.client("agent"), "/v1/tasks/task-bad/proposal"
    before = repository_files(bare)
    lease = claimed["lease_token"]
    problem(
        agent.post(url, json={"lease_token": lease, "bundle_base64": "%%%"}), 422, "BUNDLE_INVALID"
    )
    garbage = base64.b64encode(b"# v2 git bundle\ngarbage\n").decode()
    problem(
        agent.post(url, json={"lease_token": lease, "bundle_base64": garbage}),
        422,
        "BUNDLE_INVALID",
    )
    problem(agent.post(url, json={"lease_token": lease}), 422, "FIELDS_INVALID")
    data = _bundle(server, claimed, {"ok.txt": "1\n"}, base)
    stale = {"lease_token": "x" * 43, "bundle_base64": base64.b64encode(data).decode()}
    problem(agent.post(url, json=stale), 409, "LEASE_INVALID")
    assert repository_files(bare) == before
