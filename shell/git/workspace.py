"""Workspaces: the working copy an agent gets for a task bound to a governed repository,
reached in place or through a base bundle (`RepositoryAccess`). The agent only proposes its
commits; a remote repository's workspace comes from the ledger's mirror, never the remote.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import shutil
import tempfile
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any, Protocol

import attrs
from aios_ledger.core import GovernedExecutionBinding, LedgerError, TaskRow
from aios_ledger.core.git import ProposalAnswer
from aios_ledger.core.git.decisions import WorkspaceGrant, grant_workspace, task_binding
from aios_ledger.core.git.policy import FACT_FLAGS
from aios_ledger.core.projection import BindingRow
from aios_ledger.core.projection.bindings import source_capture_envelope
from aios_ledger.shell.clock import Clock, read_clock, system_clock
from aios_ledger.shell.db.connection import Database, fetch_record, stream_records
from aios_ledger.shell.git.proposals import bundle_workspace, record_proposal, scratch_quarantine
from aios_ledger.shell.git.remotes import refresh_mirror
from aios_ledger.shell.git.repos import repository_row
from aios_ledger.shell.git.runner import check_ref_format, run_git

# The largest bundle of a base the server builds, and a remote worker downloads.
MAX_WORKSPACE_BYTES = 256 * 1024 * 1024
# The lease token of `GET /v1/tasks/{task_id}/workspace` is a header: a URL ends up in logs.
LEASE_TOKEN_HEADER = "Aios-Lease-Token"
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


def _branch_ref(binding: GovernedExecutionBinding) -> str:
    return check_ref_format("refs/heads/" + binding.target_branch)


def clone_workspace(
    source: str,
    claim: Mapping[str, Any],
    binding: GovernedExecutionBinding,
    *,
    agent_id: str,
    parent: str | None = None,
) -> Workspace:
    """A fresh working copy at the binding's base, cloned from `source`: the governed
    repository itself, or a bundle of its base."""
    branch = _branch_ref(binding).removeprefix("refs/heads/")
    # Absolute: the git calls below run inside the clone.
    root = os.path.abspath(tempfile.mkdtemp(prefix="aios-workspace-", dir=parent))
    path = str(Path(root, "work"))
    try:
        run_git(["clone", "--quiet", "--no-checkout", "--no-hardlinks", source, path], timeout=300)
        git = ["--git-dir", str(Path(path, ".git")), "--work-tree", path]
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


def proposal_bundle(workspace: Workspace) -> bytes | None:
    """The bytes of the bundle of what the agent did (None: it changed nothing)."""
    bundle = Path(workspace.root, "proposal.bundle")
    if not bundle_workspace(
        workspace.path, workspace.base_oid, author=workspace.agent_id, out=bundle
    ):
        return None
    try:
        return bundle.read_bytes()
    except OSError as exc:
        raise LedgerError("BUNDLE_INVALID", f"the workspace's bundle: {exc}") from None


def workspace_grant(
    db: Database, task_id: str, *, agent_id: str, lease_token: str, clock: Clock = system_clock
) -> WorkspaceGrant:
    """Whether `agent_id` may read the base of the task's binding (see `grant_workspace`)."""

    def read(conn: Any) -> WorkspaceGrant:
        task = fetch_record(conn, "get_task", {"task_id": task_id}, TaskRow)
        repository = None
        if task is not None and task.claimed_by == agent_id:
            with contextlib.suppress(LedgerError):  # an unbound task: the grant says so
                repository = repository_row(conn, task_binding(task).repository)
        now = read_clock(clock)
        return grant_workspace(
            task_id, task, repository, agent_id=agent_id, lease_token=lease_token, now=now
        )

    return db.read(read)


def base_bundle(
    db: Database,
    task_id: str,
    out: Path,
    *,
    agent_id: str,
    lease_token: str,
    clock: Clock = system_clock,
    max_bytes: int = MAX_WORKSPACE_BYTES,
) -> WorkspaceGrant:
    """Write to `out` a bundle of the binding's base under the target branch's name, for the
    agent holding the task, built in a scratch repository so the governed one is not written."""
    grant = workspace_grant(db, task_id, agent_id=agent_id, lease_token=lease_token, clock=clock)
    ref = _branch_ref(grant.binding)
    base = grant.binding.base_oid
    refresh_mirror(grant.repository.path)
    with scratch_quarantine(grant.repository.path) as git_dir:
        if run_git(
            ["--git-dir", git_dir, "cat-file", "-e", f"{base}^{{commit}}"], check=False
        ).returncode:
            raise LedgerError("BASE_NOT_FOUND", f"{grant.repository.name} has no commit {base}")
        run_git(["--git-dir", git_dir, "update-ref", ref, base])
        run_git(["--git-dir", git_dir, "bundle", "create", "--quiet", str(out), ref], timeout=600)
    if out.stat().st_size > max_bytes:
        out.unlink()
        raise LedgerError(
            "WORKSPACE_TOO_LARGE", f"the base of task {task_id!r} is over {max_bytes} bytes"
        )
    return grant


SNAPSHOT_SCHEMA = "aios.git_tree_snapshot.v1"


def tree_snapshot(repository_path: str, oid: str) -> dict[str, str]:
    """The snapshot of a commit's tree: the sha256 of git's own listing of every entry, so any
    change to any file changes it."""
    listing = run_git(
        ["--git-dir", repository_path, "ls-tree", "-r", "-z", "--full-tree", oid],
        max_output=256 * 1024 * 1024,
    ).stdout
    return {"schema": SNAPSHOT_SCHEMA, "payload_sha256": hashlib.sha256(listing).hexdigest()}


@contextlib.contextmanager
def readable_repository(source: str) -> Iterator[str]:
    """`source` itself, or for a bundle file a scratch bare repository it was fetched into."""
    if os.path.isdir(source):
        yield source
        return
    with tempfile.TemporaryDirectory(prefix="aios-base-") as folder:
        git_dir = os.path.join(folder, "base.git")
        run_git(["init", "--quiet", "--bare", git_dir])
        fetch = ["fetch", "--quiet", "--no-tags", "--no-write-fetch-head", source]
        run_git(["--git-dir", git_dir, *fetch, "+refs/heads/*:refs/heads/*"], timeout=300)
        yield git_dir


def capture_result(
    envelope: Mapping[str, Any], binding: GovernedExecutionBinding, snapshot: Mapping[str, str]
) -> dict[str, Any]:
    """The result the worker submits for a source capture: the snapshot of the base."""
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
        # A capture reads the base and writes nothing: every governance flag is False.
        **dict.fromkeys((*FACT_FLAGS, "production_write"), False),
        "source_snapshot": dict(snapshot),
    }


# A worker offering the source capture's capability captures unprojected bound tasks too.
SOURCE_CAPTURE_CAPABILITY = "git.read"

# `task_id -> the binding to capture, or None`: see `unprojected_binding`.
UnprojectedBindings = Callable[[str], GovernedExecutionBinding | None]


def unprojected_binding(db: Database, task_id: str) -> GovernedExecutionBinding | None:
    """The binding an unprojected task's attempt captures: its one registered binding while it
    has no envelope; None otherwise, and then the claim runs as any unbound claim."""

    def read(conn: Any) -> GovernedExecutionBinding | None:
        task = fetch_record(conn, "get_task", {"task_id": task_id}, TaskRow)
        if task is None or "execution" in task.metadata():
            return None
        rows = list(stream_records(conn, "bindings_of_task", {"task_id": task_id}, BindingRow))
        return rows[0].binding() if len(rows) == 1 else None

    return db.read(read)


class RepositoryAccess(Protocol):
    """How a worker reaches the governed repository of a claim's binding."""

    def source(
        self, claim: Mapping[str, Any], binding: GovernedExecutionBinding
    ) -> contextlib.AbstractContextManager[str | None]:
        """What to clone the workspace from, a repository or a bundle of the base, while the
        context lasts; None: the binding names no governed repository."""
        ...

    def record(self, claim: Mapping[str, Any], bundle: bytes) -> ProposalAnswer:
        """Record `bundle` as the proposal of the claim's attempt, under its lease."""
        ...


class LocalRepositories:
    """The governed repositories of a ledger file on this machine, each call on a connection of
    its own so that a clone never holds the worker's."""

    def __init__(self, path: str | os.PathLike[str], *, migrate: bool = True) -> None:
        self._path = path
        self._migrate = migrate

    def _database(self) -> Database:
        return Database(self._path, migrate=self._migrate)

    @contextlib.contextmanager
    def source(
        self, claim: Mapping[str, Any], binding: GovernedExecutionBinding
    ) -> Iterator[str | None]:
        with self._database() as db:
            repository = db.read(lambda conn: repository_row(conn, binding.repository))
        if repository is not None:
            refresh_mirror(repository.path)
        yield None if repository is None else repository.path

    def record(self, claim: Mapping[str, Any], bundle: bytes) -> ProposalAnswer:
        with self._database() as db:
            return record_proposal(
                db, str(claim["task_id"]), bundle, lease_token=str(claim["lease_token"])
            )


class Workspaces:
    """The worker's hooks over a `RepositoryAccess`: a claim's workspace, its proposal, and
    source captures."""

    def __init__(
        self, access: RepositoryAccess, *, unprojected: UnprojectedBindings | None = None
    ) -> None:
        self.access = access
        self.unprojected = unprojected

    def prepare(self, claim: Mapping[str, Any], agent_id: str) -> Workspace | None:
        binding = claim_binding(claim)
        if binding is None:
            return None
        with self.access.source(claim, binding) as source:
            if source is None:
                return None
            return clone_workspace(source, claim, binding, agent_id=agent_id)

    def propose(self, workspace: Workspace, claim: Mapping[str, Any]) -> ProposalAnswer | None:
        data = proposal_bundle(workspace)
        if data is None:
            return None
        return self.access.record(claim, data)

    def source_capture(self, claim: Mapping[str, Any]) -> dict[str, Any] | None:
        """The capture result of a `source_capture` claim, or of an unprojected bound claim;
        None for any other claim or a repository not governed here."""
        binding = claim_binding(claim)
        envelope: Mapping[str, Any]
        if binding is not None:
            envelope = claim["envelope"]  # a binding comes in an envelope
            if envelope.get("action") != "source_capture":
                return None
        elif self.unprojected is not None and claim.get("envelope") is None:
            binding = self.unprojected(str(claim["task_id"]))
            if binding is None:
                return None
            envelope = source_capture_envelope(binding)
        else:
            return None
        with self.access.source(claim, binding) as source:
            if source is None:
                return None
            with readable_repository(source) as git_dir:
                snapshot = tree_snapshot(git_dir, binding.base_oid)
        return capture_result(envelope, binding, snapshot)


class GitWorkspaces(Workspaces):
    """The hooks of a worker on the ledger's host, reading the repositories in place."""

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        migrate: bool = True,
        capture_unprojected: bool = False,
    ) -> None:
        def unprojected(task_id: str) -> GovernedExecutionBinding | None:
            with Database(path, migrate=migrate) as db:
                return unprojected_binding(db, task_id)

        super().__init__(
            LocalRepositories(path, migrate=migrate),
            unprojected=unprojected if capture_unprojected else None,
        )
