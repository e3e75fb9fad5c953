"""Governed writes on real repositories in temporary directories: the way that lands, every
refusal (each leaves the repository byte for byte as it was), two writes racing for a branch,
a SIGKILL between intent and swap reconciled in each of the three ref states, hostile bundles,
and after every test the repository's ref logs and the ledger's events agree and `verify`
holds."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from aios_ledger.core import LedgerError
from aios_ledger.shell.db.connection import Database
from aios_ledger.shell.git.proposals import PROPOSALS_DIR_ENV, ProposalLimits, record_proposal
from aios_ledger.shell.git.runner import check_ref_format, run_git
from aios_ledger.shell.governed.writes import governed_write, recover_writes
from aios_ledger.shell.log.verification import verify_log
from conftest import ENGINES, is_postgres
from git_support import (
    AGENT,
    assert_reflog_agrees,
    binding,
    branch_refs,
    claim,
    commit_on,
    edit,
    events_of,
    git,
    governed_task,
    make_repository,
    prepare_workspace,
    propose,
    ref,
    register,
    repository_files,
    runtime_result,
    submit_and_accept,
    verified_proposal,
    workspace,
)

ROOT = Path(__file__).resolve().parents[1]
PRIVATE_KEY = (
    "-----BEGIN RSA PRIVATE KEY-----\n"
    "MIIEowIBAAKCAQEA0Z3VS5JJcds3xfn/ygWyF8PbnGy0AHB7MhgHcTz6sE2I2yPB\n"
    "-----END RSA PRIVATE KEY-----\n"
)


class Repo:
    """A bare repository and the ledger that governs it: a SQLite file, or (the tests marked
    `on_both_engines`) a fresh PostgreSQL schema as well."""

    def __init__(self, root: Path, target: Path | str) -> None:
        self.root = root
        self.db: Any = target
        self.bare, self.base = make_repository(root)

    def write(self, task_id: str, key: str, **options: Any) -> dict[str, Any]:
        with Database(self.db) as db:
            return dict(governed_write(db, {"task_id": task_id, "idempotency_key": key}, **options))

    def refused(self, task_id: str, key: str, **options: Any) -> str:
        try:
            self.write(task_id, key, **options)
        except LedgerError as refused:
            return refused.code
        raise AssertionError("the write was not refused")


# The way that lands, a refusal and recovery from a crash, on SQLite and on PostgreSQL (the rest
# of the module is the engine-neutral git side, run on SQLite only to keep the suite's time).
on_both_engines = pytest.mark.parametrize("engine", ENGINES)


@pytest.fixture
def repo(
    tmp_path: Path, ledger_target: Path | str, monkeypatch: pytest.MonkeyPatch
) -> Iterator[Repo]:
    # Where a PostgreSQL ledger keeps its bundles (a SQLite one keeps them beside its file); the
    # write processes of the crash tests inherit it.
    monkeypatch.setenv(PROPOSALS_DIR_ENV, str(tmp_path / "proposals"))
    found = Repo(tmp_path, ledger_target)
    yield found
    # After every test: the ref logs and the ledger agree, and the log verifies.
    if is_postgres(found.db) or found.db.exists():
        with Database(found.db) as db:
            report = verify_log(db)
        assert report.intact, report.public()
        assert_reflog_agrees(found.db, found.bare)


def process(repo: Repo, task_id: str, key: str, mode: str = "") -> subprocess.Popen[str]:
    return subprocess.Popen(
        [
            sys.executable,
            str(ROOT / "tests" / "git_write_process.py"),
            str(repo.db),
            task_id,
            key,
            mode,
        ],
        stdout=subprocess.PIPE,
        text=True,
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )


def answer_of(child: subprocess.Popen[str]) -> dict[str, Any] | None:
    out, _ = child.communicate(timeout=120)
    return json.loads(out) if out.strip() else None


# ---------------------------------------------------------------------------------------------
# the way that lands


@on_both_engines
def test_a_verified_proposal_lands_on_its_new_branch_once(repo: Repo) -> None:
    register(repo.db, repo.bare)
    proposal = verified_proposal(
        repo.db, "task-a", binding("task-a", repo.base), {"src/widget.py": "print('hi')\n"}
    )
    assert proposal["changed_files"] == ["src/widget.py"]
    assert proposal["facts"]["force_push"] is False
    answer = repo.write("task-a", "write-a")
    assert answer["state"] == "APPLIED" and answer["old_oid"] == "0" * 40
    assert ref(repo.bare, "refs/heads/agent/task-a") == proposal["head_oid"] == answer["new_oid"]
    assert ref(repo.bare, "refs/heads/main") == repo.base
    assert git("--git-dir", str(repo.bare), "for-each-ref", "refs/aios-quarantine/") == ""
    # The commit is the agent's, on top of the base.
    author = git("--git-dir", str(repo.bare), "log", "-1", "--format=%an %P", answer["new_oid"])
    assert author == f"{AGENT} {repo.base}"
    again = repo.write("task-a", "write-a")
    assert again == {**answer, "idempotent": True}
    assert events_of(repo.db, "task-a")[-3:] == [
        "TASK_VERIFIED",
        "GOVERNED_WRITE_INTENDED",
        "GOVERNED_WRITE_APPLIED",
    ]
    assert "PROPOSAL_RECORDED" in events_of(repo.db, "task-a")


def test_uncommitted_work_is_committed_for_the_agent_as_its_author(repo: Repo) -> None:
    register(repo.db, repo.bare)
    governed_task(repo.db, "task-u", binding("task-u", repo.base))
    claimed = claim(repo.db, "task-u")
    space = workspace(repo.db, claimed)
    try:
        assert Path(space.path, "README.md").read_text() == "widgets\n"
        edit(space, {"notes.txt": "left uncommitted\n"}, commit=False)
        proposal = propose(repo.db, space, claimed)
    finally:
        space.remove()
    assert proposal is not None and proposal["changed_files"] == ["notes.txt"]
    submit_and_accept(repo.db, claimed, runtime_result(claimed, ["notes.txt"]))
    answer = repo.write("task-u", "write-u")
    author = git("--git-dir", str(repo.bare), "log", "-1", "--format=%an", answer["new_oid"])
    assert author == AGENT


def test_relative_paths_are_where_the_caller_stands_when_git_runs_elsewhere(
    repo: Repo, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`repo add NAME gadgets.git` and a workspace folder named relative to the caller: the
    clone's own git calls run inside the clone, so each path must be made absolute first."""
    monkeypatch.chdir(repo.root)
    Path("workspaces").mkdir()
    register(repo.db, Path(repo.bare.name))
    governed_task(repo.db, "task-r", binding("task-r", repo.base))
    claimed = claim(repo.db, "task-r")
    with Database(repo.db) as db:
        space = prepare_workspace(db, claimed, agent_id=AGENT, parent="workspaces")
    assert space is not None
    try:
        assert Path(space.path).is_absolute() and Path(space.path).is_relative_to(repo.root)
        assert Path(space.path, "README.md").read_text() == "widgets\n"
        edit(space, {"relative.txt": "from a relative folder\n"})
        proposal = propose(repo.db, space, claimed)
    finally:
        space.remove()
    assert proposal is not None and proposal["changed_files"] == ["relative.txt"]
    submit_and_accept(repo.db, claimed, runtime_result(claimed, ["relative.txt"]))
    assert repo.write("task-r", "write-r")["state"] == "APPLIED"


def test_an_update_moves_an_existing_branch_from_its_expected_tip(repo: Repo) -> None:
    register(repo.db, repo.bare)
    first = verified_proposal(
        repo.db,
        "task-1",
        binding("task-1", repo.base, target_branch="agent/shared"),
        {"a.txt": "1\n"},
    )
    repo.write("task-1", "write-1")
    tip = first["head_oid"]
    second = binding(
        "task-2",
        tip,
        target_branch="agent/shared",
        expected_branch_oid=tip,
        branch_mode="UPDATE_EXISTING",
        generation=2,
    )
    verified_proposal(repo.db, "task-2", second, {"b.txt": "2\n"})
    answer = repo.write("task-2", "write-2")
    assert answer["old_oid"] == tip and answer["state"] == "APPLIED"
    assert ref(repo.bare, "refs/heads/agent/shared") == answer["new_oid"]


# ---------------------------------------------------------------------------------------------
# refusals: each writes nothing to the repository


def test_a_protected_target_is_refused(repo: Repo) -> None:
    register(repo.db, repo.bare, ["main", "agent/locked/*"])
    verified_proposal(
        repo.db,
        "task-p",
        binding("task-p", repo.base, target_branch="agent/locked/x"),
        {"a": "1\n"},
    )
    before = repository_files(repo.bare)
    assert repo.refused("task-p", "write-p") == "PROTECTED_REF"
    assert repository_files(repo.bare) == before
    assert "GOVERNED_WRITE_INTENDED" not in events_of(repo.db, "task-p")


def test_a_proposal_that_touches_a_protected_branch_is_refused(repo: Repo) -> None:
    register(repo.db, repo.bare)
    governed_task(repo.db, "task-m", binding("task-m", repo.base))
    claimed = claim(repo.db, "task-m")
    space = workspace(repo.db, claimed)
    try:
        edit(space, {"a.txt": "1\n"})
        run_git(["branch", "main"], cwd=space.path)  # the agent's own `main`, ahead of base
        proposal = propose(repo.db, space, claimed)
    finally:
        space.remove()
    assert proposal is not None
    assert proposal["facts"]["protected_refs"] == ["refs/heads/main"]
    assert proposal["facts"]["direct_main_write"] is True
    submit_and_accept(repo.db, claimed, runtime_result(claimed, ["a.txt"]))
    before = repository_files(repo.bare)
    assert repo.refused("task-m", "write-m") == "PROTECTED_REF"
    assert repository_files(repo.bare) == before


def test_history_that_does_not_descend_from_the_base_is_a_force_push(repo: Repo) -> None:
    register(repo.db, repo.bare)
    governed_task(repo.db, "task-f", binding("task-f", repo.base))
    claimed = claim(repo.db, "task-f")
    space = workspace(repo.db, claimed)
    try:
        run_git(["checkout", "--quiet", "--orphan", "rewritten"], cwd=space.path)
        run_git(["branch", "-D", "agent/task-f"], cwd=space.path)
        edit(space, {"README.md": "history rewritten\n"})
        proposal = propose(repo.db, space, claimed)
    finally:
        space.remove()
    assert proposal is not None and proposal["facts"]["force_push"] is True
    submit_and_accept(repo.db, claimed, runtime_result(claimed, proposal["changed_files"]))
    before = repository_files(repo.bare)
    assert repo.refused("task-f", "write-f") == "NOT_A_DESCENDANT"
    assert repository_files(repo.bare) == before


def test_a_private_key_in_a_proposal_is_refused(repo: Repo) -> None:
    register(repo.db, repo.bare)
    governed_task(repo.db, "task-k", binding("task-k", repo.base))
    claimed = claim(repo.db, "task-k")
    space = workspace(repo.db, claimed)
    try:
        edit(space, {"deploy/id_rsa": PRIVATE_KEY, "ok.txt": "fine\n"})
        proposal = propose(repo.db, space, claimed)
    finally:
        space.remove()
    assert proposal is not None
    facts = proposal["facts"]
    assert facts["secret_material_exposed"] is True
    assert [(s["path"], s["kind"]) for s in facts["secrets"]] == [("deploy/id_rsa", "Private Key")]
    submit_and_accept(repo.db, claimed, runtime_result(claimed, ["deploy/id_rsa", "ok.txt"]))
    before = repository_files(repo.bare)
    assert repo.refused("task-k", "write-k") == "SECRET_MATERIAL"
    assert repository_files(repo.bare) == before


def test_a_result_that_states_other_files_than_its_proposal_is_refused_at_submit(
    repo: Repo,
) -> None:
    from aios_ledger.shell.tasks.ledger import TaskLedger

    register(repo.db, repo.bare)
    governed_task(repo.db, "task-g", binding("task-g", repo.base))
    claimed = claim(repo.db, "task-g")
    space = workspace(repo.db, claimed)
    try:
        edit(space, {"a.txt": "1\n", "b.txt": "2\n"})
        propose(repo.db, space, claimed)
    finally:
        space.remove()
    ledger = TaskLedger(repo.db)
    try:
        for stated in (["a.txt"], ["a.txt", "b.txt", "c.txt"]):
            with pytest.raises(LedgerError) as refused:
                ledger.submit_result(
                    "task-g",
                    lease_token=str(claimed["lease_token"]),
                    result=runtime_result(claimed, stated),
                    idempotency_key="submit-g",
                )
            assert refused.value.code == "RESULT_GOVERNANCE_VIOLATION"
        with pytest.raises(LedgerError) as refused:
            ledger.submit_result(
                "task-g",
                lease_token=str(claimed["lease_token"]),
                result=runtime_result(claimed, ["a.txt", "b.txt"], head_oid="f" * 40),
                idempotency_key="submit-g",
            )
        assert refused.value.code == "RESULT_GOVERNANCE_VIOLATION"
        assert ledger.get("task-g")["status"] == "CLAIMED"
    finally:
        ledger.close()
    submit_and_accept(repo.db, claimed, runtime_result(claimed, ["b.txt", "a.txt"]))
    assert repo.write("task-g", "write-g")["state"] == "APPLIED"


def test_a_branch_that_exists_already_is_refused_by_gits_swap_and_recorded(repo: Repo) -> None:
    register(repo.db, repo.bare)
    verified_proposal(repo.db, "task-e", binding("task-e", repo.base), {"a.txt": "1\n"})
    other = commit_on(repo.bare, "x", repo.base, {"other.txt": "someone else\n"})
    git("--git-dir", str(repo.bare), "update-ref", "refs/heads/agent/task-e", other)
    assert repo.refused("task-e", "write-e") == "BRANCH_EXISTS"
    assert ref(repo.bare, "refs/heads/agent/task-e") == other
    assert events_of(repo.db, "task-e")[-1] == "GOVERNED_WRITE_MOVED_BY_OTHER"
    assert repo.refused("task-e", "write-e") == "BRANCH_EXISTS"  # the replay says the same


@on_both_engines
def test_a_branch_moved_from_its_expected_tip_is_refused_and_recorded(repo: Repo) -> None:
    register(repo.db, repo.bare)
    git("--git-dir", str(repo.bare), "update-ref", "refs/heads/agent/moving", repo.base)
    bound = binding(
        "task-b", repo.base, target_branch="agent/moving", branch_mode="UPDATE_EXISTING"
    )
    verified_proposal(repo.db, "task-b", bound, {"a.txt": "1\n"})
    other = commit_on(repo.bare, "y", repo.base, {"other.txt": "moved\n"})
    git("--git-dir", str(repo.bare), "update-ref", "refs/heads/agent/moving", other)
    assert repo.refused("task-b", "write-b") == "BRANCH_MOVED"
    assert ref(repo.bare, "refs/heads/agent/moving") == other


def test_a_lower_generation_than_the_last_applied_is_stale(repo: Repo) -> None:
    register(repo.db, repo.bare)
    newer = binding("task-n", repo.base, target_branch="agent/gen", generation=3)
    verified_proposal(repo.db, "task-n", newer, {"a.txt": "new\n"})
    tip = repo.write("task-n", "write-n")["new_oid"]
    older = binding(
        "task-o",
        tip,
        target_branch="agent/gen",
        expected_branch_oid=tip,
        branch_mode="UPDATE_EXISTING",
        generation=2,
    )
    verified_proposal(repo.db, "task-o", older, {"b.txt": "old\n"})
    before = repository_files(repo.bare)
    assert repo.refused("task-o", "write-o") == "GENERATION_STALE"
    assert repository_files(repo.bare) == before


@on_both_engines
def test_unverified_unproposed_and_unregistered_tasks_are_refused(repo: Repo) -> None:
    governed_task(repo.db, "task-r", binding("task-r", repo.base))
    assert repo.refused("task-r", "w1") == "TASK_NOT_VERIFIED"
    claimed = claim(repo.db, "task-r")
    submit_and_accept(repo.db, claimed, runtime_result(claimed, []))
    assert repo.refused("task-r", "w2") == "REPOSITORY_NOT_FOUND"
    register(repo.db, repo.bare)
    assert repo.refused("task-r", "w3") == "PROPOSAL_NOT_FOUND"
    assert repo.refused("task-missing", "w4") == "TASK_NOT_FOUND"
    assert branch_refs(repo.bare) == {"refs/heads/main": repo.base}


def test_a_key_used_for_another_task_is_an_idempotency_conflict(repo: Repo) -> None:
    register(repo.db, repo.bare)
    verified_proposal(repo.db, "task-i", binding("task-i", repo.base), {"a.txt": "1\n"})
    verified_proposal(repo.db, "task-j", binding("task-j", repo.base), {"b.txt": "1\n"})
    repo.write("task-i", "shared-key")
    assert repo.refused("task-j", "shared-key") == "IDEMPOTENCY_CONFLICT"


def test_ref_names_git_refuses_are_refused() -> None:
    assert check_ref_format("refs/heads/agent/ok") == "refs/heads/agent/ok"
    for name in ("refs/heads/agent/a.lock/b", "refs/heads/x..y", "heads/x", "refs/heads/a b"):
        with pytest.raises(LedgerError) as refused:
            check_ref_format(name)
        assert refused.value.code == "REF_NAME_INVALID"


# ---------------------------------------------------------------------------------------------
# hostile bundles: refused before anything reaches the repository


def _claimed_task(repo: Repo, task_id: str) -> dict[str, Any]:
    register(repo.db, repo.bare)
    governed_task(repo.db, task_id, binding(task_id, repo.base))
    return claim(repo.db, task_id)


def _record(repo: Repo, claimed: dict[str, Any], data: bytes, **limits: Any) -> str:
    before = repository_files(repo.bare)
    with Database(repo.db) as db:
        try:
            record_proposal(
                db,
                str(claimed["task_id"]),
                data,
                lease_token=str(claimed["lease_token"]),
                limits=ProposalLimits(**limits),
            )
        except LedgerError as refused:
            code = refused.code
        else:
            raise AssertionError("the bundle was recorded")
    assert repository_files(repo.bare) == before
    assert "PROPOSAL_RECORDED" not in events_of(repo.db, str(claimed["task_id"]))
    kept = Path(f"{repo.db}.proposals")
    if code != "LEASE_INVALID":  # a refused bundle is not kept beside the ledger
        assert not kept.exists() or list(kept.iterdir()) == []
    return code


def _bundle_of(work: Path, *rev: str) -> bytes:
    out = work.parent / f"{work.name}.bundle"
    git("bundle", "create", "--quiet", str(out), *rev, cwd=work)
    return out.read_bytes()


def test_garbage_bytes_are_not_a_bundle(repo: Repo) -> None:
    claimed = _claimed_task(repo, "task-h1")
    assert _record(repo, claimed, b"# v2 git bundle\nnot really\n") == "BUNDLE_INVALID"
    assert _record(repo, claimed, os.urandom(4096)) == "BUNDLE_INVALID"
    assert _record(repo, claimed, b"") == "BUNDLE_INVALID"


def test_a_bundle_on_another_base_is_refused(repo: Repo) -> None:
    claimed = _claimed_task(repo, "task-h2")
    elsewhere = repo.root / "elsewhere"
    git("init", "--quiet", str(elsewhere))
    (elsewhere / "x.txt").write_text("1\n")
    git("add", "--all", cwd=elsewhere)
    git("commit", "--quiet", "-m", "foreign base", cwd=elsewhere)
    foreign = git("rev-parse", "HEAD", cwd=elsewhere)
    (elsewhere / "x.txt").write_text("2\n")
    git("commit", "--quiet", "-am", "on the foreign base", cwd=elsewhere)
    # Its prerequisite is a commit the governed repository does not have.
    assert (
        _record(repo, claimed, _bundle_of(elsewhere, "HEAD", "--not", foreign)) == "BUNDLE_INVALID"
    )


def test_a_bundle_over_the_size_limit_is_refused(repo: Repo) -> None:
    claimed = _claimed_task(repo, "task-h3")
    space = workspace(repo.db, claimed)
    try:
        edit(space, {"noise.bin": os.urandom(200_000).hex()})
        data = _bundle_of(Path(space.path), "HEAD", "--not", repo.base)
    finally:
        space.remove()
    assert _record(repo, claimed, data, max_bundle_bytes=100_000) == "PROPOSAL_TOO_LARGE"


def test_a_huge_file_over_the_limit_is_refused_even_when_it_compresses(repo: Repo) -> None:
    claimed = _claimed_task(repo, "task-h4")
    space = workspace(repo.db, claimed)
    try:
        edit(space, {"zeros.txt": "0" * 2_000_000})
        data = _bundle_of(Path(space.path), "HEAD", "--not", repo.base)
    finally:
        space.remove()
    assert len(data) < 100_000
    assert _record(repo, claimed, data, max_file_bytes=1_000_000) == "PROPOSAL_TOO_LARGE"


def test_a_bundle_with_other_refs_than_branches_is_refused(repo: Repo) -> None:
    claimed = _claimed_task(repo, "task-h5")
    space = workspace(repo.db, claimed)
    try:
        edit(space, {"a.txt": "1\n"})
        git("tag", "sneaky", cwd=space.path)
        data = _bundle_of(Path(space.path), "HEAD", "refs/tags/sneaky", "--not", repo.base)
    finally:
        space.remove()
    assert _record(repo, claimed, data) == "BUNDLE_INVALID"


@pytest.mark.parametrize("branch", ["refs/heads/main", "agent/\u202egnp.exe", "agent/\u200fx"])
def test_a_bundle_with_a_branch_name_that_misleads_is_refused(repo: Repo, branch: str) -> None:
    """A branch of the bundle besides HEAD is held to the ledger's rule for branch names, not
    only git's: `refs/heads/refs/heads/main` and names with bidirectional controls were
    recorded among the proposal's refs, for a reviewer to misread."""
    claimed = _claimed_task(repo, "task-h7")
    space = workspace(repo.db, claimed)
    try:
        edit(space, {"a.txt": "1\n"})
        git("update-ref", f"refs/heads/{branch}", "HEAD", cwd=space.path)
        data = _bundle_of(Path(space.path), "HEAD", f"refs/heads/{branch}", "--not", repo.base)
    finally:
        space.remove()
    assert _record(repo, claimed, data) == "REF_NAME_INVALID"


def test_a_proposal_needs_the_attempts_lease(repo: Repo) -> None:
    claimed = _claimed_task(repo, "task-h6")
    space = workspace(repo.db, claimed)
    try:
        edit(space, {"a.txt": "1\n"})
        data = _bundle_of(Path(space.path), "HEAD", "--not", repo.base)
    finally:
        space.remove()
    assert _record(repo, {**claimed, "lease_token": "x" * 43}, data) == "LEASE_INVALID"


# ---------------------------------------------------------------------------------------------
# concurrency and crashes


def test_two_writes_racing_for_one_branch_move_it_once(repo: Repo) -> None:
    register(repo.db, repo.bare)
    git("--git-dir", str(repo.bare), "update-ref", "refs/heads/agent/race", repo.base)
    for task_id in ("task-x", "task-y"):
        bound = binding(
            task_id, repo.base, target_branch="agent/race", branch_mode="UPDATE_EXISTING"
        )
        verified_proposal(repo.db, task_id, bound, {f"{task_id}.txt": task_id})
    children = [
        process(repo, task_id, f"race-{task_id}", "wait") for task_id in ("task-x", "task-y")
    ]
    Path(f"{repo.db}.go").touch()
    answers = [answer_of(child) for child in children]
    applied = [a for a in answers if a is not None and a.get("state") == "APPLIED"]
    refused = [a for a in answers if a is not None and a.get("code") == "BRANCH_MOVED"]
    assert len(applied) == 1 and len(refused) == 1, answers
    assert ref(repo.bare, "refs/heads/agent/race") == applied[0]["new_oid"]
    loser = "task-y" if applied[0]["task_id"] == "task-x" else "task-x"
    assert events_of(repo.db, loser)[-1] == "GOVERNED_WRITE_MOVED_BY_OTHER"


@on_both_engines
@pytest.mark.parametrize(
    ("mode", "moved_by_other", "expected_state", "expected_code"),
    [
        ("kill-after-swap", False, "APPLIED", None),
        ("kill-before-swap", False, "NOT_APPLIED", "WRITE_NOT_APPLIED"),
        ("kill-before-swap", True, "MOVED_BY_OTHER", "BRANCH_EXISTS"),
    ],
)
def test_a_write_killed_between_intent_and_outcome_is_reconciled_from_the_ref(
    repo: Repo, mode: str, moved_by_other: bool, expected_state: str, expected_code: str | None
) -> None:
    register(repo.db, repo.bare)
    proposal = verified_proposal(repo.db, "task-c", binding("task-c", repo.base), {"a.txt": "1\n"})
    child = process(repo, "task-c", "write-c", mode)
    assert answer_of(child) is None and child.returncode == -9
    assert events_of(repo.db, "task-c")[-1] == "GOVERNED_WRITE_INTENDED"
    branch = "refs/heads/agent/task-c"
    assert ref(repo.bare, branch) == (proposal["head_oid"] if mode == "kill-after-swap" else None)
    # While the write is in doubt its lease is held: another write of the branch waits, then
    # is refused.
    verified_proposal(
        repo.db, "task-d", binding("task-d", repo.base, target_branch="agent/task-c"), {"d": "1\n"}
    )
    assert repo.refused("task-d", "write-d", lease_wait=0) == "WRITER_LEASE_HELD"
    if moved_by_other:
        other = commit_on(repo.bare, "z", repo.base, {"z.txt": "other writer\n"})
        git("--git-dir", str(repo.bare), "update-ref", branch, other)
    if expected_code is None:
        answer = repo.write("task-c", "write-c")
        assert answer["state"] == expected_state
    else:
        assert repo.refused("task-c", "write-c") == expected_code
    with Database(repo.db) as db:
        assert recover_writes(db) == []  # nothing left in doubt
    outcome = events_of(repo.db, "task-c")[-1]
    assert outcome == f"GOVERNED_WRITE_{expected_state}"
    if expected_code is not None:  # the replay says the same
        assert repo.refused("task-c", "write-c") == expected_code


def test_verify_finds_a_governed_write_changed_behind_the_ledgers_back(repo: Repo) -> None:
    register(repo.db, repo.bare)
    verified_proposal(repo.db, "task-v", binding("task-v", repo.base), {"a.txt": "1\n"})
    repo.write("task-v", "write-v")
    con = sqlite3.connect(repo.db)
    try:
        con.execute(
            "UPDATE governed_writes SET new_oid = ? WHERE idempotency_key = ?",
            ("f" * 40, "write-v"),
        )
        con.commit()
    finally:
        con.close()
    with Database(repo.db) as db:
        report = verify_log(db)
    assert not report.intact
    assert any(f.get("table") == "governed_writes" for f in report.public()["findings"])
    con = sqlite3.connect(repo.db)
    try:
        con.execute(
            "UPDATE governed_writes SET new_oid = ? WHERE idempotency_key = ?",
            (ref(repo.bare, "refs/heads/agent/task-v"), "write-v"),
        )
        con.commit()
    finally:
        con.close()


# ---------------------------------------------------------------------------------------------
# the worker: workspaces, proposals and source captures


def test_the_worker_gives_the_agent_a_workspace_and_proposes_its_commits(repo: Repo) -> None:
    from aios_ledger.shell.tasks.ledger import TaskLedger
    from aios_ledger.shell.work.worker import Worker, WorkerConfig

    register(repo.db, repo.bare)
    governed_task(repo.db, "task-w", binding("task-w", repo.base))
    worker = Worker(
        repo.db,
        WorkerConfig(
            agent_id=AGENT,
            capabilities=("agent.runtime.openclaw",),
            command=f"{sys.executable} {ROOT / 'examples' / 'agent.py'}",
            once=True,
            timeout=60,
        ),
    )
    try:
        worker.run()
    finally:
        worker.close()
    assert [o.outcome for o in worker.outcomes] == ["submitted"]
    assert "PROPOSAL_RECORDED" in events_of(repo.db, "task-w")
    ledger = TaskLedger(repo.db)
    try:
        ledger.verify("task-w", decision="SUCCEEDED", reason="ok", idempotency_key="verify-w")
    finally:
        ledger.close()
    answer = repo.write("task-w", "write-w")
    assert answer["changed_files"] == ["NOTES.md"]
    shown = git("--git-dir", str(repo.bare), "show", f"{answer['new_oid']}:NOTES.md")
    assert shown == "NOTES.md: drafted for task-w on attempt 1"
    assert ref(repo.bare, "refs/heads/main") == repo.base


def test_a_source_capture_is_the_snapshot_of_the_base_tree(repo: Repo) -> None:
    """What the worker submits itself for a `source_capture` claim on a governed repository
    (such tasks come from the older runtime; the claim is built here as a claim answers)."""
    import hashlib

    from aios_ledger.core import project_execution_envelope
    from aios_ledger.shell.git.workspace import GitWorkspaces

    register(repo.db, repo.bare)
    bound = binding("task-s", repo.base)
    envelope = project_execution_envelope(
        bound,
        {
            "action": "source_capture",
            "adapter": "source_capture",
            "capability_scope": ["git.read"],
            "runtime_input": None,
        },
    )
    claimed = {"task_id": "task-s", "attempt": 1, "envelope": envelope, "lease_token": "t"}
    result = GitWorkspaces(repo.db).source_capture(claimed)
    assert result is not None
    listing = run_git(
        ["--git-dir", str(repo.bare), "ls-tree", "-r", "-z", "--full-tree", repo.base]
    ).stdout
    assert result["source_snapshot"] == {
        "schema": "aios.git_tree_snapshot.v1",
        "payload_sha256": hashlib.sha256(listing).hexdigest(),
    }
    contract = json.loads((ROOT / "core/contracts/source_capture_result.v1.json").read_text())
    from jsonschema import Draft202012Validator

    assert list(Draft202012Validator(contract).iter_errors(result)) == []
    assert result["execution_digest"] == envelope["execution_digest"]
    runtime = {**claimed, "envelope": {**envelope, "action": "agent_runtime"}}
    assert GitWorkspaces(repo.db).source_capture(runtime) is None


def test_archiving_keeps_the_chains_of_tasks_that_wrote_to_a_repository(repo: Repo) -> None:
    from aios_ledger.shell.log.archive import archive_tasks

    register(repo.db, repo.bare)
    verified_proposal(repo.db, "task-z", binding("task-z", repo.base), {"a.txt": "1\n"})
    repo.write("task-z", "write-z")
    with Database(repo.db) as db:
        archived = archive_tasks(
            db, finished_before="2999-01-01T00:00:00Z", output=repo.root / "archive.jsonl"
        )
    assert "task-z" not in json.dumps(archived)
    assert "GOVERNED_WRITE_APPLIED" in events_of(repo.db, "task-z")


def test_the_agents_git_configuration_never_runs_as_the_worker(repo: Repo) -> None:
    register(repo.db, repo.bare)
    governed_task(repo.db, "task-h", binding("task-h", repo.base))
    claimed = claim(repo.db, "task-h")
    space = workspace(repo.db, claimed)
    marker = repo.root / "ran-as-the-worker"
    try:
        config = Path(space.path, ".git", "config")
        config.write_text(
            config.read_text()
            + f'[filter "evil"]\n\tclean = touch {marker}\n\tsmudge = touch {marker}\n'
            + f"[core]\n\tfsmonitor = touch {marker}\n"
        )
        hooks = Path(space.path, ".git", "hooks")
        hooks.mkdir(exist_ok=True)
        for name in ("pre-commit", "commit-msg", "post-commit"):
            hook = hooks / name
            hook.write_text(f"#!/bin/sh\ntouch {marker}\n")
            hook.chmod(0o755)
        edit(
            space, {".gitattributes": "* filter=evil\n", "work.txt": "uncommitted\n"}, commit=False
        )
        proposal = propose(repo.db, space, claimed)
    finally:
        space.remove()
    assert proposal is not None
    assert sorted(proposal["changed_files"]) == [".gitattributes", "work.txt"]
    assert not marker.exists()
