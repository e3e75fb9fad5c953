"""What a proposal's objects may not hold: git's own `fsck` refusal, a symbolic link out of the
tree, and a gitlink the repository does not allow."""

from __future__ import annotations

import re
from collections.abc import Iterable

import attrs
from aios_ledger.core.errors import LedgerError

SYMLINK_MODE = "120000"
GITLINK_MODE = "160000"
# How git reports a failed object check: `error: object <oid>: <msg-id>: <message>`.
_FSCK_LINE = re.compile(r"^(?:error|warning): object ([0-9a-f]{40,64}): (\w+): (.*)$")


@attrs.frozen
class TreeEntry:
    """A tree entry a proposal's commit adds or changes, with a symbolic link's target."""

    path: str
    mode: str
    oid: str
    symlink_target: str | None = None


def fsck_refusal(report: str) -> LedgerError:
    """`BUNDLE_UNSAFE` naming the object and git's message id of the first problem reported."""
    for line in report.splitlines():
        found = _FSCK_LINE.match(line.strip())
        if found:
            oid, message_id, message = found.groups()
            return LedgerError(
                "BUNDLE_UNSAFE", f"git fsck refuses object {oid}: {message_id}: {message.strip()}"
            )
    lines = [line.strip() for line in report.splitlines() if line.strip()]
    return LedgerError(
        "BUNDLE_UNSAFE", f"git fsck refuses the bundle: {lines[-1] if lines else 'no reason'}"
    )


def symlink_escapes(path: str, target: str) -> bool:
    """Whether the link at `path` points outside the tree at any step."""
    if target.startswith("/"):
        return True
    depth = path.count("/")
    for component in target.split("/"):
        if component == "..":
            depth -= 1
            if depth < 0:
                return True
        elif component not in ("", "."):
            depth += 1
    return False


def require_safe_entries(entries: Iterable[TreeEntry], *, allow_gitlinks: bool) -> None:
    """`BUNDLE_UNSAFE` for the first entry (by path) that may not be written."""
    for entry in sorted(entries, key=lambda entry: (entry.path, entry.oid)):
        if entry.mode == GITLINK_MODE and not allow_gitlinks:
            problem = (
                f"{entry.path!r} is a gitlink (submodule commit {entry.oid}) and the repository "
                "does not allow gitlinks"
            )
        elif entry.mode == SYMLINK_MODE and symlink_escapes(entry.path, entry.symlink_target or ""):
            problem = (
                f"{entry.path!r} is a symbolic link out of the tree (to {entry.symlink_target!r}, "
                f"blob {entry.oid})"
            )
        else:
            continue
        raise LedgerError("BUNDLE_UNSAFE", f"{problem}: remove it from the proposal's commits")
