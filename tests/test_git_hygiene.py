"""Git hygiene as git defines it, through real git and real repositories: objects `git fsck`
refuses (a `.git` path, a `.gitmodules` URL that is an option), symbolic links out of the tree
and gitlinks are refused at the proposal and leave nothing behind; branch names git or a
reviewer would misread are refused at the binding and, ambiguous ones, at the write; and
`--protected` adds to the default protection unless `--no-default-protection` says otherwise."""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest
from aios_ledger.core import LedgerError
from aios_ledger.core.git.hygiene import symlink_escapes
from aios_ledger.shell.db.connection import Database
from aios_ledger.shell.git.proposals import PROPOSALS_DIR_ENV, record_proposal
from aios_ledger.shell.git.repos import change_repository_settings
from aios_ledger.shell.git.runner import run_git
from aios_ledger.shell.git.workspace import Workspace
from aios_ledger.shell.governed.writes import governed_write
from aios_ledger.shell.log.verification import verify_log
from aios_ledger.shell.projection.bindings import register_binding
from cli_runner import CliResult, run_cli
from git_support import (
    REPOSITORY,
    binding,
    bound_task,
    branch_refs,
    claim,
    events_of,
    git,
    governed_task,
    make_repository,
    register,
    repository_files,
    verified_proposal,
    workspace,
)
from legacy_fixtures import rows


class Governed:
    """A bare repository on `main` (its base commit) and the SQLite ledger that governs it."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.db = root / "ledger.db"
        self.bare, self.base = make_repository(root)


@pytest.fixture
def governed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Governed]:
    monkeypatch.setenv(PROPOSALS_DIR_ENV, str(tmp_path / "proposals"))
    found = Governed(tmp_path)  # runs git first: its private HOME stays where it was made
    # The quarantines and scratch folders of the ledger go here, to see that none is left.
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(scratch))
    yield found
    if found.db.exists():
        with Database(found.db) as db:
            report = verify_log(db)
        assert report.intact, report.public()


# ---------------------------------------------------------------------------------------------
# hostile trees, made with git's plumbing in the agent's workspace


def _git_dir(space: Workspace) -> str:
    return str(Path(space.path, ".git"))


def _blob(space: Workspace, data: bytes) -> str:
    written = run_git(["--git-dir", _git_dir(space), "hash-object", "-w", "--stdin"], stdin=data)
    return written.text.strip()


def _tree(space: Workspace, entries: Mapping[str, tuple[str, str]]) -> str:
    """A tree of `name -> (mode, oid)` written with `git mktree`, which takes names that
    `update-index` refuses (`.git`)."""
    kinds = {"040000": "tree", "160000": "commit"}
    listing = "".join(
        f"{mode} {kinds.get(mode, 'blob')} {oid}\t{name}\n"
        for name, (mode, oid) in sorted(entries.items())
    )
    return run_git(
        ["--git-dir", _git_dir(space), "mktree", "--missing"], stdin=listing.encode()
    ).text.strip()


def _commit(space: Workspace, tree: str, parent: str, message: str = "agent work") -> str:
    return git("--git-dir", _git_dir(space), "commit-tree", tree, "-p", parent, "-m", message)


def _readme(space: Workspace) -> tuple[str, str]:
    return ("100644", git("--git-dir", _git_dir(space), "rev-parse", "HEAD:README.md"))


def _bundle(space: Workspace, head: str, base: str) -> bytes:
    """The agent's branch moved to `head`, bundled as the worker bundles it."""
    git("--git-dir", _git_dir(space), "update-ref", "HEAD", head)
    out = Path(space.root, "hostile.bundle")
    git(
        "--git-dir", _git_dir(space), "bundle", "create", "--quiet", str(out), "HEAD", "--not", base
    )
    return out.read_bytes()


def _record(governed: Governed, claimed: Mapping[str, Any], data: bytes) -> dict[str, Any]:
    with Database(governed.db) as db:
        return dict(
            record_proposal(
                db, str(claimed["task_id"]), data, lease_token=str(claimed["lease_token"])
            )
        )


def _refused(governed: Governed, claimed: Mapping[str, Any], data: bytes) -> LedgerError:
    """Record `data`, which must be refused, and see that it left nothing behind: the governed
    repository byte for byte as it was (no object, no ref), no stored bundle, no event, no
    scratch folder."""
    before = repository_files(governed.bare)
    with pytest.raises(LedgerError) as refused:
        _record(governed, claimed, data)
    assert repository_files(governed.bare) == before
    assert "PROPOSAL_RECORDED" not in events_of(governed.db, str(claimed["task_id"]))
    kept = governed.root / "proposals"
    assert not kept.exists() or list(kept.iterdir()) == []
    left = [
        path.name
        for path in Path(tempfile.gettempdir()).iterdir()
        if path.name.startswith(("aios-quarantine-", "aios-proposal-", "aios-scan-"))
    ]
    assert left == []
    return refused.value


@pytest.fixture
def agent(governed: Governed) -> Iterator[tuple[dict[str, Any], Workspace]]:
    """A claimed task of the governed repository and the agent's workspace for it."""
    register(governed.db, governed.bare)
    governed_task(governed.db, "task-hyg", binding("task-hyg", governed.base))
    claimed = claim(governed.db, "task-hyg")
    space = workspace(governed.db, claimed)
    try:
        yield claimed, space
    finally:
        space.remove()


def test_a_dot_git_path_is_refused_by_gits_own_fsck(
    governed: Governed, agent: tuple[dict[str, Any], Workspace]
) -> None:
    claimed, space = agent
    hook = _blob(space, b"#!/bin/sh\ntouch /tmp/owned\n")
    hooks = _tree(space, {"post-checkout": ("100755", hook)})
    dot_git = _tree(space, {"hooks": ("040000", hooks)})
    root = _tree(space, {".git": ("040000", dot_git), "README.md": _readme(space)})
    data = _bundle(space, _commit(space, root, governed.base), governed.base)
    refused = _refused(governed, claimed, data)
    assert refused.code == "BUNDLE_UNSAFE"
    assert "hasDotgit" in refused.detail and root in refused.detail


def test_a_gitmodules_url_that_is_an_option_is_refused_by_gits_own_fsck(
    governed: Governed, agent: tuple[dict[str, Any], Workspace]
) -> None:
    claimed, space = agent
    modules = _blob(
        space, b'[submodule "lib"]\n\tpath = lib\n\turl = --upload-pack=touch$IFS/tmp/owned\n'
    )
    root = _tree(space, {".gitmodules": ("100644", modules), "README.md": _readme(space)})
    data = _bundle(space, _commit(space, root, governed.base), governed.base)
    refused = _refused(governed, claimed, data)
    assert refused.code == "BUNDLE_UNSAFE"
    assert "gitmodulesUrl" in refused.detail and modules in refused.detail


@pytest.mark.parametrize(
    ("path", "target"),
    [
        ("link", "/etc/passwd"),
        ("link", "../outside"),
        ("docs/link", "../../outside"),
        ("docs/link", "inside/../../../outside"),
    ],
)
def test_a_symbolic_link_out_of_the_tree_is_refused(
    governed: Governed, agent: tuple[dict[str, Any], Workspace], path: str, target: str
) -> None:
    claimed, space = agent
    link = _blob(space, target.encode())
    entry = ("120000", link)
    if "/" in path:
        folder, name = path.split("/")
        root = _tree(space, {folder: ("040000", _tree(space, {name: entry}))})
    else:
        root = _tree(space, {path: entry})
    data = _bundle(space, _commit(space, root, governed.base), governed.base)
    refused = _refused(governed, claimed, data)
    assert refused.code == "BUNDLE_UNSAFE"
    assert repr(path) in refused.detail and repr(target) in refused.detail


def test_a_symbolic_link_out_of_the_tree_in_an_earlier_commit_is_refused(
    governed: Governed, agent: tuple[dict[str, Any], Workspace]
) -> None:
    # The head's tree is clean, but checking out the commit before it follows the link out.
    claimed, space = agent
    readme = _readme(space)
    hostile = _commit(
        space,
        _tree(space, {"link": ("120000", _blob(space, b"/etc")), "README.md": readme}),
        governed.base,
    )
    clean = _commit(space, _tree(space, {"README.md": readme}), hostile, "remove the link")
    refused = _refused(governed, claimed, _bundle(space, clean, governed.base))
    assert refused.code == "BUNDLE_UNSAFE" and "'link'" in refused.detail


def test_a_symbolic_link_inside_the_tree_is_recorded(
    governed: Governed, agent: tuple[dict[str, Any], Workspace]
) -> None:
    claimed, space = agent
    inside = _tree(space, {"readme": ("120000", _blob(space, b"../README.md"))})
    root = _tree(space, {"docs": ("040000", inside), "README.md": _readme(space)})
    answer = _record(
        governed, claimed, _bundle(space, _commit(space, root, governed.base), governed.base)
    )
    assert answer["changed_files"] == ["docs/readme"]


def test_a_gitlink_is_refused_unless_the_repository_allows_gitlinks(
    governed: Governed, agent: tuple[dict[str, Any], Workspace]
) -> None:
    """Allowed by the repository's settings in the ledger; the git config key an older release
    read lets nothing through (the proposal is refused, naming the command that moves it)."""
    claimed, space = agent
    root = _tree(space, {"lib": ("160000", governed.base), "README.md": _readme(space)})
    data = _bundle(space, _commit(space, root, governed.base), governed.base)
    refused = _refused(governed, claimed, data)
    assert refused.code == "BUNDLE_UNSAFE"
    assert "'lib' is a gitlink" in refused.detail
    bare = str(governed.bare)
    git("--git-dir", bare, "config", "--bool", "aios-ledger.allowGitlinks", "true")
    in_config = _refused(governed, claimed, data)
    assert in_config.code == "REPOSITORY_SETTINGS_IN_GIT_CONFIG"
    assert "aios-ledger repo settings acme/widgets" in in_config.detail
    assert "--allow-gitlinks" in in_config.detail and "--remove-section" in in_config.detail
    git("--git-dir", bare, "config", "--remove-section", "aios-ledger")
    assert _refused(governed, claimed, data).code == "BUNDLE_UNSAFE"
    with Database(governed.db) as db:
        changed = change_repository_settings(
            db, REPOSITORY, {"allow_gitlinks": True}, idempotency_key="allow-gitlinks"
        )
    assert changed["changed"] == ["allow_gitlinks"] and changed["revision"] == 2
    assert _record(governed, claimed, data)["changed_files"] == ["lib"]


def test_symlink_escapes_is_a_table() -> None:
    assert symlink_escapes("a", "/x") and symlink_escapes("a", "..")
    assert symlink_escapes("a/b", "../..") and symlink_escapes("a/b", "./../../x")
    assert not symlink_escapes("a/b", "../x") and not symlink_escapes("a", "b/../c")
    assert not symlink_escapes("a", ".") and not symlink_escapes("a/b/c", "../../d")


# ---------------------------------------------------------------------------------------------
# branch names: at the binding, and against the repository's refs at the write


def _binding_document(task_id: str, base: str, branch: str) -> dict[str, Any]:
    return {
        "task_id": task_id,
        "job_id": f"job-{task_id}",
        "repository": REPOSITORY,
        "base_oid": base,
        "expected_branch_oid": base,
        "target_branch": branch,
        "branch_mode": "CREATE_NEW",
        "generation": 1,
        "idempotency_key": f"binding-{task_id}",
    }


@pytest.mark.parametrize(
    "branch",
    [
        "refs/heads/refs/heads/main",
        "refs/heads/agent/x",
        "refs/tags/v1",
        "@",
        "refs/aios-quarantine/x/HEAD",
        "aios-quarantine/x/HEAD",
        "FETCH_HEAD",
        "agent/\u202egnp.exe",
        "agent/\u2066x\u2069",
        "agent/\u200fx",
        "agent/a\x85b",
    ],
)
def test_a_binding_put_refuses_branch_names_that_mislead(governed: Governed, branch: str) -> None:
    bound_task(governed.db, "task-name", binding("task-name", governed.base))
    with Database(governed.db) as db, pytest.raises(LedgerError) as refused:
        register_binding(db, _binding_document("task-name", governed.base, branch))
    assert refused.value.code == "REF_NAME_INVALID"
    assert str(refused.value).startswith("REF_NAME_INVALID")
    found = rows(governed.db, "SELECT count(*) FROM governed_bindings", ())
    assert found == [(1,)]


def test_a_write_to_a_branch_name_another_ref_goes_by_is_refused(governed: Governed) -> None:
    register(governed.db, governed.bare)
    verified_proposal(
        governed.db,
        "task-amb",
        binding("task-amb", governed.base, target_branch="v1"),
        {"a.txt": "1\n"},
    )
    # The tag came after the binding: only the write can see it.
    git("--git-dir", str(governed.bare), "tag", "v1", governed.base)
    before = repository_files(governed.bare)
    with Database(governed.db) as db, pytest.raises(LedgerError) as refused:
        governed_write(db, {"task_id": "task-amb", "idempotency_key": "w-amb"})
    assert refused.value.code == "REF_NAME_INVALID"
    assert "refs/tags/v1" in refused.value.detail
    assert repository_files(governed.bare) == before
    assert branch_refs(governed.bare) == {
        "refs/heads/main": governed.base,
        "refs/tags/v1": governed.base,
    }
    # Nothing intended: the refused attempt alone is recorded.
    written = [e for e in events_of(governed.db, "task-amb") if e.startswith("GOVERNED_WRITE_")]
    assert written == ["GOVERNED_WRITE_REFUSED"]


# ---------------------------------------------------------------------------------------------
# protected patterns add to the defaults


def _cli(db: Path, *argv: str) -> CliResult:
    return run_cli("--db", db, *argv)


def _registered_payloads(db: Path) -> list[dict[str, Any]]:
    """The registrations' payloads without their settings (tests/test_repository_settings.py)."""
    found = rows(
        db, "SELECT payload_json FROM events WHERE event_type = 'REPOSITORY_REGISTERED'", ()
    )
    payloads = [json.loads(payload) for (payload,) in found]
    return [{k: v for k, v in payload.items() if k != "settings"} for payload in payloads]


def test_protected_patterns_add_to_the_defaults(governed: Governed) -> None:
    register(governed.db, governed.bare, ["hotfix/*"])
    verified_proposal(
        governed.db,
        "task-rel",
        binding("task-rel", governed.base, target_branch="release/2.4"),
        {"a.txt": "1\n"},
    )
    before = repository_files(governed.bare)
    with Database(governed.db) as db, pytest.raises(LedgerError) as refused:
        governed_write(db, {"task_id": "task-rel", "idempotency_key": "w-rel"})
    assert refused.value.code == "PROTECTED_REF"
    assert repository_files(governed.bare) == before
    assert _registered_payloads(governed.db) == [
        {
            "name": REPOSITORY,
            "path": os.path.realpath(governed.bare),
            "head_branch": "main",
            "protected": ["main", "master", "release/*", "hotfix/*"],
            "default_protection": True,
        }
    ]


def test_no_default_protection_replaces_the_defaults_and_replays(governed: Governed) -> None:
    db, bare = governed.db, str(governed.bare)
    assert _cli(db, "init").returncode == 0
    argv = ("repo", "add", REPOSITORY, bare, "--no-default-protection", "--protected", "hotfix/*")
    first = _cli(db, *argv)
    assert first.returncode == 0, first.stderr
    added = json.loads(first.stdout)
    assert added["protected"] == ["main", "hotfix/*"] and added["idempotent"] is False
    again = _cli(db, *argv)
    assert again.returncode == 0 and json.loads(again.stdout)["idempotent"] is True
    # The same patterns however asked for are the same registration; other patterns are not.
    spelled_out = _cli(
        db,
        "repo",
        "add",
        REPOSITORY,
        bare,
        "--no-default-protection",
        "--protected",
        "main",
        "--protected",
        "hotfix/*",
    )
    assert json.loads(spelled_out.stdout)["idempotent"] is True
    conflict = _cli(db, "repo", "add", REPOSITORY, bare, "--protected", "hotfix/*")
    assert conflict.returncode == 1 and conflict.stderr.startswith("REPOSITORY_CONFLICT")
    payloads = _registered_payloads(db)
    assert [p["default_protection"] for p in payloads] == [False]
    assert payloads[0]["protected"] == ["main", "hotfix/*"]
