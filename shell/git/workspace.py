"""Workspaces: the working copy an agent gets for a task bound to a governed repository.

`prepare_workspace` clones the governed repository (a plain local clone: the agent's objects
and refs are its own, the repository is only read) into a fresh directory, checks out the
binding's `base_oid` on a branch named like the target, drops every other branch and the
remote, and answers the directory (the agent's current directory, also in `AIOS_WORKSPACE`)
with the agent's git identity. After the agent exits, `propose_from_workspace` bundles its
commits on top of `base_oid` (uncommitted changes committed for it) and records the proposal
(`proposals.record_proposal`); the workspace is then removed.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import attrs
from aios_ledger.core import GovernedExecutionBinding, LedgerError, ProposalAnswer
from aios_ledger.shell.clock import Clock, system_clock
from aios_ledger.shell.db.connection import Database
from aios_ledger.shell.git.proposals import bundle_workspace, record_proposal
from aios_ledger.shell.git.repos import repository_row
from aios_ledger.shell.git.runner import check_ref_format, run_git

WORKSPACE_ENV = "AIOS_WORKSPACE"


@attrs.frozen
class Workspace:
    root: str
    path: str
    task_id: str
    base_oid: str
    agent_id: str

    def environment(self) -> dict[str, str]:
        """What the agent's process gets: where it works, and who commits there."""
        email = f"{self.agent_id}@agents.aios-ledger.invalid"
        return {
            WORKSPACE_ENV: self.path,
            "GIT_AUTHOR_NAME": self.agent_id,
            "GIT_AUTHOR_EMAIL": email,
            "GIT_COMMITTER_NAME": self.agent_id,
            "GIT_COMMITTER_EMAIL": email,
        }

    def remove(self) -> None:
        shutil.rmtree(self.root, ignore_errors=True)


def claim_binding(claim: Mapping[str, Any]) -> GovernedExecutionBinding | None:
    """The binding of a claim's envelope, or None for a task without one."""
    envelope = claim.get("envelope")
    if not isinstance(envelope, Mapping) or not isinstance(envelope.get("binding"), Mapping):
        return None
    return GovernedExecutionBinding.from_mapping(dict(envelope["binding"]))


def prepare_workspace(
    db: Database, claim: Mapping[str, Any], *, agent_id: str, parent: str | None = None
) -> Workspace | None:
    """A fresh working copy at the binding's base for a claim whose binding names a governed
    repository; None for any other claim."""
    binding = claim_binding(claim)
    if binding is None:
        return None
    repository = db.read(lambda conn: repository_row(conn, binding.repository))
    if repository is None:
        return None
    check_ref_format("refs/heads/" + binding.target_branch.removeprefix("refs/heads/"))
    root = tempfile.mkdtemp(prefix="aios-workspace-", dir=parent)
    path = str(Path(root, "work"))
    try:
        run_git(
            ["clone", "--quiet", "--no-checkout", "--no-hardlinks", repository.path, path],
            timeout=300,
        )
        git = ["--git-dir", str(Path(path, ".git")), "--work-tree", path]
        branch = binding.target_branch.removeprefix("refs/heads/")
        run_git([*git, "checkout", "--quiet", "-B", branch, binding.base_oid], cwd=path)
        others = run_git(
            [*git, "for-each-ref", "--format=%(refname:short)", "refs/heads/"], cwd=path
        )
        for name in others.text.split():
            if name != branch:
                run_git([*git, "branch", "--quiet", "-D", name], cwd=path)
        run_git([*git, "remote", "remove", "origin"], cwd=path)
    except BaseException:
        shutil.rmtree(root, ignore_errors=True)
        raise
    return Workspace(root, path, str(claim["task_id"]), binding.base_oid, agent_id)


def propose_from_workspace(
    db: Database, workspace: Workspace, *, lease_token: str, clock: Clock = system_clock
) -> ProposalAnswer | None:
    """Bundle and record what the agent did (None: it changed nothing)."""
    bundle = Path(workspace.root, "proposal.bundle")
    if not bundle_workspace(
        workspace.path, workspace.base_oid, author=workspace.agent_id, out=bundle
    ):
        return None
    try:
        data = bundle.read_bytes()
    except OSError as exc:
        raise LedgerError("BUNDLE_INVALID", f"the workspace's bundle: {exc}") from None
    return record_proposal(db, workspace.task_id, data, lease_token=lease_token, clock=clock)


SNAPSHOT_SCHEMA = "aios.git_tree_snapshot.v1"


def tree_snapshot(repository_path: str, oid: str) -> dict[str, str]:
    """The snapshot of a commit's tree: `payload_sha256` is the sha256 of git's own listing of
    every entry (mode, type, object id, path; `ls-tree -r -z --full-tree`), so the same tree
    always has the same digest and any change to any file changes it."""
    listing = run_git(
        ["--git-dir", repository_path, "ls-tree", "-r", "-z", "--full-tree", oid],
        max_output=256 * 1024 * 1024,
    ).stdout
    return {"schema": SNAPSHOT_SCHEMA, "payload_sha256": hashlib.sha256(listing).hexdigest()}


def source_capture_result(db: Database, claim: Mapping[str, Any]) -> dict[str, Any] | None:
    """What the worker itself submits for a `source_capture` claim on a governed repository:
    the snapshot of the binding's base (None for any other claim)."""
    envelope = claim.get("envelope")
    binding = claim_binding(claim)
    if binding is None or not isinstance(envelope, Mapping):
        return None
    if envelope.get("action") != "source_capture":
        return None
    repository = db.read(lambda conn: repository_row(conn, binding.repository))
    if repository is None:
        return None
    return {
        "task_id": binding.task_id,
        "job_id": binding.job_id,
        "repository": binding.repository,
        "base_oid": binding.base_oid,
        "expected_branch_oid": binding.expected_branch_oid,
        "target_branch": binding.target_branch,
        "generation": binding.generation,
        "status": "SUCCEEDED",
        "classification": "NEEDS_REWORK_SOURCE_CAPTURE",
        "execution_mode": "source_capture",
        "execution_digest": envelope["execution_digest"],
        "changed_files": [],
        "writer_lease": "NONE",
        "verification_state": "NEEDS_REWORK",
        "direct_main_write": False,
        "production_write": False,
        "force_push": False,
        "protected_ref_bypass": False,
        "secret_material_exposed": False,
        "source_snapshot": tree_snapshot(repository.path, binding.base_oid),
    }


class GitWorkspaces:
    """The worker's hooks (each call on a connection of its own, so that a clone never holds
    the worker's shared connections): a workspace for a claim, the proposal after the agent,
    the result of a source capture."""

    def __init__(self, path: str | os.PathLike[str], *, migrate: bool = True) -> None:
        self._path = path
        self._migrate = migrate

    def _database(self) -> Database:
        return Database(self._path, migrate=self._migrate)

    def prepare(self, claim: Mapping[str, Any], agent_id: str) -> Workspace | None:
        if claim_binding(claim) is None:
            return None
        with self._database() as db:
            return prepare_workspace(db, claim, agent_id=agent_id)

    def propose(self, workspace: Workspace, claim: Mapping[str, Any]) -> ProposalAnswer | None:
        with self._database() as db:
            return propose_from_workspace(db, workspace, lease_token=str(claim["lease_token"]))

    def source_capture(self, claim: Mapping[str, Any]) -> dict[str, Any] | None:
        if claim_binding(claim) is None:
            return None
        with self._database() as db:
            return source_capture_result(db, claim)
