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
from aios_ledger.shell.git.runner import run_git

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
