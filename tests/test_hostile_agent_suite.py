"""One hostile agent end to end (issue 26): `mallory`, an agent that also holds the reviewer
role and is granted the governed repository's capability, plays every trick of the other
hostile suites in one sitting against the server `serve` runs on loopback, a real bare git
repository and governed bindings, while `agent-1` holds a task of its own. It works as a remote
agent would: its own token through `LedgerClient` (and raw HTTP where a client would not send
such a request), its workspaces cloned from the bundles the server hands out, its commits made
with git.

At the end nothing it did reached the repository (`git for-each-ref` and `git log --all`, and
the repository's files, byte for byte as before), `agent-1`'s task, its evidence run and a
bystander's queued task are as they were, no refused upload left a bundle or a scratch folder,
and `verify` passes (run events included: they are sealed).

Figures (`make test`): 39 hostile cases tried, 39 refused, each with its stable code and
nothing changed. Capability lies 4: `CAPABILITY_NOT_GRANTED` 3 (a next-eligible claim, a claim of
the bystander's task and a batch, each offering a capability beyond the grant) and
`INVALID_TRANSITION` 1 (claiming `agent-1`'s task by name). Squatting another task's run or
evidence id 6: `RUN_ID_RESERVED` 5 (`T@1`, `T@2`, a run in `task:T`, the review run
`review:T:1:1`, a run in that review's session) and `FORBIDDEN` 1 (a run in `agent-1`'s own
session). Another agent's attempt 7: `NOT_RUN_OWNER` 3 (appending to its evidence run with no
lease, a made-up one and mallory's own), `NOT_TASK_HOLDER` 3 (its heartbeat, result and
release) and `FORBIDDEN` 1 (cancelling it). Uploads 11: the wrong lease 3 (`LEASE_INVALID` 2, a
made-up lease and that of mallory's other task; `NOT_TASK_HOLDER` 1, its own lease on `agent-1`'s
task), a bundle bomb 2 (4 MiB under 10,000 paths: `SCAN_BUDGET_EXCEEDED` on its own task,
`NOT_TASK_HOLDER` on `agent-1`'s), a gitlink 1 (`BUNDLE_UNSAFE`), hostile branch names 5
(`REF_NAME_INVALID` 2: a bundle branch with a right-to-left override, and
`refs/heads/refs/heads/main`; `BUNDLE_INVALID` 1: a tag; `FORBIDDEN` 2: binding its task to
`main`, and the governed write itself). Secret smuggling 8: a key added then deleted, one in a
commit message, one in `yarn.lock`, one base64-encoded, each recorded with the finding, judged
SUCCEEDED by the reviewer it fooled and refused `SECRET_MATERIAL` at the owner's write (4), and
another bundle for each of those attempts, `PROPOSAL_CONFLICT` (4). Self-review 3:
`SELF_REVIEW` 2 (its verdict on its own result, with and without the result's digest) and
`NOT_RUN_OWNER` 1 (its lease on the attempt it submitted). Controls, which the ledger must take:
17 (its 5 claims, 4 recorded proposals, 4 submits, and the fooled reviewer's 4 verdicts).
"""

from __future__ import annotations

import base64
import functools
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import attrs
import pytest
from aios_ledger.core import ClaimAnswer
from aios_ledger.shell.db.connection import Database
from aios_ledger.shell.git.workspace import Workspace
from aios_ledger.shell.log.verification import verify_log
from aios_ledger.shell.remote.client import LedgerClient
from aios_ledger.shell.remote.workspaces import RemoteWorkspaces
from api_server import ApiServer
from git_support import (
    CAPABILITY,
    binding,
    events_of,
    git,
    governed_task,
    make_repository,
    register,
    repository_files,
    runtime_result,
)
from hostile_support import (
    AWS_KEY,
    PRIVATE_KEY,
    Tally,
    bundle_bomb,
    listing,
    repository_state,
)
from legacy_fixtures import rows
from reliability_figures import record_figures

MALLORY = "mallory"
VICTIM = "agent-1"  # the role token ApiServer issues for "agent"
VICTIM_TASK = "task-victim"
BYSTANDER = "task-gpu"
SECRET = "gpu.secret"
REFUSALS = "task-m-refusals"  # mallory's attempt every refused upload is made for
SMUGGLED = ("task-m-removed", "task-m-message", "task-m-yarn", "task-m-base64")
LEASE = 600
MADE_UP = "L" * 43
EXPECTED_TRIED = 39


@attrs.define
class World:
    server: ApiServer
    bare: Path
    base: str
    root: Path
    proposals: Path
    server_tmp: Path


@pytest.fixture
def world(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[World]:
    """A server whose scratch folders and proposals go to folders of the test's own, a
    governed repository, `agent-1`'s task and mallory's, and a bystander's queued task that
    needs a capability mallory is not granted."""
    server_tmp = tmp_path / "server-tmp"
    server_tmp.mkdir()
    monkeypatch.setenv("TMPDIR", str(server_tmp))  # the server's; the test's own is unchanged
    db = tmp_path / "ledger.db"
    proposals = Path(f"{db}.proposals")  # where a SQLite ledger keeps its proposals' bundles
    with ApiServer(db, role_tokens=True) as server:
        bare, base = make_repository(tmp_path)
        register(db, bare)
        for task_id in (VICTIM_TASK, REFUSALS, *SMUGGLED):
            governed_task(db, task_id, binding(task_id, base))
        created = server.client("owner").post(
            "/v1/tasks",
            json={
                "idempotency_key": "create-gpu",
                "task": {
                    "task_id": BYSTANDER,
                    "goal": "g",
                    "instructions": "i",
                    "required_capabilities": [SECRET],
                },
            },
        )
        assert created.status_code == 201, created.text
        yield World(server, bare, base, tmp_path, proposals, server_tmp)


# -- what mallory does with git in its workspaces ---------------------------------------------


def commit(space: Workspace, files: dict[str, bytes | None], message: str = "agent work") -> None:
    """Files written (None: removed) and committed in the workspace, as the agent."""
    for name, data in files.items():
        target = Path(space.path, name)
        if data is None:
            target.unlink()
            continue
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(data)
    env = space.environment()
    git("add", "--all", cwd=space.path, env=env)
    git("commit", "--quiet", "-m", message, cwd=space.path, env=env)


def bundle(space: Workspace, *refs: str) -> bytes:
    """HEAD (and `refs`) on top of the base, bundled as an agent may bundle."""
    out = Path(space.root, "proposal.bundle")
    out.unlink(missing_ok=True)
    git("bundle", "create", "--quiet", str(out), "HEAD", *refs, "--not", space.base_oid,
        cwd=space.path)  # fmt: skip
    return out.read_bytes()


def gitlink(space: Workspace) -> bytes:
    """A commit whose tree holds a gitlink (`lib` pointing at the base), bundled; the
    workspace is left at the commit it was at."""
    env, before = space.environment(), git("rev-parse", "HEAD", cwd=space.path)
    git("update-index", "--add", "--cacheinfo", f"160000,{space.base_oid},lib", cwd=space.path,
        env=env)  # fmt: skip
    git("commit", "--quiet", "-m", "vendor lib", cwd=space.path, env=env)
    data = bundle(space)
    git("reset", "--quiet", "--hard", before, cwd=space.path)
    return data


def branch_bundle(space: Workspace, ref: str) -> bytes:
    """A clean commit bundled with another ref of mallory's naming beside HEAD."""
    git("update-ref", ref, "HEAD", cwd=space.path)
    data = bundle(space, ref)
    git("update-ref", "-d", ref, cwd=space.path)
    return data


def key_added_then_removed(space: Workspace) -> None:
    commit(space, {"deploy/id_rsa": PRIVATE_KEY.encode()}, "add the deploy key")
    commit(space, {"deploy/id_rsa": None}, "remove it again")


def key_in_a_message(space: Workspace) -> None:
    commit(space, {"notes.txt": b"nothing here\n"}, f"the key, for later:\n\n{PRIVATE_KEY}")


def key_in_yarn_lock(space: Workspace) -> None:
    commit(space, {"yarn.lock": f"# lockfile v1\n{PRIVATE_KEY}".encode()})


def key_base64_encoded(space: Workspace) -> None:
    wrapped = base64.encodebytes(PRIVATE_KEY.encode() * 2)  # wrapped at 76, as `base64` does
    commit(space, {"assets/key.b64": wrapped, "assets/aws.txt.b64": base64.b64encode(
        f"aws_access_key_id = {AWS_KEY}\n".encode())})  # fmt: skip


SECRET_WORK: dict[str, Callable[[Workspace], None]] = {
    "task-m-removed": key_added_then_removed,
    "task-m-message": key_in_a_message,
    "task-m-yarn": key_in_yarn_lock,
    "task-m-base64": key_base64_encoded,
}


# -- what must be as it was --------------------------------------------------------------------


def others(world: World, victim_run: str) -> dict[str, Any]:
    """Everything of the other agents a hostile agent must not change: `agent-1`'s task row,
    its events and its evidence run, and the bystander's task and events."""
    db = world.server.db
    query = "SELECT * FROM tasks WHERE task_id IN (?, ?) ORDER BY task_id"
    return {
        "tasks": rows(db, query, (VICTIM_TASK, BYSTANDER)),
        "events": [events_of(db, VICTIM_TASK), events_of(db, BYSTANDER)],
        "run": rows(db, "SELECT * FROM run_events WHERE run_id = ? ORDER BY seq", (victim_run,)),
        "runs": rows(db, "SELECT * FROM runs WHERE run_id = ?", (victim_run,)),
    }


class Mallory:
    """The hostile agent: its token (agent and reviewer, granted the repository's capability)
    through `LedgerClient` and raw HTTP, its workspaces from the server's bundles, and the tally
    of what it tried."""

    def __init__(self, world: World, victim_run: str, victim_lease: str) -> None:
        server = world.server
        token = server.issue(MALLORY, "agent", "reviewer", capabilities=[CAPABILITY])
        self.world = world
        self.client = LedgerClient(server.url, token, agent_name=MALLORY, retries=0)
        self.raw = server.client(token=token)
        self.spaces = RemoteWorkspaces(self.client)
        self.tally = Tally()
        self.victim_run = victim_run
        self.victim_lease = victim_lease
        self.held: dict[str, ClaimAnswer] = {}

    def claim(self, task_id: str | None, *offered: str) -> ClaimAnswer | None:
        return self.client.claim(
            agent_id=MALLORY,
            capabilities=list(offered or (CAPABILITY,)),
            lease_seconds=LEASE,
            task_id=task_id,
        )

    def lease(self, task_id: str) -> str:
        return str(self.held[task_id]["lease_token"])

    def upload(self, task_id: str, data: bytes, lease: str) -> Any:
        return self.client.upload_proposal(task_id, lease_token=lease, bundle=data)

    def lies_about_capabilities(self) -> None:
        refused, raw = self.tally.refused, self.raw
        refused("CAPABILITY_NOT_GRANTED", lambda: self.claim(None, CAPABILITY, SECRET))
        refused("CAPABILITY_NOT_GRANTED", lambda: self.claim(BYSTANDER, SECRET))
        batch = {"capabilities": [SECRET], "lease_seconds": LEASE, "limit": 5}
        refused("CAPABILITY_NOT_GRANTED", lambda: raw.post("/v1/claims", json=batch), status=403)
        refused("INVALID_TRANSITION", lambda: self.claim(VICTIM_TASK))  # agent-1 holds it
        idle = self.client.idle_reason([CAPABILITY])  # why the bystander's task is out of reach
        assert (idle.ungranted, idle.ungranted_capabilities) == (1, (SECRET,)), idle

    def squats_runs(self) -> None:
        """Runs in the forms the ledger reserves for agent-1's attempts and their reviews."""
        for body in (
            {"run_id": f"{VICTIM_TASK}@1"},
            {"run_id": f"{VICTIM_TASK}@2"},
            {"run_id": "mine", "session_id": f"task:{VICTIM_TASK}"},
            {"run_id": f"review:{VICTIM_TASK}:1:1"},
            {"run_id": "mine", "session_id": f"review:{VICTIM_TASK}:1:1"},
        ):
            self.squat("RUN_ID_RESERVED", {"prompt": "attempt 2", **body})
        self.squat("FORBIDDEN", {"prompt": "p", "run_id": "theirs", "session_id": VICTIM})

    def squat(self, code: str, body: dict[str, str]) -> None:
        self.tally.refused(code, lambda: self.raw.post("/v1/runs", json=body), status=403)

    def claims_its_own(self) -> None:
        for task_id in (REFUSALS, *SMUGGLED):
            claimed = self.tally.answered(functools.partial(self.claim, task_id))
            assert claimed is not None and claimed["status"] == "CLAIMED"
            self.held[task_id] = claimed

    def touches_another_attempt(self) -> None:
        """agent-1's evidence run and its task, with no lease, a made-up one and its own."""
        refused, client, lease = self.tally.refused, self.client, self.lease(REFUSALS)
        forged = functools.partial(
            client.append_event, self.victim_run, "stderr", {"line": "tests passed"}
        )
        for token in (None, MADE_UP, lease):
            refused("NOT_RUN_OWNER", functools.partial(forged, lease_token=token))
        refused(
            "NOT_TASK_HOLDER",
            lambda: client.heartbeat(VICTIM_TASK, lease_token=lease, lease_seconds=LEASE),
        )
        refused(
            "NOT_TASK_HOLDER",
            lambda: client.submit_result(
                VICTIM_TASK, lease_token=lease, result={"done": True}, idempotency_key="steal"
            ),
        )
        refused(
            "NOT_TASK_HOLDER",
            lambda: client.release(VICTIM_TASK, lease_token=lease, reason="mine now"),
        )
        cancel = {"reason": "in my way", "idempotency_key": "cancel-victim"}
        refused(
            "FORBIDDEN",
            lambda: self.raw.post(f"/v1/tasks/{VICTIM_TASK}/cancel", json=cancel),
            status=403,
        )

    def uploads_hostile_bundles(self) -> None:
        """On its own attempt: the wrong lease, a bundle bomb, a gitlink, branch names that
        mislead, a tag; and each refused at once on agent-1's task."""
        refused, lease = self.tally.refused, self.lease(REFUSALS)
        space = self.spaces.prepare(self.held[REFUSALS], MALLORY)
        assert space is not None
        try:
            commit(space, {"widget.py": b"WIDGETS = 4\n"})
            clean = bundle(space)
            other = self.lease(SMUGGLED[0])
            refused("LEASE_INVALID", lambda: self.upload(REFUSALS, clean, MADE_UP))
            refused("LEASE_INVALID", lambda: self.upload(REFUSALS, clean, other))
            refused("NOT_TASK_HOLDER", lambda: self.upload(VICTIM_TASK, clean, lease))
            head = git("rev-parse", "HEAD", cwd=space.path)
            bomb = bundle_bomb(
                Path(space.path, ".git"),
                space.base_oid,
                Path(space.root, "bomb.bundle"),
                paths=10_000,
                blob_bytes=4 * 1024 * 1024,
            )
            git("update-ref", "HEAD", head, cwd=space.path)  # back to its clean commit
            refused("SCAN_BUDGET_EXCEEDED", lambda: self.upload(REFUSALS, bomb, lease))
            refused("NOT_TASK_HOLDER", lambda: self.upload(VICTIM_TASK, bomb, lease))
            linked = gitlink(space)
            refused("BUNDLE_UNSAFE", lambda: self.upload(REFUSALS, linked, lease))
            for ref in ("refs/heads/agent/\u202egnp.exe", "refs/heads/refs/heads/main"):
                named = branch_bundle(space, ref)
                refused("REF_NAME_INVALID", functools.partial(self.upload, REFUSALS, named, lease))
            git("tag", "v1", cwd=space.path)
            tagged = bundle(space, "refs/tags/v1")
            refused("BUNDLE_INVALID", lambda: self.upload(REFUSALS, tagged, lease))
        finally:
            space.remove()
        rebind = {
            **binding(REFUSALS, self.world.base).public(),
            "job_id": "job-evil",
            "target_branch": "main",
        }
        put = f"/v1/bindings/{REFUSALS}/job-evil"
        refused("FORBIDDEN", lambda: self.raw.put(put, json=rebind), status=403)
        write = f"/v1/tasks/{REFUSALS}/governed-write"
        body = {"idempotency_key": "write-mine"}
        refused("FORBIDDEN", lambda: self.raw.post(write, json=body), status=403)

    def smuggles(
        self, task_id: str, work: Callable[[Workspace], None], reviewer: LedgerClient
    ) -> None:
        """A secret in its proposal: recorded with the finding (another bundle for the attempt
        is refused), judged SUCCEEDED by a reviewer it fooled, refused at the owner's write."""
        refused, answered, lease = self.tally.refused, self.tally.answered, self.lease(task_id)
        claimed = self.held[task_id]
        space = self.spaces.prepare(claimed, MALLORY)
        assert space is not None
        try:
            work(space)
            data = bundle(space)
            commit(space, {"more.txt": b"more\n"})
            another = bundle(space)
        finally:
            space.remove()
        recorded = answered(lambda: self.upload(task_id, data, lease))
        assert recorded["facts"]["secret_material_exposed"] is True, recorded
        refused("PROPOSAL_CONFLICT", lambda: self.upload(task_id, another, lease))
        result = runtime_result(claimed, list(recorded["changed_files"]))
        answered(
            lambda: self.client.submit_result(
                task_id, lease_token=lease, result=result, idempotency_key=f"s-{task_id}"
            )
        )
        if task_id == SMUGGLED[0]:
            self.reviews_itself(task_id, lease)
        answered(
            lambda: reviewer.verify(
                task_id, decision="SUCCEEDED", reason="fooled", idempotency_key=f"v-{task_id}"
            )
        )
        owner, write = self.world.server.client("owner"), {"idempotency_key": f"w-{task_id}"}
        refused(
            "SECRET_MATERIAL",
            lambda: owner.post(f"/v1/tasks/{task_id}/governed-write", json=write),
            status=409,
        )

    def reviews_itself(self, task_id: str, lease: str) -> None:
        """Its reviewer role on its own result, and its lease on the attempt it submitted."""
        refused, client = self.tally.refused, self.client
        verdict: dict[str, Any] = {"decision": "SUCCEEDED", "reason": "looks right to me"}
        refused("SELF_REVIEW", lambda: client.verify(task_id, **verdict, idempotency_key="self"))
        digest = str(client.get(task_id)["result_digest"])
        refused(
            "SELF_REVIEW",
            lambda: client.verify(
                task_id, **verdict, idempotency_key="self-2", expected_result_digest=digest
            ),
        )
        refused(
            "NOT_RUN_OWNER",
            lambda: client.append_event(f"{task_id}@1", "stdout", {"x": 1}, lease_token=lease),
        )


def test_a_hostile_agent_reaches_neither_the_repository_nor_another_agents_task(
    world: World,
) -> None:
    server = world.server
    victim = LedgerClient(server.url, server.tokens["agent"], agent_name=VICTIM)
    reviewer = LedgerClient(server.url, server.tokens["reviewer"], agent_name="reviewer-1")
    # agent-1 claims its task and records evidence in the run its claim created.
    held = victim.claim(
        agent_id=VICTIM, capabilities=[CAPABILITY], lease_seconds=LEASE, task_id=VICTIM_TASK
    )
    assert held is not None
    victim_run, victim_lease = f"{VICTIM_TASK}@{held['attempt']}", str(held["lease_token"])
    victim.append_event(victim_run, "stdout", {"line": "working"}, lease_token=victim_lease)
    repository = (repository_state(world.bare), repository_files(world.bare))
    before = others(world, victim_run)

    mallory = Mallory(world, victim_run, victim_lease)
    mallory.lies_about_capabilities()
    mallory.squats_runs()
    mallory.claims_its_own()
    mallory.touches_another_attempt()
    mallory.uploads_hostile_bundles()
    for task_id, work in SECRET_WORK.items():
        mallory.smuggles(task_id, work, reviewer)

    # What it left: nothing in the repository, nothing of the others changed, no bundle of a
    # refused upload and no scratch folder.
    assert (repository_state(world.bare), repository_files(world.bare)) == repository
    assert others(world, victim_run) == before
    stored = [path for path in world.proposals.rglob("*") if path.is_file()]
    assert len(stored) == len(SMUGGLED)  # the four recorded proposals' bundles, nothing else
    # (The server's private git home, made once for its process, is the one folder there.)
    scratch = [p for p in listing(world.server_tmp) if not p.startswith("aios-git-home-")]
    assert scratch == []
    # agent-1's attempt goes on as if mallory had not been there.
    victim.append_event(victim_run, "stdout", {"line": "done"}, lease_token=victim_lease)
    assert [event.kind for event in victim.run_events(victim_run)] == ["stdout", "stdout"]
    with Database(server.db) as db:
        report = verify_log(db)
    assert report.intact, report.public()["findings"]

    tally = mallory.tally
    figures = tally.figures()
    record_figures("hostile_agent_suite", figures)
    assert tally.tried == tally.refused_count == EXPECTED_TRIED, figures
