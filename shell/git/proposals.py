"""Proposals: an attempt's commits on top of its base, as a verified git bundle.

The ledger bounds, verifies and fsck-checks a bundle in a quarantine that borrows the governed
repository's objects, so nothing reaches the governed repository before a governed write; there
it reads the changes, refuses what `core.git.hygiene` forbids and scans for secrets under the
repository's budget. Bundles that pass are stored content-addressed beside the ledger.
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import attrs
from aios_ledger.core import LedgerError, TaskRow, chain_of
from aios_ledger.core.git import (
    AgentScanSpend,
    ProposalAnswer,
    ProposalRecord,
    ProposalRow,
    ProposalState,
    RepositoryRow,
    RepositorySettings,
    ScanCharge,
    ScanChargeState,
    admit_scan,
    decide_charge_scan,
    decide_record_proposal,
)
from aios_ledger.core.git.decisions import admit_proposal, proposal_replay, task_binding
from aios_ledger.core.git.hygiene import (
    GITLINK_MODE,
    SYMLINK_MODE,
    TreeEntry,
    fsck_refusal,
    require_safe_entries,
)
from aios_ledger.core.git.secrets import ScanBudget
from aios_ledger.core.git.settings import scan_window_start
from aios_ledger.core.refnames import HEADS, require_branch_name
from aios_ledger.shell.actors import current_actor
from aios_ledger.shell.clock import Clock, read_clock, system_clock
from aios_ledger.shell.db.apply import PlanExecutor
from aios_ledger.shell.db.connection import Database, fetch_record, fetch_value
from aios_ledger.shell.db.run import Connection
from aios_ledger.shell.git.repos import (
    refuse_git_config_settings,
    repository_row,
    require_repository,
)
from aios_ledger.shell.git.runner import (
    check_ref_format,
    is_ancestor,
    object_sizes,
    raw_diff,
    read_objects,
    read_ref,
    run_git,
)
from aios_ledger.shell.git.secret_scan import (
    added_by_commits,
    commits_after,
    scan_proposal,
    spent_of,
)

LOG = logging.getLogger("aios_ledger.proposals")
QUARANTINE = "refs/aios-quarantine"
SCRATCH_REFS = "refs/proposal"
# The kind of the ledger's files that bundles are (`Database.files_dir`).
PROPOSALS = "proposals"
PROPOSALS_DIR_ENV = "AIOS_LEDGER_PROPOSALS_DIR"


@attrs.frozen
class ProposalLimits:
    """How big a proposal may be; the secret scan's budget is the repository's setting."""

    max_bundle_bytes: int = 32 * 1024 * 1024
    max_file_bytes: int = 4 * 1024 * 1024
    max_files: int = 10000
    max_refs: int = 64


DEFAULT_LIMITS = ProposalLimits()


def proposals_dir(db: Database) -> Path:
    """Where the ledger keeps its proposals' bundles: the engine says (`Database.files_dir`)."""
    return db.files_dir(PROPOSALS)


def bundle_path(db: Database, digest: str) -> Path:
    return proposals_dir(db) / f"{digest}.bundle"


def _task(conn: Connection, task_id: str) -> TaskRow | None:
    return fetch_record(conn, "get_task", {"task_id": task_id}, TaskRow)


def _task_and_repository(
    conn: Connection, task_id: str
) -> tuple[TaskRow | None, RepositoryRow | None]:
    """The task and the governed repository its binding names, when both exist."""
    task = _task(conn, task_id)
    name = None if task is None else task_binding(task).repository
    return task, None if name is None else repository_row(conn, name)


def proposal_row(conn: Connection, task_id: str, attempt: int) -> ProposalRow | None:
    # A task has a proposal per attempt at most: reading them all reads a few rows.
    proposals = conn.stream_records("task_proposals_of_task", {"task_id": task_id}, ProposalRow)
    return next((row for row in list(proposals) if row.attempt == attempt), None)


def store_bundle(db: Database, data: bytes) -> tuple[str, Path, bool]:
    """Keep the bundle under its sha256; answers the digest, the file, and whether this call
    wrote it."""
    digest = hashlib.sha256(data).hexdigest()
    folder = proposals_dir(db)
    folder.mkdir(mode=0o700, parents=True, exist_ok=True)
    target = bundle_path(db, digest)
    if target.exists():
        return digest, target, False
    fd, temporary = tempfile.mkstemp(dir=folder, prefix=".incoming-")
    try:
        with os.fdopen(fd, "wb") as out:
            out.write(data)
            out.flush()
            os.fsync(out.fileno())
        os.replace(temporary, target)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temporary)
        raise
    return digest, target, True


def read_stored_bundle(db: Database, digest: str) -> Path:
    """The stored bundle of `digest`, checked against it (`BUNDLE_INVALID` if it changed)."""
    path = bundle_path(db, digest)
    try:
        data = path.read_bytes()
    except OSError:
        raise LedgerError("BUNDLE_INVALID", f"the stored bundle {digest} is missing") from None
    if hashlib.sha256(data).hexdigest() != digest:
        raise LedgerError("BUNDLE_INVALID", f"the stored bundle {digest} was altered")
    return path


@contextlib.contextmanager
def scratch_quarantine(repository_path: str) -> Iterator[str]:
    """A throw-away bare repository that reads the governed repository's objects (alternates)
    and writes only its own."""
    with tempfile.TemporaryDirectory(prefix="aios-quarantine-") as folder:
        git_dir = os.path.join(folder, "quarantine.git")
        run_git(["init", "--quiet", "--bare", git_dir])
        alternates = Path(git_dir, "objects", "info", "alternates")
        alternates.write_text(os.path.join(repository_path, "objects") + "\n")
        yield git_dir


def verify_bundle(git_dir: str, path: Path) -> None:
    found = run_git(["--git-dir", git_dir, "bundle", "verify", "--quiet", str(path)], check=False)
    if found.returncode != 0:
        why = found.stderr.decode("utf-8", "replace").strip().splitlines()
        raise LedgerError("BUNDLE_INVALID", why[-1] if why else "git bundle verify refused it")


def bundle_heads(git_dir: str, path: Path, limits: ProposalLimits) -> dict[str, str]:
    """The bundle's refs: HEAD and branches only, at most `max_refs`, each named as the ledger
    names the branches it writes (`core/refnames.py`), so none misleads a reader."""
    listed = run_git(["--git-dir", git_dir, "bundle", "list-heads", str(path)], max_output=1 << 20)
    heads: dict[str, str] = {}
    for line in listed.text.splitlines():
        oid, _, name = line.partition(" ")
        if name != "HEAD":
            if not name.startswith(HEADS):
                raise LedgerError("BUNDLE_INVALID", f"the bundle carries {name!r}, not a branch")
            check_ref_format(name)
            require_branch_name(name.removeprefix(HEADS))
        heads[name] = oid
    if "HEAD" not in heads:
        raise LedgerError("BUNDLE_INVALID", "the bundle has no HEAD")
    if len(heads) > limits.max_refs:
        raise LedgerError(
            "PROPOSAL_TOO_LARGE", f"the bundle carries more than {limits.max_refs} refs"
        )
    return heads


def check_objects(git_dir: str, path: Path) -> None:
    """git's own checks over every object the bundle brings, as `receive.fsckObjects` runs them
    on a push; the pack is indexed in the scratch quarantine `git_dir` only."""
    data = path.read_bytes()
    header_end = data.find(b"\n\n")
    pack = data[header_end + 2 :] if header_end >= 0 else b""
    if not pack.startswith(b"PACK"):
        raise LedgerError("BUNDLE_INVALID", "the bundle holds no pack after its header")
    checked = run_git(
        ["--git-dir", git_dir, "index-pack", "--stdin", "--fix-thin", "--strict"],
        stdin=pack,
        check=False,
        timeout=300,
    )
    if checked.returncode != 0:
        report = checked.stderr.decode("utf-8", "replace")
        if "fsck error" in report:
            raise fsck_refusal(report)
        lines = report.strip().splitlines()
        raise LedgerError("BUNDLE_INVALID", lines[-1] if lines else "git index-pack refused it")


def added_entries(git_dir: str, tips: list[str], base: str) -> list[TreeEntry]:
    """The symbolic links and gitlinks, with their targets, that the commits of `tips` not in
    `base` add or change against their first parents."""
    found = {
        (name.decode("utf-8", "surrogateescape"), oid): mode
        for mode, oid, name in added_by_commits(
            git_dir, commits_after(git_dir, tips, base, 300), timeout=300
        )
        if mode in (SYMLINK_MODE, GITLINK_MODE)
    }
    # Each symbolic link's target: its blob's bytes.
    symlinks = sorted({oid for (_path, oid), mode in found.items() if mode == SYMLINK_MODE})
    objects = read_objects(git_dir, symlinks, max_output=64 << 20) if symlinks else {}
    targets: dict[str, str] = {}
    for oid in symlinks:
        kind, content = objects.get(oid, ("missing", b""))
        if kind != "blob":
            raise LedgerError("BUNDLE_INVALID", f"the symbolic link {oid} is not a blob")
        targets[oid] = content.decode("utf-8", "backslashreplace")
    return [
        TreeEntry(path, mode, oid, targets.get(oid) if mode == SYMLINK_MODE else None)
        for (path, oid), mode in sorted(found.items())
    ]


def fetch_bundle(git_dir: str, path: Path, prefix: str, *, only_head: bool = False) -> None:
    """Fetch the bundle's HEAD (and branches) into `prefix/` of the repository at `git_dir`."""
    specs = [f"+HEAD:{prefix}/HEAD"]
    if not only_head:
        specs.append(f"+refs/heads/*:{prefix}/heads/*")
    fetch = ["fetch", "--quiet", "--no-tags", "--no-write-fetch-head", str(path), *specs]
    run_git(["--git-dir", git_dir, *fetch], timeout=300)


@attrs.frozen
class _Change:
    path: str
    oid: str
    mode: str
    deleted: bool


def changed_files(git_dir: str, base: str, head: str, limits: ProposalLimits) -> list[_Change]:
    raw = run_git(
        ["--git-dir", git_dir, "diff-tree", "-r", "-z", "--no-renames", "--raw", base, head],
        max_output=64 * 1024 * 1024,
    ).stdout
    changes: list[_Change] = []
    for meta, raw_name in raw_diff(raw):
        if len(meta) < 5:
            raise LedgerError("BUNDLE_INVALID", "git diff-tree said what it never says")
        try:
            name = raw_name.decode("utf-8")
        except UnicodeDecodeError:
            raise LedgerError("BUNDLE_INVALID", "a changed file's name is not UTF-8") from None
        changes.append(_Change(name, meta[3], meta[1], meta[4].startswith("D")))
        if len(changes) > limits.max_files:
            raise LedgerError(
                "PROPOSAL_TOO_LARGE", f"the proposal changes more than {limits.max_files} files"
            )
    return changes


def describe_bundle(
    repository_path: str,
    path: Path,
    base_oid: str,
    limits: ProposalLimits,
    *,
    settings: RepositorySettings,
    budget: ScanBudget | None = None,
) -> dict[str, Any]:
    """The bundle's heads, changed files, ancestry and secrets, read in a scratch quarantine
    and held to the repository's `settings`; `budget` defaults to the settings' own."""
    with scratch_quarantine(repository_path) as git_dir:
        verify_bundle(git_dir, path)
        heads = bundle_heads(git_dir, path, limits)
        check_objects(git_dir, path)
        fetch_bundle(git_dir, path, SCRATCH_REFS)
        head = heads["HEAD"]
        kind = run_git(["--git-dir", git_dir, "cat-file", "-t", head], check=False).text.strip()
        if kind != "commit":
            raise LedgerError("BUNDLE_INVALID", "the bundle's HEAD is not a commit")
        base = run_git(
            ["--git-dir", git_dir, "cat-file", "-e", f"{base_oid}^{{commit}}"], check=False
        )
        if base.returncode:
            raise LedgerError("BUNDLE_INVALID", "the binding's base is not in the repository")
        tips = sorted(set(heads.values()))
        added = added_entries(git_dir, tips, base_oid)
        require_safe_entries(added, allow_gitlinks=settings.allow_gitlinks)
        changes = changed_files(git_dir, base_oid, head, limits)
        blobs = sorted({c.oid for c in changes if not c.deleted})
        sizes = object_sizes(git_dir, blobs, kind="blob") if blobs else {}
        too_big = sorted(c.path for c in changes if sizes.get(c.oid, 0) > limits.max_file_bytes)
        if too_big:
            raise LedgerError(
                "PROPOSAL_TOO_LARGE",
                f"{too_big[0]} is over {limits.max_file_bytes} bytes"
                + (f" (+{len(too_big) - 1} more)" if len(too_big) > 1 else ""),
            )
        scanned = scan_proposal(
            git_dir,
            tips,
            base_oid,
            settings.budget() if budget is None else budget,
            baseline=settings.baseline(),
            baseline_sha256=settings.secrets_baseline_sha256,
        )
        return {
            "head_oid": head,
            "refs": [{"name": name, "oid": oid} for name, oid in sorted(heads.items())],
            "changed_files": sorted({change.path for change in changes}),
            "descends_from_base": is_ancestor(git_dir, base_oid, head),
            "secrets": scanned.secrets,
            "secrets_baseline_sha256": scanned.baseline_sha256,
            "scan_bytes": scanned.scan_bytes,
            "scan_seconds": scanned.scan_seconds,
        }


def record_proposal(
    db: Database,
    task_id: str,
    bundle: bytes,
    *,
    lease_token: str,
    agent_id: str | None = None,
    clock: Clock = system_clock,
    limits: ProposalLimits = DEFAULT_LIMITS,
) -> ProposalAnswer:
    """Record `bundle` as the proposal of the task's current attempt, whose lease the caller
    holds. The cheap checks run before the scan and the lease again in the write, since it may
    pass during the scan; a refused bundle leaves nothing behind but its scan's charge."""
    if not isinstance(bundle, bytes) or not bundle:
        raise LedgerError("BUNDLE_INVALID", "a proposal is the bytes of a git bundle")
    if len(bundle) > limits.max_bundle_bytes:
        raise LedgerError(
            "PROPOSAL_TOO_LARGE", f"the bundle is over {limits.max_bundle_bytes} bytes"
        )
    admitted = db.read(
        lambda conn: admitted_context(
            conn, task_id, lease_token=lease_token, agent_id=agent_id, clock=clock
        )
    )
    # An attempt that proposed already is answered by the bundle's digest, never scanned again.
    bundle_sha256 = hashlib.sha256(bundle).hexdigest()
    replayed = proposal_replay(admitted.task, admitted.prior, bundle_sha256)
    if replayed is not None:
        return replayed
    refuse_git_config_settings(admitted.repository, admitted.repository_path)
    with tempfile.TemporaryDirectory(prefix="aios-proposal-") as folder:
        incoming = Path(folder, "incoming.bundle")
        incoming.write_bytes(bundle)
        try:
            found = describe_bundle(
                admitted.repository_path,
                incoming,
                admitted.base_oid,
                limits,
                settings=admitted.settings,
                budget=admitted.budget,
            )
        except LedgerError as refused:
            charge_refused_scan(db, admitted, bundle_sha256, refused, clock)
            raise
    digest, stored, created = store_bundle(db, bundle)
    request = ProposalRecord.from_mapping(
        {
            "task_id": task_id,
            "lease_token": lease_token,
            "bundle_sha256": digest,
            "bundle_bytes": len(bundle),
            "base_oid": admitted.base_oid,
            **found,
        }
    )

    actor = current_actor()

    def write(conn: Connection) -> ProposalAnswer:
        plans = PlanExecutor(conn)
        task, repository = _task_and_repository(conn, task_id)
        state = ProposalState(
            task=task,
            repository=repository,
            prior=None if task is None else proposal_row(conn, task_id, task.attempt),
            tail=plans.tail(chain_of(task_id)),
        )
        return plans.apply(
            decide_record_proposal(state, request, now=read_clock(clock), actor=actor)
        )

    try:
        return db.write(write)
    except LedgerError:
        # The lease passed during the scan: the file this call stored is nobody's proposal.
        if created:
            with contextlib.suppress(OSError):
                stored.unlink()
        raise


@attrs.frozen
class Admitted:
    """A proposal its cheap checks let through; `budget` is None when the attempt proposed
    already, so its bundle is not scanned again."""

    task: TaskRow
    prior: ProposalRow | None
    repository: str
    repository_path: str
    base_oid: str
    settings: RepositorySettings
    budget: ScanBudget | None


def charge_refused_scan(
    db: Database, admitted: Admitted, bundle_sha256: str, refused: LedgerError, clock: Clock
) -> None:
    """Charge what a scan refused over its budget cost to its agent, so that its window counts
    it; a charge that cannot be written is logged, never raised in the refusal's place."""
    spent = spent_of(refused)
    agent = admitted.task.claimed_by
    if spent is None or agent is None:
        return
    request = ScanCharge.from_mapping(
        {
            "task_id": admitted.task.task_id,
            "attempt": admitted.task.attempt,
            "agent_id": agent,
            "bundle_sha256": bundle_sha256,
            "code": refused.code,
            "scan_bytes": spent.scan_bytes,
            "scan_seconds": spent.scan_seconds,
        }
    )

    actor = current_actor()

    def write(conn: Connection) -> object:
        plans = PlanExecutor(conn)
        task, repository = _task_and_repository(conn, request.task_id)
        charged = fetch_value(
            conn,
            "scan_charges_of_attempt",
            {"task_id": request.task_id, "attempt": request.attempt},
        )
        state = ScanChargeState(
            task=task,
            repository=repository,
            charged=int(charged or 0),
            tail=plans.tail(chain_of(request.task_id)),
        )
        return plans.apply(decide_charge_scan(state, request, now=read_clock(clock), actor=actor))

    try:
        db.write(write)
    except LedgerError as failed:
        LOG.warning("the refused scan of %s was not charged: %s", request.task_id, failed)


def admitted_context(
    conn: Connection,
    task_id: str,
    *,
    lease_token: str,
    agent_id: str | None = None,
    clock: Clock = system_clock,
) -> Admitted:
    """The cheap checks of a proposal: the task, its holder and lease, then the agent's scan
    budget."""
    now = read_clock(clock)
    found = _task(conn, task_id)
    prior = None if found is None else proposal_row(conn, task_id, found.attempt)
    task = admit_proposal(
        task_id, found, prior, lease_token=lease_token, now=now, agent_id=agent_id
    )
    binding = task_binding(task)
    repository = require_repository(conn, binding.repository)
    settings = repository.settings()
    budget = None
    if prior is None:
        agent = task.claimed_by or agent_id or ""
        since = scan_window_start(settings, now=now).text
        key = {"repository": repository.name, "agent_id": agent, "since": since}
        spend = fetch_record(conn, "agent_scan_spend", key, AgentScanSpend) or AgentScanSpend()
        budget = admit_scan(settings, spend, agent_id=agent, now=now)
    return Admitted(
        task, prior, repository.name, repository.path, binding.base_oid, settings, budget
    )


def quarantine_ref(digest: str) -> str:
    return f"{QUARANTINE}/{digest}/HEAD"


def ensure_in_repository(db: Database, repository_path: str, proposal: ProposalRow) -> None:
    """Bring a recorded proposal's head into the governed repository, under its quarantine ref,
    from the stored bundle."""
    ref = quarantine_ref(proposal.bundle_sha256)
    if read_ref(repository_path, ref) == proposal.head_oid:
        return
    path = read_stored_bundle(db, proposal.bundle_sha256)
    verify_bundle(repository_path, path)
    fetch_bundle(repository_path, path, f"{QUARANTINE}/{proposal.bundle_sha256}", only_head=True)
    fetched = run_git(["--git-dir", repository_path, "rev-parse", "--verify", ref]).text.strip()
    if fetched != proposal.head_oid:
        raise LedgerError("BUNDLE_INVALID", "the stored bundle's HEAD is not the proposal's")


def bundle_workspace(workspace: str, base_oid: str, *, author: str, out: Path) -> bool:
    """Bundle what the agent did on top of `base_oid`, committing its uncommitted changes first;
    False when there is nothing to propose. The agent's git configuration is replaced first, so
    that no filter or fsmonitor command of its runs as the worker."""
    git_dir = os.path.join(workspace, ".git")
    if os.path.islink(git_dir) or not os.path.isdir(git_dir):
        raise LedgerError("WORKSPACE_INVALID", "the workspace's .git is not its own directory")
    Path(git_dir, "config").write_text(
        "[core]\n\trepositoryformatversion = 0\n\tbare = false\n\tfilemode = true\n"
    )
    with contextlib.suppress(OSError):
        Path(git_dir, "info", "attributes").unlink()
    identity = {
        "GIT_AUTHOR_NAME": author,
        "GIT_AUTHOR_EMAIL": f"{author}@agents.aios-ledger.invalid",
        "GIT_COMMITTER_NAME": "aios-ledger worker",
        "GIT_COMMITTER_EMAIL": "worker@aios-ledger.invalid",
    }
    git = ["--git-dir", git_dir, "--work-tree", workspace]
    status = run_git([*git, "status", "--porcelain", "-z", "--untracked-files=all"], cwd=workspace)
    if status.stdout:
        run_git([*git, "add", "--all"], cwd=workspace)
        run_git(
            [*git, "commit", "--quiet", "--no-verify", "-m", f"Uncommitted work of {author}"],
            cwd=workspace,
            env=identity,
        )
    head = run_git([*git, "rev-parse", "--verify", "HEAD"], cwd=workspace, check=False)
    if head.returncode != 0 or head.text.strip() == base_oid:
        return False
    run_git(
        [*git, "bundle", "create", "--quiet", str(out), "HEAD", "--branches", "--not", base_oid],
        cwd=workspace,
        timeout=300,
    )
    return True
