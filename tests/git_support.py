"""Helpers of the governed-write tests: real bare repositories in temporary directories, governed
tasks on them (created, bound, projected, claimed), an agent's work in its workspace, and the
checker that holds a repository's ref logs against the ledger's events."""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any, cast

from aios_ledger.core import GovernedExecutionBinding, TaskRow, sha256_hex
from aios_ledger.core.git import ProposalAnswer
from aios_ledger.core.projection import InitialExecutionProjectionRequest
from aios_ledger.core.projection.decisions import runtime_input_of
from aios_ledger.shell.clock import AUTHORIZATION_ENV
from aios_ledger.shell.db.connection import Database, fetch_one
from aios_ledger.shell.git.proposals import QUARANTINE, record_proposal
from aios_ledger.shell.git.repos import add_repository, repository_row
from aios_ledger.shell.git.runner import read_ref, run_git
from aios_ledger.shell.git.workspace import (
    Workspace,
    claim_binding,
    clone_workspace,
    proposal_bundle,
)
from aios_ledger.shell.governed.writes import REFLOG_PREFIX
from aios_ledger.shell.projection.bindings import RegisteredBindingResolver, register_binding
from aios_ledger.shell.projection.store import InitialExecutionProjectionStore
from aios_ledger.shell.tasks.ledger import TaskLedger
from legacy_fixtures import rows

OWNER = "owner-git-tests"
CAPABILITY = "agent.runtime.openclaw"
ADAPTER = "openclaw"
REPOSITORY = "acme/widgets"
AGENT = "agent-7"
IDENTITY = {
    "GIT_AUTHOR_NAME": "Repo Owner",
    "GIT_AUTHOR_EMAIL": "owner@example.invalid",
    "GIT_COMMITTER_NAME": "Repo Owner",
    "GIT_COMMITTER_EMAIL": "owner@example.invalid",
}


def git(*args: str, cwd: Path | str | None = None, env: Mapping[str, str] | None = None) -> str:
    return run_git(list(args), cwd=cwd, env={**IDENTITY, **(env or {})}).text.strip()


def make_repository(root: Path, files: Mapping[str, str] | None = None) -> tuple[Path, str]:
    """A bare repository whose main holds one commit (the base), and its object id."""
    bare = root / "widgets.git"
    source = root / "seed-work"
    git("init", "--quiet", "--bare", str(bare))
    git("init", "--quiet", str(source))
    for name, text in (files or {"README.md": "widgets\n"}).items():
        target = source / name
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text)
    git("add", "--all", cwd=source)
    git("commit", "--quiet", "-m", "base", cwd=source)
    git("push", "--quiet", str(bare), "HEAD:refs/heads/main", cwd=source)
    return bare, git("rev-parse", "HEAD", cwd=source)


def commit_on(bare: Path, branch: str, parent: str, files: Mapping[str, str]) -> str:
    """A commit on `parent` with `files` written directly into the bare repository (as another
    writer would), not moving any ref; its object id."""
    env = {**IDENTITY, "GIT_INDEX_FILE": str(bare / f"index-{branch.replace('/', '-')}")}
    run_git(["--git-dir", str(bare), "read-tree", parent], env=env)
    for name, text in files.items():
        blob = run_git(
            ["--git-dir", str(bare), "hash-object", "-w", "--stdin"], stdin=text.encode()
        ).text.strip()
        run_git(
            [
                "--git-dir",
                str(bare),
                "update-index",
                "--add",
                "--cacheinfo",
                f"100644,{blob},{name}",
            ],
            env=env,
        )
    tree = run_git(["--git-dir", str(bare), "write-tree"], env=env).text.strip()
    os.unlink(env["GIT_INDEX_FILE"])
    return run_git(
        ["--git-dir", str(bare), "commit-tree", tree, "-p", parent, "-m", f"work on {branch}"],
        env=env,
    ).text.strip()


def register(db_path: Path | str, bare: Path, protected: list[str] | None = None) -> None:
    with Database(db_path) as db:
        add_repository(db, REPOSITORY, str(bare), protected)


def binding(task_id: str, base: str, **changes: Any) -> GovernedExecutionBinding:
    return GovernedExecutionBinding.from_mapping(
        {
            "task_id": task_id,
            "job_id": f"job-{task_id}",
            "repository": REPOSITORY,
            "base_oid": base,
            "expected_branch_oid": base,
            "target_branch": f"agent/{task_id}",
            "branch_mode": "CREATE_NEW",
            "generation": 1,
            "idempotency_key": f"binding-{task_id}",
            **changes,
        }
    )


def bound_task(db_path: Path | str, task_id: str, bound: GovernedExecutionBinding) -> None:
    """Create the task and register its binding, unprojected (a capture's first attempt)."""
    ledger = TaskLedger(db_path)
    try:
        ledger.create_task(
            {
                "task_id": task_id,
                "goal": f"Improve widgets ({task_id})",
                "instructions": "Work on the bound branch only.",
                "success_criteria": [{"id": "done", "description": "widgets improved"}],
            },
            idempotency_key=f"create-{task_id}",
        )
    finally:
        ledger.close()
    with Database(db_path) as db:
        register_binding(db, bound.public())


def governed_task(db_path: Path | str, task_id: str, bound: GovernedExecutionBinding) -> None:
    """Create the task, register its binding and project its runtime envelope (as the owner)."""
    os.environ[AUTHORIZATION_ENV] = OWNER
    bound_task(db_path, task_id, bound)
    with Database(db_path) as db:
        row = db.read(lambda conn: fetch_one(conn, "get_task", {"task_id": task_id}))
    assert row is not None
    task = TaskRow.from_row(row)
    resolver = RegisteredBindingResolver(db_path)
    store = InitialExecutionProjectionStore(db_path, resolver)
    try:
        envelope = resolver(task_id, bound.job_id, CAPABILITY, ADAPTER, runtime_input_of(task))
        request = InitialExecutionProjectionRequest.from_mapping(
            {
                "expected_status": "QUEUED",
                "expected_revision": 1,
                "expected_attempt": 0,
                "expected_metadata_sha256": sha256_hex(task.metadata()),
                "expected_required_capabilities_sha256": sha256_hex(task.required_capabilities()),
                "expected_job_id": bound.job_id,
                "expected_execution_digest": envelope["execution_digest"],
                "required_capability": CAPABILITY,
                "adapter": ADAPTER,
                "authorization_id": OWNER,
                "idempotency_key": f"projection-{task_id}",
                "reason": "governed work on widgets",
            }
        )
        store.project(task_id, request)
    finally:
        store.close()
        resolver.close()


def claim(db_path: Path | str, task_id: str) -> dict[str, Any]:
    ledger = TaskLedger(db_path)
    try:
        answer = ledger.claim(
            agent_id=AGENT, capabilities=[CAPABILITY], lease_seconds=600, task_id=task_id
        )
    finally:
        ledger.close()
    assert answer is not None
    return dict(answer)


def workspace(db_path: Path | str, claimed: Mapping[str, Any]) -> Workspace:
    with Database(db_path) as db:
        found = prepare_workspace(db, claimed, agent_id=AGENT)
    assert found is not None
    return found


def edit(space: Workspace, files: Mapping[str, str], *, commit: bool = True) -> None:
    """The agent's work: write files, and commit them (as the agent) or leave them."""
    for name, text in files.items():
        target = Path(space.path, name)
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text)
    if commit:
        env = space.environment()
        run_git(["add", "--all"], cwd=space.path, env=env)
        run_git(["commit", "--quiet", "-m", "agent work"], cwd=space.path, env=env)


def propose(
    db_path: Path | str, space: Workspace, claimed: Mapping[str, Any]
) -> dict[str, Any] | None:
    with Database(db_path) as db:
        answer = propose_from_workspace(db, space, lease_token=str(claimed["lease_token"]))
    return None if answer is None else dict(answer)


def runtime_result(
    claimed: Mapping[str, Any], changed: list[str], **overrides: Any
) -> dict[str, Any]:
    envelope = claimed["envelope"]
    bound = envelope["binding"]
    return {
        "task_id": claimed["task_id"],
        "job_id": envelope["job_id"],
        "execution_digest": envelope["execution_digest"],
        "execution_mode": "agent_runtime",
        "status": "SUCCEEDED",
        "summary": "widgets improved",
        "changed_files": changed,
        "repository": bound["repository"],
        "target_branch": bound["target_branch"],
        "generation": bound["generation"],
        "direct_main_write": False,
        "production_write": False,
        "force_push": False,
        "protected_ref_bypass": False,
        "secret_material_exposed": False,
        **overrides,
    }


def submit_and_accept(
    db_path: Path | str,
    claimed: Mapping[str, Any],
    result: Mapping[str, Any],
    *,
    reviewer: str | None = None,
) -> None:
    task_id = str(claimed["task_id"])
    ledger = TaskLedger(db_path)
    try:
        ledger.submit_result(
            task_id,
            lease_token=str(claimed["lease_token"]),
            result=dict(result),
            idempotency_key=f"submit-{task_id}",
        )
        ledger.verify(
            task_id,
            decision="SUCCEEDED",
            reason="reviewed",
            idempotency_key=f"verify-{task_id}",
            reviewer=reviewer,
        )
    finally:
        ledger.close()


def verified_proposal(
    db_path: Path | str,
    task_id: str,
    bound: GovernedExecutionBinding,
    files: Mapping[str, str],
    *,
    reviewer: str | None = None,
) -> dict[str, Any]:
    """The whole way to a verified task with a proposal: create, bind, project, claim, edit and
    commit in the workspace, propose, submit, accept (by `reviewer`, when named). Returns the
    proposal's answer."""
    governed_task(db_path, task_id, bound)
    claimed = claim(db_path, task_id)
    space = workspace(db_path, claimed)
    try:
        edit(space, files)
        proposal = propose(db_path, space, claimed)
    finally:
        space.remove()
    assert proposal is not None
    submit_and_accept(db_path, claimed, runtime_result(claimed, sorted(files)), reviewer=reviewer)
    return proposal


def branch_refs(bare: Path) -> dict[str, str]:
    """Every ref of the repository outside the quarantine, and its object id."""
    listed = git("--git-dir", str(bare), "for-each-ref", "--format=%(refname) %(objectname)")
    refs = {}
    for line in listed.splitlines():
        name, oid = line.split(" ")
        if not name.startswith(QUARANTINE + "/"):
            refs[name] = oid
    return refs


def reflog(bare: Path, ref: str) -> list[tuple[str, str, str]]:
    """The ref's log as (old, new, message), oldest first, read from the log file itself."""
    path = bare / "logs" / ref
    if not path.exists():
        return []
    entries = []
    for line in path.read_text().splitlines():
        head, _, message = line.partition("\t")
        old, new = head.split(" ")[:2]
        entries.append((old, new, message))
    return entries


def _target(db_path: Path | str) -> Path:
    """A file or a PostgreSQL URL: `rows` reads either (its type says file)."""
    return cast(Path, db_path)


def ledger_outcomes(db_path: Path | str) -> list[dict[str, Any]]:
    """The governed-write events of the log, in order (read past the library, as an auditor):
    intents and outcomes (a refused write, GOVERNED_WRITE_REFUSED, intended nothing)."""
    found = rows(_target(db_path), "SELECT event_type, payload_json FROM events ORDER BY event_id")
    return [
        {"type": event_type, **json.loads(payload)}
        for event_type, payload in found
        if str(event_type).startswith("GOVERNED_WRITE_") and event_type != "GOVERNED_WRITE_REFUSED"
    ]


def assert_reflog_agrees(db_path: Path | str, bare: Path) -> None:
    """The repository's ref logs and the ledger's events tell the same story: each reflog
    entry the ledger's write made (its message names the write) is one GOVERNED_WRITE_APPLIED
    event with the same ref, old and new ids, and the other way round; every write intended
    has exactly one outcome; and a ref the ledger last applied still holds what it applied."""
    events = ledger_outcomes(db_path)
    intended = {e["idempotency_key"] for e in events if e["type"] == "GOVERNED_WRITE_INTENDED"}
    outcomes = [e for e in events if e["type"] != "GOVERNED_WRITE_INTENDED"]
    settled = [e["idempotency_key"] for e in outcomes]
    assert sorted(settled) == sorted(intended), "every intent has exactly one outcome"
    applied = {
        (e["ref"], e["old_oid"], e["new_oid"], e["idempotency_key"])
        for e in outcomes
        if e["type"] == "GOVERNED_WRITE_APPLIED"
    }
    logged = set()
    for name in branch_refs(bare):
        for old, new, message in reflog(bare, name):
            if message.startswith(REFLOG_PREFIX):
                logged.add((name, old, new, message[len(REFLOG_PREFIX) :]))
    assert logged == applied
    last: dict[str, str] = {}
    for e in outcomes:
        if e["type"] == "GOVERNED_WRITE_APPLIED":
            last[e["ref"]] = e["new_oid"]
    refs = branch_refs(bare)
    assert {name: refs.get(name) for name in last} == last


def ref(bare: Path, name: str) -> str | None:
    return read_ref(str(bare), name)


def repository_files(bare: Path) -> dict[str, bytes]:
    """Every file of the bare repository, byte for byte: "untouched" means this is equal."""
    return {
        str(path.relative_to(bare)): path.read_bytes()
        for path in sorted(bare.rglob("*"))
        if path.is_file()
    }


def events_of(db_path: Path | str, task_id: str) -> list[str]:
    query = "SELECT event_type FROM events WHERE task_id = ? ORDER BY event_id"
    found = rows(_target(db_path), query, (task_id,))
    return [str(row[0]) for row in found]


def prepare_workspace(
    db: Database, claim: Mapping[str, Any], *, agent_id: str, parent: str | None = None
) -> Workspace | None:
    """A fresh working copy at the binding's base for a claim whose binding names a governed
    repository of this ledger; None for any other claim."""
    binding = claim_binding(claim)
    if binding is None:
        return None
    repository = db.read(lambda conn: repository_row(conn, binding.repository))
    if repository is None:
        return None
    return clone_workspace(repository.path, claim, binding, agent_id=agent_id, parent=parent)


def propose_from_workspace(
    db: Database, workspace: Workspace, *, lease_token: str
) -> ProposalAnswer | None:
    """Bundle and record what the agent did (None: it changed nothing)."""
    data = proposal_bundle(workspace)
    if data is None:
        return None
    return record_proposal(db, workspace.task_id, data, lease_token=lease_token)
