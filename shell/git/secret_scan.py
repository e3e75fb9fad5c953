"""The secret scan of a proposal: every commit after the base, each against its first parent
(so a secret a later commit removes is still found), and its message and identities.

The byte budget is charged path by path before anything is read, so a bundle bomb (one blob
under many names) is refused from its tree listing alone; each distinct blob is read once.
"""

from __future__ import annotations

import contextlib
import math
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import attrs
from aios_ledger.core import LedgerError
from aios_ledger.core.git.requests import MAX_SECRETS
from aios_ledger.core.git.secrets import (
    MAX_DECODE_DEPTH,
    ScanBudget,
    decode_run,
    encoded_runs,
    line_windows,
    readable_text,
)
from aios_ledger.shell.git.runner import object_sizes, raw_diff, read_objects, run_git

# Lines read by `detect-secrets` in one call; the seconds are checked between calls.
LINES_PER_PIECE = 256
# Lines before a piece given with it, for its filters' context (an allowlist comment above).
CONTEXT_LINES = 5
# File modes whose blob is content (regular files and symbolic links' targets).
CONTENT_MODES = ("100644", "100755", "120000")
# detect-secrets keeps its settings in a module global: one scan at a time per process.
_SCANNER = threading.Lock()


def git_config_settings(repository_path: str) -> dict[str, str]:
    """The `aios-ledger.*` keys left in the repository's git config, which are no longer read."""
    found = run_git(
        ["--git-dir", repository_path, "config", "--get-regexp", r"^aios-ledger\."], check=False
    )
    lines = found.text.splitlines()
    return {key: value for key, _, value in (line.partition(" ") for line in lines)}


@attrs.frozen
class ScanReport:
    """What the scan found, the baseline it held the findings to, and what it spent."""

    secrets: list[dict[str, Any]]
    baseline_sha256: str | None
    scan_bytes: int = 0
    scan_seconds: float = 0.0


def check_baseline_loads(baseline: dict[str, Any]) -> None:
    """`REPOSITORY_SETTING_INVALID` unless `detect-secrets` takes the baseline as a scan will."""
    from detect_secrets.settings import transient_settings

    with _SCANNER:
        try:
            with transient_settings(baseline):
                _known(baseline)
        except Exception as exc:  # detect-secrets raises what it likes on a bad document
            raise LedgerError(
                "REPOSITORY_SETTING_INVALID",
                f"secrets_baseline: detect-secrets cannot load it ({type(exc).__name__}:"
                f" {str(exc)[:200]}): give a detect-secrets baseline"
                " (`detect-secrets scan > FILE`)",
            ) from None


def commits_after(
    git_dir: str, tips: list[str], base: str, timeout: float
) -> list[tuple[str, str]]:
    """Each commit of `tips` not in `base`, with its first parent ('' for a root commit)."""
    listed = run_git(
        ["--git-dir", git_dir, "rev-list", "--parents", *tips, "--not", base],
        max_output=64 << 20,
        timeout=timeout,
    )
    listed_ids = [line.split() for line in listed.text.splitlines()]
    return [(ids[0], ids[1] if len(ids) > 1 else "") for ids in listed_ids if ids]


def added_by_commits(
    git_dir: str, commits: list[tuple[str, str]], timeout: float
) -> list[tuple[str, str, bytes]]:
    """Every entry each commit adds or changes against its first parent: (mode, blob, path)."""
    if not commits:
        return []
    diff_tree = ["diff-tree", "--stdin", "--root", "-r", "-z", "--no-renames", "--no-commit-id"]
    raw = run_git(
        ["--git-dir", git_dir, *diff_tree, "--raw"],
        stdin="".join(f"{commit} {parent}".strip() + "\n" for commit, parent in commits).encode(),
        max_output=256 << 20,
        timeout=timeout,
    ).stdout
    return [
        (meta[1], meta[3], name)
        for meta, name in raw_diff(raw)
        if len(meta) >= 5 and not meta[4].startswith("D")
    ]


class _Scan:
    """One proposal's scan under its budget: `detect-secrets` over each document's lines, then
    over what its encoded runs decode to; and what it spent, less the time it waited for another
    proposal's scan (`waited`), which is not its own cost."""

    def __init__(self, budget: ScanBudget, clock: Callable[[], float]) -> None:
        self.budget = budget
        self.clock = clock
        self.started = clock()
        # When reading began: the budget's seconds count from then while documents are read.
        self.reading = self.started
        self.waited = 0.0
        self.spent_bytes = 0

    def spent(self) -> ScanSpent:
        """Its seconds as they are recorded: to the millisecond, rounded up (any scan costs one)."""
        seconds = max(0.0, self.clock() - self.started - self.waited)
        return ScanSpent(self.spent_bytes, math.ceil(seconds * 1000) / 1000)

    def read(self, label: str, data: bytes, depth: int = 0) -> Iterator[Any]:
        """The potential secrets of `data` read as the file `label`, each once."""
        from detect_secrets.core.scan import _process_line_based_plugins

        text = readable_text(data)
        lines = text.splitlines()
        seen: set[tuple[str, int, str | None]] = set()
        for start in range(0, len(lines), LINES_PER_PIECE):
            self.budget.require_seconds(self.clock() - self.reading)
            numbered = [
                (number, window)
                for number in range(max(0, start - CONTEXT_LINES), start + LINES_PER_PIECE)
                if number < len(lines)
                for window in line_windows(lines[number])
            ]
            for secret in _process_line_based_plugins(
                [(number + 1, line) for number, line in numbered], filename=label
            ):
                key = (str(secret.type), int(secret.line_number), secret.secret_hash)
                if key not in seen:
                    seen.add(key)
                    yield secret
        if depth >= MAX_DECODE_DEPTH:
            return
        decoded_runs: set[str] = set()
        for line, run in encoded_runs(text):
            if run in decoded_runs:
                continue
            decoded_runs.add(run)
            inner = decode_run(run)
            if not inner:
                continue
            self.spent_bytes += len(inner)
            self.budget.require_bytes(self.spent_bytes)
            for secret in self.read(label, inner, depth + 1):
                secret.line_number = line
                secret.type = f"{secret.type} (encoded)"
                yield secret


def _known(baseline: dict[str, Any] | None) -> set[Any]:
    if baseline is None:
        return set()
    from detect_secrets.core.secrets_collection import SecretsCollection

    collection = SecretsCollection.load_from_baseline(baseline)
    return {secret for filename in collection.files for secret in collection[filename]}


# The refusals of a scan over its budget: what it cost until then is charged to its agent.
BUDGET_REFUSALS = frozenset({"SCAN_BUDGET_EXCEEDED", "AGENT_SCAN_BUDGET_EXCEEDED"})


@attrs.frozen
class ScanSpent:
    """What a scan refused over its budget had spent when it stopped (see `spent_of`)."""

    scan_bytes: int
    scan_seconds: float


def spent_of(refused: LedgerError) -> ScanSpent | None:
    """What the scan a budget refusal stopped had cost (None: not a scan's refusal)."""
    found = getattr(refused, "scan_spent", None)
    return found if isinstance(found, ScanSpent) else None


def scan_proposal(
    git_dir: str,
    tips: list[str],
    base: str,
    budget: ScanBudget,
    *,
    baseline: dict[str, Any] | None = None,
    baseline_sha256: str | None = None,
    clock: Callable[[], float] = time.monotonic,
) -> ScanReport:
    """The secrets in what the commits of `tips` not in `base` bring, held to `baseline`. A
    refusal over budget carries what the scan had spent until then (`spent_of`)."""
    scan = _Scan(budget, clock)
    try:
        findings = _scan(git_dir, tips, base, baseline, scan)
    except LedgerError as refused:
        if refused.code in BUDGET_REFUSALS:
            refused.scan_spent = scan.spent()  # type: ignore[attr-defined]
        raise
    spent = scan.spent()
    ordered = sorted(findings)[:MAX_SECRETS]
    return ScanReport(
        [{"path": path, "kind": kind, "line": line} for path, kind, line in ordered],
        baseline_sha256,
        scan_bytes=spent.scan_bytes,
        scan_seconds=spent.scan_seconds,
    )


def _scan(
    git_dir: str,
    tips: list[str],
    base: str,
    baseline: dict[str, Any] | None,
    scan: _Scan,
) -> set[tuple[str, str, int]]:
    budget, clock, started = scan.budget, scan.clock, scan.started

    def remaining() -> float:
        budget.require_seconds(clock() - started)
        return max(1.0, budget.max_seconds - (clock() - started))

    commits = commits_after(git_dir, tips, base, remaining())
    files = [
        (name.decode("utf-8", "backslashreplace"), oid)
        for mode, oid, name in added_by_commits(git_dir, commits, remaining())
        if mode in CONTENT_MODES
    ]
    commit_ids = [commit for commit, _parent in commits]
    blob_ids = sorted({oid for _path, oid in files})
    objects = [*commit_ids, *blob_ids]  # each once
    sizes = object_sizes(git_dir, objects, timeout=remaining())
    # Charged path by path: what the proposal asks to have read, not what reading it costs.
    brought = sum(sizes.get(oid, 0) for oid in [*commit_ids, *(oid for _path, oid in files)])
    budget.require_bytes(brought)
    limit = sum(sizes.get(oid, 0) for oid in objects) + 128 * len(objects) + 1024
    contents = read_objects(git_dir, objects, max_output=limit, timeout=remaining())
    # What is read: each commit (its own text), then each blob under the paths it is found at.
    labels: dict[str, list[str]] = {commit: [f"commit {commit}"] for commit in commit_ids}
    labels.update((oid, []) for oid in blob_ids)
    for path, oid in files:
        if path not in labels[oid]:
            labels[oid].append(path)
    commit_set = set(commit_ids)
    findings: set[tuple[str, str, int]] = set()
    asked = clock()
    with _SCANNER, contextlib.ExitStack() as configured:
        scan.reading = clock()
        scan.waited, scan.spent_bytes = scan.reading - asked, brought
        from detect_secrets.settings import default_settings, transient_settings

        try:
            configured.enter_context(
                default_settings() if baseline is None else transient_settings(baseline)
            )
            known = _known(baseline)
        except Exception as exc:  # a stored baseline this detect-secrets does not take
            raise LedgerError(
                "REPOSITORY_SETTING_INVALID",
                f"the repository's secrets_baseline cannot be loaded ({type(exc).__name__}):"
                " set another with `aios-ledger repo settings NAME --secrets-baseline FILE`",
            ) from None
        for oid, names in labels.items():
            data = contents[oid][1]
            if oid in commit_set:
                data = _commit_text(data)
            # Read once, found under every name the baseline does not know it by.
            for secret in scan.read(names[0], data):
                for label in names:
                    secret.filename = label
                    if secret not in known:
                        findings.add((label, str(secret.type), int(secret.line_number)))
    return findings


def _commit_text(raw: bytes) -> bytes:
    """A commit's text without the tree and parent ids git writes."""
    lines = raw.split(b"\n")
    kept = [line for line in lines if not line.startswith((b"tree ", b"parent "))]
    return b"\n".join(kept)
