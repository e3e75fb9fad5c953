"""Which branch names the ledger writes: those git itself takes, and none that would mislead (a full
ref, `@`, a pseudo-ref, the quarantine namespace, control or bidirectional characters)."""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterable

from aios_ledger.core.errors import LedgerError

HEADS = "refs/heads/"
# The namespace the ledger fetches a proposal's head into before a governed write.
QUARANTINE_NAMESPACE = "aios-quarantine"
# What git-check-ref-format(1) refuses anywhere in a ref name (rules 3, 4, 5, 8 and 10).
_REFUSED_ANYWHERE = ("..", "@{", " ", "~", "^", ":", "?", "*", "[", "\\")
# Characters that reorder or hide text as it is shown: a review would read another name.
BIDI_CONTROLS = frozenset("\u200e\u200f\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069")
# The refs git reads from a repository's top directory before any under refs/ (`FETCH_HEAD`).
_PSEUDO_REF = re.compile(r"^[A-Z_]*HEAD$")
# How `git rev-parse NAME` expands a short name, but for the branch itself.
_OTHER_EXPANSIONS = ("{}", "refs/{}", "refs/tags/{}", "refs/remotes/{}", "refs/remotes/{}/HEAD")


def git_branch_problem(name: str) -> str | None:
    """Why git refuses `name` as a branch name (`git check-ref-format --branch`), or None."""
    if not name:
        return "is empty"
    if name.startswith("-"):
        return "starts with '-'"
    if name == "HEAD":
        return "is HEAD"
    if any(ord(ch) < 0x20 or ch == "\x7f" for ch in name):
        return "holds an ASCII control character"
    refused = [part for part in _REFUSED_ANYWHERE if part in name]
    if refused:
        return f"holds {refused[0]!r}"
    if name.endswith("."):
        return "ends with '.'"
    for component in name.split("/"):
        if not component:
            return "has an empty path component (a leading, trailing or double '/')"
        if component.startswith("."):
            return f"has a component starting with '.' ({component!r})"
        if component.endswith(".lock"):
            return f"has a component ending with '.lock' ({component!r})"
    return None


def branch_name_problem(name: str) -> str | None:
    """Why the ledger refuses `name` as a branch to write, or None."""
    problem = git_branch_problem(name)
    if problem is not None:
        return problem
    if name.startswith("refs/"):
        return "starts with 'refs/' (a branch is named without refs/heads/)"
    if name == "@":
        return "is '@', git's shorthand for HEAD"
    if _PSEUDO_REF.fullmatch(name):
        return "is the name of a pseudo-ref like FETCH_HEAD"
    if name.split("/", 1)[0] == QUARANTINE_NAMESPACE:
        return f"is under the ledger's quarantine namespace {QUARANTINE_NAMESPACE!r}"
    hidden = [ch for ch in name if ch in BIDI_CONTROLS or unicodedata.category(ch) == "Cc"]
    if hidden:
        return f"holds the invisible or reordering character U+{ord(hidden[0]):04X}"
    if any(unicodedata.category(ch) == "Cs" for ch in name):
        return "is not valid Unicode text (a lone surrogate)"
    return None


def require_branch_name(name: str) -> str:
    """`name` if the ledger writes it as a branch, else `REF_NAME_INVALID`."""
    problem = branch_name_problem(name)
    if problem is not None:
        raise LedgerError(
            "REF_NAME_INVALID",
            f"branch name {name!r} {problem}: choose a name `git check-ref-format --branch` "
            "accepts, without refs/, control or bidirectional characters",
        )
    return name


def ambiguous_with(name: str, refs: Iterable[str]) -> list[str]:
    """The refs besides `refs/heads/NAME` that `git rev-parse NAME` also finds."""
    candidates = {pattern.format(name) for pattern in _OTHER_EXPANSIONS}
    return sorted(ref for ref in set(refs) if ref in candidates)


def require_unambiguous_branch(name: str, refs: Iterable[str]) -> str:
    """`name` if the ledger writes it and no other ref goes by it."""
    require_branch_name(name)
    clashes = ambiguous_with(name, refs)
    if clashes:
        raise LedgerError(
            "REF_NAME_INVALID",
            f"branch name {name!r} is ambiguous with {clashes} in the repository "
            "(git rev-parse would warn): bind the task to another branch name",
        )
    return name
