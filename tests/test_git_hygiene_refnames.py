"""The core's branch-name rule held against git itself: for generated names, the rule agrees with
`git check-ref-format --branch` (run outside any repository, where it expands nothing) plus the
ledger's own rules; and the ambiguity rule agrees with `git rev-parse`'s warning in a real
repository."""

from __future__ import annotations

import os
import re
import unicodedata
from pathlib import Path

import pytest
from aios_ledger.core.refnames import (
    ambiguous_with,
    branch_name_problem,
    git_branch_problem,
)
from aios_ledger.shell.git.runner import list_refs, run_git
from git_support import git, make_repository
from hypothesis import given, settings
from hypothesis import strategies as st

SOAK = os.environ.get("AIOS_SOAK") == "1"
BIDI = "\u200e\u200f\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069"

# Pieces git's rules and the ledger's turn on, and plain text around them (no NUL: an argv
# cannot carry it to git; no lone surrogate: it is not text).
pieces = st.sampled_from(
    [
        *"ab-_/.@{}~^:?*[\\ \t\x01\x1f\x7f\x85é日",
        *BIDI,
        "..",
        "@{",
        ".lock",
        "lock",
        "refs/",
        "heads/",
        "HEAD",
        "FETCH_HEAD",
        "aios-quarantine/",
        "agent/",
        "release/",
    ]
)
text = st.text(st.characters(blacklist_categories=["Cs"], blacklist_characters="\x00"), max_size=6)
names = st.lists(st.one_of(pieces, text), min_size=1, max_size=8).map("".join)


@pytest.fixture(scope="module")
def outside(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A directory in no repository (git stops looking for one above it)."""
    folder = tmp_path_factory.mktemp("no-repository")
    found = run_git(["rev-parse", "--git-dir"], cwd=folder, env=_ceiling(folder), check=False)
    assert found.returncode != 0
    return folder


def _ceiling(folder: Path) -> dict[str, str]:
    return {"GIT_CEILING_DIRECTORIES": str(folder.parent)}


def git_accepts(folder: Path, name: str) -> bool:
    found = run_git(
        ["check-ref-format", "--branch", name], cwd=folder, env=_ceiling(folder), check=False
    )
    return found.returncode == 0 and found.stdout.decode("utf-8") == name + "\n"


def ledger_accepts_beyond_git(name: str) -> bool:
    """The ledger's rules on top of git's, as the brief states them."""
    return not (
        name.startswith("refs/")
        or name == "@"
        or re.fullmatch(r"[A-Z_]*HEAD", name) is not None
        or name.split("/", maxsplit=1)[0] == "aios-quarantine"
        or any(ch in BIDI or unicodedata.category(ch) == "Cc" for ch in name)
    )


def test_the_branch_rule_agrees_with_git_check_ref_format(outside: Path) -> None:
    seen = {"accepted": 0, "refused by git": 0, "refused by the ledger alone": 0}

    @settings(max_examples=1500 if SOAK else 150, deadline=None, database=None)
    @given(name=names)
    def check(name: str) -> None:
        by_git = git_accepts(outside, name)
        assert (git_branch_problem(name) is None) == by_git, (name, git_branch_problem(name))
        expected = by_git and ledger_accepts_beyond_git(name)
        assert (branch_name_problem(name) is None) == expected, (name, branch_name_problem(name))
        if not by_git:
            seen["refused by git"] += 1
        else:
            seen["accepted" if expected else "refused by the ledger alone"] += 1

    check()
    assert all(seen.values()), seen


@pytest.mark.parametrize(
    "name",
    ["agent/x", "@", "HEAD", "refs/heads/x", "a.lock/b", "a/.b", "x.", "-x", "a//b", "é/日", "@a"],
)
def test_named_cases_agree_with_git(outside: Path, name: str) -> None:
    assert (git_branch_problem(name) is None) == git_accepts(outside, name)


def test_a_nul_is_refused() -> None:
    assert git_branch_problem("agent/a\x00b") is not None


def test_ambiguity_is_what_git_rev_parse_warns_about(tmp_path: Path) -> None:
    bare, base = make_repository(tmp_path)
    where = ["--git-dir", str(bare)]
    for ref in ("refs/tags/v1", "refs/remotes/origin/y", "refs/remotes/up/HEAD", "refs/foo/bar"):
        git(*where, "update-ref", ref, base)
    git(*where, "update-ref", "refs/heads/x", base)
    refs = list_refs(str(bare))
    for name in ("v1", "origin/y", "up", "foo/bar", "tags/v1", "heads/x", "agent/ok", "y", "bar"):
        git(*where, "update-ref", f"refs/heads/{name}", base)
        parsed = run_git([*where, "rev-parse", "--verify", name], check=False)
        warned = b"is ambiguous" in parsed.stderr
        git(*where, "update-ref", "-d", f"refs/heads/{name}")
        assert bool(ambiguous_with(name, refs)) == warned, name
