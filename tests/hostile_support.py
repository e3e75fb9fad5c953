"""Shared helpers of the hostile-agent suites (no tests here): the problem a refusal answers,
the made-up secrets they smuggle, the bundle bomb, what is left in a folder, the state of a
repository as git shows it, and the tally of cases tried and refused that each suite reports
as its figures.

The suites themselves (`tests/test_hostile_agent_*.py`) play a malicious agent through the
server `serve` runs (tests/api_server.py) and real git repositories (tests/git_support.py).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
from aios_ledger.core import LedgerError
from aios_ledger.shell.git.runner import run_git
from git_support import git

PROBLEM = "application/problem+json"
# Made up here, never a real key: the scanner's plugins know their shapes.
PRIVATE_KEY = "-----BEGIN RSA " + "PRIVATE KEY-----\nMIIEowIBAAKCAQEA0Z3VS5JJcds3xfn/ygWyF8Pb\n"
AWS_KEY = "AKIA" + "Z7VRSQ5TJRVJ6ABC"


def problem(answer: httpx.Response, status: int, code: str) -> str:
    """The answer is the RFC 9457 problem `code` with `status`; its detail."""
    assert answer.status_code == status, answer.text
    assert answer.headers["content-type"].startswith(PROBLEM), answer.headers
    body = answer.json()
    assert body["code"] == code, body
    return str(body["detail"])


def listing(folder: Path) -> list[str]:
    """Every path under `folder` (empty when it does not exist)."""
    return sorted(str(path.relative_to(folder)) for path in folder.rglob("*"))


def repository_state(bare: Path) -> tuple[str, str]:
    """What git shows of a repository: every ref with its object (`git for-each-ref`), and
    every commit reachable from any of them (`git log --all`)."""
    refs = git("--git-dir", str(bare), "for-each-ref", "--format=%(refname) %(objectname)")
    log = git("--git-dir", str(bare), "log", "--all", "--format=%H %P %s")
    return refs, log


def bundle_bomb(git_dir: Path, base: str, out: Path, *, paths: int, blob_bytes: int) -> bytes:
    """One blob of `blob_bytes` under `paths` names, committed on `base` (which holds
    README.md) with git's plumbing in the repository at `git_dir` and bundled as the worker
    bundles: a bundle of a few hundred KB at most that asks a scanner to read `paths *
    blob_bytes` bytes."""
    where = str(git_dir)
    line = b"an innocent line of a large generated file\n"
    blob = run_git(
        ["--git-dir", where, "hash-object", "-w", "--stdin"],
        stdin=(line * (blob_bytes // len(line) + 1))[:blob_bytes],
    ).text.strip()
    names = "".join(f"100644 blob {blob}\tf{n:05d}.txt\n" for n in range(paths))
    subtree = run_git(["--git-dir", where, "mktree"], stdin=names.encode()).text.strip()
    readme = git("--git-dir", where, "rev-parse", f"{base}:README.md")
    top = f"100644 blob {readme}\tREADME.md\n040000 tree {subtree}\tgenerated\n"
    tree = run_git(["--git-dir", where, "mktree"], stdin=top.encode()).text.strip()
    head = git("--git-dir", where, "commit-tree", tree, "-p", base, "-m", "generated files")
    git("--git-dir", where, "update-ref", "HEAD", head)
    git("--git-dir", where, "bundle", "create", "--quiet", str(out), "HEAD", "--not", base)
    return out.read_bytes()


class Tally:
    """The hostile cases a suite tried, and how each was answered: `refused(code, call)` runs
    a call that must be refused with `code` (a `LedgerError`, or over HTTP a problem with that
    code), `answered(...)` one the ledger takes (a control). `figures()` is what the suite
    records (`reliability_figures.record_figures`) and its docstring states."""

    def __init__(self) -> None:
        self.tried = 0
        self.codes: Counter[str] = Counter()
        self.controls = 0

    @property
    def refused_count(self) -> int:
        return sum(self.codes.values())

    def refused(self, code: str, call: Callable[[], Any], *, status: int | None = None) -> str:
        """Run `call`, which must be refused with `code`; its detail. A call answering an
        `httpx.Response` is held to the problem `code` with `status`."""
        self.tried += 1
        try:
            answer = call()
        except LedgerError as refusal:
            assert refusal.code == code, refusal
            assert str(refusal).startswith(code)
            self.codes[code] += 1
            return refusal.detail
        assert isinstance(answer, httpx.Response), f"{code} expected, the call answered {answer!r}"
        assert status is not None, "an HTTP refusal names its status"
        detail = problem(answer, status, code)
        self.codes[code] += 1
        return detail

    def answered(self, call: Callable[[], Any]) -> Any:
        """A control: a call the ledger must take."""
        self.controls += 1
        return call()

    def figures(self) -> dict[str, Any]:
        return {
            "tried": self.tried,
            "refused": self.refused_count,
            "controls": self.controls,
            "codes": dict(sorted(self.codes.items())),
        }
