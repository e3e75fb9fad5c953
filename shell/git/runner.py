"""git as a subprocess: an argv list, never a shell; a clean environment; bounded.

No inherited `GIT_*` variable, system or global configuration, hooks, prompt or pager reaches
a git of ours, so that nobody's configuration runs code as the ledger.
"""

from __future__ import annotations

import os
import subprocess
import tempfile
import threading
from collections.abc import Iterator, Mapping, Sequence
from functools import lru_cache
from typing import IO

import attrs
from aios_ledger.core import LedgerError

GIT = "git"
DEFAULT_TIMEOUT = 60.0
DEFAULT_MAX_OUTPUT = 16 * 1024 * 1024
STDERR_TAIL = 2000
# What a git of ours never takes from its caller's configuration.
SAFE_CONFIG = (
    "core.hooksPath=/dev/null",
    "core.fsmonitor=false",
    "core.pager=cat",
    "credential.helper=",
    "protocol.allow=never",
    "protocol.file.allow=always",
    "gc.auto=0",
    "maintenance.auto=false",
    "advice.detachedHead=false",
    "init.defaultBranch=main",
)
_KEPT = ("PATH", "LANG", "TZ", "TMPDIR")


@attrs.frozen
class GitResult:
    returncode: int
    stdout: bytes
    stderr: bytes

    @property
    def text(self) -> str:
        return self.stdout.decode("utf-8", "replace")


@lru_cache(maxsize=1)
def _home() -> str:
    """An empty directory for git's HOME: no ~/.gitconfig of anyone's is read."""
    return tempfile.mkdtemp(prefix="aios-git-home-")


def clean_environment(extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """The environment every git runs in: PATH and locale from ours, nothing of git's."""
    return {
        **{name: os.environ[name] for name in _KEPT if name in os.environ},
        "HOME": _home(),
        "XDG_CONFIG_HOME": _home(),
        "GIT_CONFIG_NOSYSTEM": "1",
        "GIT_CONFIG_GLOBAL": os.devnull,
        "GIT_TERMINAL_PROMPT": "0",
        "GIT_ASKPASS": "/bin/false",
        "GIT_NO_REPLACE_OBJECTS": "1",
        "LC_ALL": "C",
        **(extra or {}),
    }


def _drain(pipe: IO[bytes], into: bytearray, limit: int, over: threading.Event) -> None:
    for chunk in iter(lambda: pipe.read(65536), b""):
        room = limit + 1 - len(into)
        if room > 0:
            into += chunk[:room]
        if len(into) > limit:
            over.set()


def run_git(
    args: Sequence[str],
    *,
    cwd: str | os.PathLike[str] | None = None,
    env: Mapping[str, str] | None = None,
    timeout: float = DEFAULT_TIMEOUT,
    max_output: int = DEFAULT_MAX_OUTPUT,
    check: bool = True,
    stdin: bytes | None = None,
    cut: bool = False,
) -> GitResult:
    """Run `git <args>`; `env` adds to the clean environment. Output past `max_output` is refused,
    or with `cut` dropped past `max_output + 1` bytes, so the caller can tell it was cut."""
    try:
        process = subprocess.Popen(
            [GIT, *(part for setting in SAFE_CONFIG for part in ("-c", setting)), *args],
            cwd=cwd,
            env=clean_environment(env),
            stdin=subprocess.PIPE if stdin is not None else subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            close_fds=True,
        )
    except OSError as exc:
        raise LedgerError("GIT_FAILED", f"cannot run git: {exc}") from None
    stdout, stderr = bytearray(), bytearray()
    over = threading.Event()
    assert process.stdout is not None and process.stderr is not None
    readers = [
        threading.Thread(target=_drain, args=(pipe, into, max_output, over), daemon=True)
        for pipe, into in ((process.stdout, stdout), (process.stderr, stderr))
    ]
    for reader in readers:
        reader.start()
    if stdin is not None and process.stdin is not None:
        try:
            process.stdin.write(stdin)
            process.stdin.close()
        except OSError:
            pass
    try:
        returncode = process.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()
        raise LedgerError("GIT_TIMEOUT", f"git {args[0]} took longer than {timeout:g}s") from None
    finally:
        for reader in readers:
            reader.join(timeout=5)
    if over.is_set() and not cut:
        raise LedgerError(
            "GIT_OUTPUT_TOO_LARGE", f"git {args[0]} wrote more than {max_output} bytes"
        )
    result = GitResult(returncode, bytes(stdout), bytes(stderr))
    if check and returncode != 0:
        tail = result.stderr.decode("utf-8", "replace").strip()[-STDERR_TAIL:]
        raise LedgerError("GIT_FAILED", f"git {args[0]} exited {returncode}: {tail}")
    return result


def check_ref_format(ref: str) -> str:
    """`ref` if git itself takes it as a full ref name."""
    if not ref.startswith("refs/") or ref.startswith("-"):
        raise LedgerError("REF_NAME_INVALID", f"{ref!r} is not a full ref name")
    if run_git(["check-ref-format", ref], check=False).returncode != 0:
        raise LedgerError("REF_NAME_INVALID", f"git refuses the ref name {ref!r}")
    return ref


def read_ref(git_dir: str, ref: str) -> str | None:
    """The object id `ref` points at, unpeeled, or None when it does not exist."""
    found = run_git(
        ["--git-dir", git_dir, "rev-parse", "--verify", "--quiet", "--end-of-options", ref],
        check=False,
    )
    if found.returncode != 0:
        return None
    return found.text.strip()


def list_refs(git_dir: str) -> list[str]:
    """The full names of every ref of the repository at `git_dir` (`for-each-ref`)."""
    listed = run_git(
        ["--git-dir", git_dir, "for-each-ref", "--format=%(refname)"], max_output=64 << 20
    )
    return listed.text.splitlines()


def is_ancestor(git_dir: str, ancestor: str, descendant: str) -> bool:
    found = run_git(
        ["--git-dir", git_dir, "merge-base", "--is-ancestor", ancestor, descendant], check=False
    )
    if found.returncode not in (0, 1):
        raise LedgerError("GIT_FAILED", found.stderr.decode("utf-8", "replace")[-STDERR_TAIL:])
    return found.returncode == 0


def object_sizes(
    git_dir: str, oids: Sequence[str], *, kind: str | None = None, timeout: float = DEFAULT_TIMEOUT
) -> dict[str, int]:
    """The size of each object of `oids` there is (of type `kind`, when given)."""
    found = run_git(
        [
            "--git-dir",
            git_dir,
            "cat-file",
            "--batch-check=%(objectname) %(objecttype) %(objectsize)",
        ],
        stdin="".join(f"{oid}\n" for oid in oids).encode(),
        max_output=64 << 20,
        timeout=timeout,
    )
    sizes: dict[str, int] = {}
    for line in found.text.splitlines():
        oid, found_kind, size = [*line.split(" "), "", ""][:3]
        if size.isdigit() and kind in (None, found_kind):
            sizes[oid] = int(size)
    return sizes


def read_objects(
    git_dir: str, oids: Sequence[str], *, max_output: int, timeout: float = DEFAULT_TIMEOUT
) -> dict[str, tuple[str, bytes]]:
    """The type and content of each object of `oids` there is, read in one `cat-file --batch`."""
    out = run_git(
        ["--git-dir", git_dir, "cat-file", "--batch"],
        stdin="".join(f"{oid}\n" for oid in oids).encode(),
        max_output=max_output,
        timeout=timeout,
    ).stdout
    objects: dict[str, tuple[str, bytes]] = {}
    at = 0
    for oid in oids:
        header_end = out.index(b"\n", at)
        header = out[at:header_end].decode("ascii", "replace").split(" ")
        at = header_end + 1
        if len(header) == 3:  # else `<oid> missing`, and no content follows
            size = int(header[2])
            objects[oid] = (header[1], out[at : at + size])
            at += size + 1
    return objects


def raw_diff(raw: bytes) -> Iterator[tuple[list[str], bytes]]:
    """The entries of `git diff-tree -z --raw`: the fields of `:MODE MODE OID OID STATUS`, and
    the path's bytes."""
    parts = raw.split(b"\0")
    for meta, name in zip(parts[0::2], parts[1::2], strict=False):
        yield meta.decode("ascii", "replace").lstrip(":").split(" "), name
