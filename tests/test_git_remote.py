"""Governed repositories for a worker on another machine, through the server `serve` runs
(in this process, on a loopback port): `worker --api` takes a governed task, clones the agent's
workspace from the server's bundle of the base (`GET /v1/tasks/{task_id}/workspace`), the
example agent edits and commits, the proposal is uploaded, a reviewer verifies, the owner's
governed write through the API lands the branch; only the task's holder, under its lease, may
read the base; a source capture over the API is the snapshot the local worker takes. After
every test the repository's ref logs and the ledger's events agree, and the log verifies."""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
import time
from collections.abc import Iterator, Mapping
from datetime import datetime
from pathlib import Path
from typing import Any

import httpx
import pytest
from aios_ledger.core import LedgerError, project_execution_envelope
from aios_ledger.shell import LedgerClient
from aios_ledger.shell.db.connection import Database
from aios_ledger.shell.git.runner import run_git
from aios_ledger.shell.git.workspace import (
    LEASE_TOKEN_HEADER,
    GitWorkspaces,
    Workspace,
    base_bundle,
    clone_workspace,
)
from aios_ledger.shell.log.verification import verify_log
from aios_ledger.shell.remote.workspaces import RemoteWorkspaces
from aios_ledger.shell.work.worker import Worker, WorkerConfig
from api_server import ApiServer, HeldClock
from git_support import (
    CAPABILITY,
    assert_reflog_agrees,
    binding,
    events_of,
    git,
    governed_task,
    make_repository,
    ref,
    register,
    repository_files,
)
from test_ledger_client import LosingRecordedAnswer

ROOT = Path(__file__).resolve().parents[1]
PROBLEM = "application/problem+json"


class Remote:
    """A live server over a ledger that governs one bare repository."""

    def __init__(
        self, server: ApiServer, bare: Path, base: str, root: Path, clock: HeldClock
    ) -> None:
        self.server = server
        self.clock = clock
        self.bare = bare
        self.base = base
        self.root = root

    @property
    def db(self) -> Path:
        return self.server.db

    def client(self, role: str) -> LedgerClient:
        return LedgerClient(self.server.url, self.server.tokens[role])

    def token_file(self, role: str) -> Path:
        path = self.root / f"{role}.token"
        path.write_text(self.server.tokens[role] + "\n")
        path.chmod(0o600)
        return path

    def claim(self, task_id: str, role: str = "agent") -> dict[str, Any]:
        with self.client(role) as client:
            claimed = client.claim(
                agent_id="ignored-by-the-server",
                capabilities=[CAPABILITY],
                lease_seconds=300,
                task_id=task_id,
            )
        assert claimed is not None
        return dict(claimed)


@pytest.fixture
def remote(tmp_path: Path) -> Iterator[Remote]:
    db = tmp_path / "ledger.db"
    clock = HeldClock()
    with ApiServer(db, role_tokens=True, clock=clock) as server:
        bare, base = make_repository(tmp_path)
        register(db, bare)
        yield Remote(server, bare, base, tmp_path, clock)
        with Database(db) as opened:
            report = verify_log(opened)
        assert report.intact, report.public()
        assert_reflog_agrees(db, bare)


def problem(answer: httpx.Response, status: int, code: str) -> None:
    assert answer.status_code == status, answer.text
    assert answer.headers["content-type"].startswith(PROBLEM)
    assert answer.json()["code"] == code


def worker_over_the_api(remote: Remote, *extra: str) -> subprocess.CompletedProcess[str]:
    """`aios-ledger worker --api` with no ledger file: everything goes through the server."""
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "aios_ledger.shell.cli",
            "--db",
            "/nonexistent/no.db",
            "worker",
            "--api",
            remote.server.url,
            "--token-file",
            str(remote.token_file("agent")),
            "--agent-id",
            "agent-1",
            "--capability",
            CAPABILITY,
            "--exec",
            f"{sys.executable} {ROOT / 'examples' / 'agent.py'}",
            "--timeout",
            "120",
            *extra,
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )


# ---------------------------------------------------------------------------------------------
# the way that lands


def test_a_remote_workers_proposal_lands_through_the_api(remote: Remote) -> None:
    governed_task(remote.db, "task-far", binding("task-far", remote.base))
    before = repository_files(remote.bare)
    worked = worker_over_the_api(remote, "--once")
    assert worked.returncode == 0, worked.stderr
    summary = json.loads(worked.stdout)
    assert [(t["task_id"], t["outcome"]) for t in summary["tasks"]] == [("task-far", "submitted")]
    # The agent's commit reached the ledger as a proposal, and nothing reached the repository.
    assert repository_files(remote.bare) == before
    assert events_of(remote.db, "task-far") == [
        "TASK_CREATED",
        "TASK_INITIAL_EXECUTION_PROJECTION_AUTHORIZED",
        "TASK_CLAIMED",
        "PROPOSAL_RECORDED",
        "RESULT_SUBMITTED",
    ]
    with remote.client("auditor") as auditor:
        task = auditor.get("task-far")
        assert task["status"] == "SUBMITTED"
        evidence = auditor.run_events("task-far@1")
    proposals = [json.loads(event.payload_json) for event in evidence if event.kind == "proposal"]
    assert len(proposals) == 1 and proposals[0]["changed_files"] == ["NOTES.md"]
    head = str(proposals[0]["head_oid"])
    with remote.client("reviewer") as reviewer:
        reviewer.verify("task-far", decision="SUCCEEDED", reason="good", idempotency_key="v-far")
    with remote.client("owner") as owner:
        written = owner.call_json(
            "POST",
            "/v1/tasks/task-far/governed-write",
            body={"idempotency_key": "write-far"},
        )
    assert (written["state"], written["new_oid"]) == ("APPLIED", head)
    assert ref(remote.bare, "refs/heads/agent/task-far") == head
    assert ref(remote.bare, "refs/heads/main") == remote.base
    assert git("--git-dir", str(remote.bare), "rev-parse", f"{head}^") == remote.base
    shown = git("--git-dir", str(remote.bare), "show", f"{head}:NOTES.md")
    assert shown == "NOTES.md: drafted for task-far on attempt 1"
    author = git("--git-dir", str(remote.bare), "log", "-1", "--format=%an", head)
    assert author == "agent-1"


def test_a_remote_worker_without_a_governed_repository_runs_as_before(remote: Remote) -> None:
    """A binding whose repository the server does not govern: no workspace, no proposal, the
    command runs as the local worker runs it."""
    governed_task(
        remote.db,
        "task-elsewhere",
        binding("task-elsewhere", remote.base, repository="acme/unregistered"),
    )
    worked = worker_over_the_api(remote, "--once")
    assert worked.returncode == 0, worked.stderr
    assert [t["outcome"] for t in json.loads(worked.stdout)["tasks"]] == ["submitted"]
    assert "PROPOSAL_RECORDED" not in events_of(remote.db, "task-elsewhere")


# ---------------------------------------------------------------------------------------------
# who may read the base


def test_only_the_holder_under_its_lease_reads_the_base(remote: Remote) -> None:
    governed_task(remote.db, "task-read", binding("task-read", remote.base))
    url = "/v1/tasks/task-read/workspace"
    stranger = remote.server.client("agent-2")
    agent = remote.server.client("agent")
    # Nobody holds it yet: no agent reads it.
    problem(agent.get(url, headers={LEASE_TOKEN_HEADER: "x" * 43}), 403, "NOT_TASK_HOLDER")
    claimed = remote.claim("task-read")
    lease = {LEASE_TOKEN_HEADER: claimed["lease_token"]}
    before = repository_files(remote.bare)
    problem(stranger.get(url, headers=lease), 403, "NOT_TASK_HOLDER")
    problem(remote.server.client("owner").get(url, headers=lease), 403, "FORBIDDEN")
    problem(remote.server.client().get(url, headers=lease), 401, "UNAUTHENTICATED")
    problem(agent.get(url), 422, "FIELDS_INVALID")
    problem(agent.get(url, headers={LEASE_TOKEN_HEADER: "y" * 43}), 409, "LEASE_INVALID")
    problem(agent.get("/v1/tasks/task-none/workspace", headers=lease), 404, "TASK_NOT_FOUND")
    answer = agent.get(url, headers=lease)
    assert answer.status_code == 200, answer.text
    assert answer.headers["content-type"] == "application/octet-stream"
    assert answer.headers["aios-base-oid"] == remote.base
    bundle = remote.root / "base.bundle"
    bundle.write_bytes(answer.content)
    heads = git("bundle", "list-heads", str(bundle))
    assert heads == f"{remote.base} refs/heads/agent/task-read"
    # Building the bundle wrote nothing to the governed repository.
    assert repository_files(remote.bare) == before


def test_a_task_not_bound_to_a_governed_repository_has_no_workspace(remote: Remote) -> None:
    governed_task(
        remote.db, "task-unreg", binding("task-unreg", remote.base, repository="acme/none")
    )
    claimed = remote.claim("task-unreg")
    lease = {LEASE_TOKEN_HEADER: claimed["lease_token"]}
    problem(
        remote.server.client("agent").get("/v1/tasks/task-unreg/workspace", headers=lease),
        404,
        "REPOSITORY_NOT_FOUND",
    )
    with remote.client("owner") as owner:
        created = owner.create_task(
            {"goal": "g", "instructions": "i", "required_capabilities": ["plain-work"]},
            idempotency_key="create-plain",
        )
    with remote.client("agent") as client:
        plain = client.claim(agent_id="agent-1", capabilities=["plain-work"], lease_seconds=60)
        assert plain is not None and plain["task_id"] == created["task_id"]
        with pytest.raises(LedgerError) as refused:
            client.download_workspace(
                plain["task_id"], lease_token=plain["lease_token"], out=remote.root / "x"
            )
    assert refused.value.code == "TASK_NOT_BOUND"
    assert not (remote.root / "x").exists()


def test_a_base_over_the_limit_is_refused(remote: Remote) -> None:
    governed_task(remote.db, "task-big", binding("task-big", remote.base))
    claimed = remote.claim("task-big")
    out = remote.root / "big.bundle"
    with Database(remote.db) as db, pytest.raises(LedgerError) as refused:
        base_bundle(
            db,
            "task-big",
            out,
            agent_id="agent-1",
            lease_token=claimed["lease_token"],
            max_bytes=64,
        )
    assert refused.value.code == "WORKSPACE_TOO_LARGE"
    assert not out.exists()
    # The client bounds what it takes too.
    with remote.client("agent") as client, pytest.raises(LedgerError) as too_big:
        client.download_workspace(
            "task-big", lease_token=claimed["lease_token"], out=out, max_bytes=64
        )
    assert too_big.value.code == "WORKSPACE_TOO_LARGE"
    assert not out.exists()


# ---------------------------------------------------------------------------------------------
# the same workspace, the same proposal, the same capture as the local worker's


def test_the_remote_workspace_is_the_local_one(remote: Remote) -> None:
    governed_task(remote.db, "task-same", binding("task-same", remote.base))
    claimed = remote.claim("task-same")
    with remote.client("agent") as client:
        far = RemoteWorkspaces(client).prepare(claimed, "agent-1")
        near = GitWorkspaces(remote.db).prepare(claimed, "agent-1")
        assert far is not None and near is not None
        try:

            def state(path: str) -> tuple[str, str, str, str]:
                return (
                    git("rev-parse", "HEAD", cwd=path),
                    git("symbolic-ref", "HEAD", cwd=path),
                    git("for-each-ref", "--format=%(refname)", cwd=path),
                    git("remote", cwd=path),
                )

            branch = "refs/heads/agent/task-same"
            assert state(far.path) == state(near.path) == (remote.base, branch, branch, "")
            assert far.environment()["AIOS_WORKSPACE"] == far.path
            assert sorted(p.name for p in Path(far.path).iterdir()) == [".git", "README.md"]
            Path(far.path, "far.txt").write_text("written far away\n")  # left uncommitted
            proposal = RemoteWorkspaces(client).propose(far, claimed)
        finally:
            far.remove()
            near.remove()
    assert proposal is not None
    assert (proposal["changed_files"], proposal["idempotent"]) == (["far.txt"], False)
    assert "PROPOSAL_RECORDED" in events_of(remote.db, "task-same")


def test_a_source_capture_over_the_api_is_the_local_snapshot(remote: Remote) -> None:
    """The worker executes a `source_capture` claim itself: over the API, from the bundle of
    the base; the result is the one the local worker computes from the repository. (Such
    claims come from the older runtime; the claim's envelope is built here as a claim answers
    it, on a task the agent really holds.)"""
    governed_task(remote.db, "task-cap", binding("task-cap", remote.base))
    claimed = remote.claim("task-cap")
    envelope = project_execution_envelope(
        binding("task-cap", remote.base),
        {
            "action": "source_capture",
            "adapter": "source_capture",
            "capability_scope": ["git.read"],
            "runtime_input": None,
        },
    )
    capture = {**claimed, "envelope": envelope}
    with remote.client("agent") as client:
        far = RemoteWorkspaces(client).source_capture(capture)
    near = GitWorkspaces(remote.db).source_capture(capture)
    assert far is not None and far == near
    assert far["source_snapshot"]["schema"] == "aios.git_tree_snapshot.v1"
    listing = run_git(
        ["--git-dir", str(remote.bare), "ls-tree", "-r", "-z", "--full-tree", remote.base]
    ).stdout
    assert far["source_snapshot"]["payload_sha256"] == hashlib.sha256(listing).hexdigest()
    with remote.client("agent-2") as stranger, pytest.raises(LedgerError) as refused:
        RemoteWorkspaces(stranger).source_capture(capture)
    assert refused.value.code == "NOT_TASK_HOLDER"


def test_a_clone_of_a_bundle_without_the_base_is_refused(remote: Remote, tmp_path: Path) -> None:
    """A bundle that lacks the binding's base (not the server's) gives no workspace."""
    governed_task(remote.db, "task-wrong", binding("task-wrong", remote.base))
    claimed = remote.claim("task-wrong")
    other_bare, _other_base = make_repository(tmp_path / "other", {"x.txt": "other\n"})
    bundle = tmp_path / "other.bundle"
    git("--git-dir", str(other_bare), "bundle", "create", "--quiet", str(bundle), "main")
    with pytest.raises(LedgerError) as refused:
        clone_workspace(str(bundle), claimed, binding("task-wrong", remote.base), agent_id="a")
    assert refused.value.code == "GIT_FAILED"


class SlowWorkspaces(RemoteWorkspaces):
    """Remote workspaces over a link so slow that making one outlasts the claim's lease: on the
    server's held clock, moved a lease's two thirds after each heartbeat, twice."""

    def __init__(self, client: LedgerClient, remote: Remote) -> None:
        super().__init__(client)
        self.remote = remote

    def prepare(self, claim: Mapping[str, Any], agent_id: str) -> Workspace | None:
        made = super().prepare(claim, agent_id)
        task_id, clock = str(claim["task_id"]), self.remote.clock
        for _ in range(2):
            beats = events_of(self.remote.db, task_id).count("TASK_HEARTBEAT")
            deadline = time.monotonic() + 60  # a bound on waiting, never a speed assertion
            while events_of(self.remote.db, task_id).count("TASK_HEARTBEAT") == beats:
                assert time.monotonic() < deadline, "no heartbeat while the workspace is made"
                time.sleep(0.05)
            clock.advance(LEASE_SECONDS * 2 / 3)
        assert clock() > datetime.fromisoformat(str(claim["lease_expires_at"]))
        return made


LEASE_SECONDS = 3


def test_the_lease_is_kept_while_the_workspace_is_made(remote: Remote) -> None:
    """The worker heartbeats while it makes the workspace (a remote worker downloads the base
    first): a workspace that takes longer than the lease does not lose the task."""
    governed_task(remote.db, "task-slow", binding("task-slow", remote.base))
    remote.clock.hold()
    client = LedgerClient(remote.server.url, remote.server.tokens["agent"])
    config = WorkerConfig(
        agent_id="agent-1",
        capabilities=(CAPABILITY,),
        command=f"{sys.executable} {ROOT / 'examples' / 'agent.py'}",
        lease_seconds=LEASE_SECONDS,
        timeout=120,
        once=True,
    )
    worker = Worker.over(
        client, client, config, workspaces=SlowWorkspaces(client, remote), close=client.close
    )
    try:
        worker.run()
    finally:
        worker.close()
    assert [o.outcome for o in worker.outcomes] == ["submitted"]
    assert events_of(remote.db, "task-slow")[-3:] == [
        "TASK_HEARTBEAT",
        "PROPOSAL_RECORDED",
        "RESULT_SUBMITTED",
    ]


def test_lost_answers_to_the_base_and_the_proposal_are_asked_again(remote: Remote) -> None:
    """The download of the base and the upload of the proposal are safe to send again: the
    first answer to each is lost on its way back; the client asks again, gets the base, and the
    proposal is recorded once (the repeat is answered as a replay)."""
    governed_task(remote.db, "task-lossy", binding("task-lossy", remote.base))
    claimed = remote.claim("task-lossy")
    base, proposal = "/v1/tasks/task-lossy/workspace", "/v1/tasks/task-lossy/proposal"
    transport = LosingRecordedAnswer(base, proposal)
    with LedgerClient(
        remote.server.url, remote.server.tokens["agent"], transport=transport, backoff=0.001
    ) as client:
        space = RemoteWorkspaces(client).prepare(claimed, "agent-1")
        assert space is not None
        try:
            Path(space.path, "lossy.txt").write_text("sent twice\n")
            answer = RemoteWorkspaces(client).propose(space, claimed)
        finally:
            space.remove()
    assert transport.sent == [base, base, proposal, proposal]
    assert answer is not None and answer["idempotent"] is True
    assert answer["changed_files"] == ["lossy.txt"]
    assert events_of(remote.db, "task-lossy").count("PROPOSAL_RECORDED") == 1
