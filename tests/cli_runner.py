"""The command line run in this process, as a user types it: `run_cli("--db", db, "status")`.

Starting an interpreter costs a test a third of a second of CPU, and most tests that use the
command line are not about the process: they call `main(argv)` here instead, with stdout,
stderr, stdin, the environment and the working directory of their own for the call. The answer
has the fields of `subprocess.CompletedProcess` that tests read, so that a test moves from one to
the other by its import. Tests whose subject is the process (signals, exit codes of a killed
child, timeouts, import time) keep starting one.
"""

from __future__ import annotations

import contextlib
import io
import os
import sys
from collections.abc import Iterator, Mapping
from pathlib import Path

import attrs
from aios_ledger.shell.cli import main


@attrs.frozen
class CliResult:
    args: tuple[str, ...]
    returncode: int
    stdout: str
    stderr: str


class _Output(io.TextIOWrapper):
    """A text stream with a `buffer` of bytes, like the one a process's stdout is, and never a
    terminal."""

    def __init__(self) -> None:
        super().__init__(io.BytesIO(), encoding="utf-8", errors="replace", write_through=True)

    def text(self) -> str:
        self.flush()
        buffer = self.buffer
        assert isinstance(buffer, io.BytesIO)
        return buffer.getvalue().decode("utf-8", errors="replace")


def _input(data: str | bytes | None) -> io.TextIOWrapper:
    raw = data.encode() if isinstance(data, str) else (data or b"")
    return io.TextIOWrapper(io.BytesIO(raw), encoding="utf-8")


@contextlib.contextmanager
def _environment(env: Mapping[str, str] | None) -> Iterator[None]:
    """`env` replaces the whole environment for the call, as `subprocess.run(env=...)` does."""
    if env is None:
        yield
        return
    saved = dict(os.environ)
    os.environ.clear()
    os.environ.update(env)
    try:
        yield
    finally:
        os.environ.clear()
        os.environ.update(saved)


@contextlib.contextmanager
def _directory(cwd: str | Path | None) -> Iterator[None]:
    if cwd is None:
        yield
        return
    saved = os.getcwd()
    os.chdir(cwd)
    try:
        yield
    finally:
        os.chdir(saved)


def run_cli(
    *args: str | Path,
    env: Mapping[str, str] | None = None,
    input: str | bytes | None = None,
    cwd: str | Path | None = None,
) -> CliResult:
    """`aios-ledger ARGS...` in this process: its exit status and what it wrote."""
    argv = tuple(str(arg) for arg in args)
    stdout, stderr = _Output(), _Output()
    saved = sys.stdin, sys.stdout, sys.stderr
    sys.stdin, sys.stdout, sys.stderr = _input(input), stdout, stderr
    try:
        with _environment(env), _directory(cwd):
            try:
                status = main(list(argv))
            except SystemExit as exited:  # argparse's usage errors and --help
                code = exited.code
                status = code if isinstance(code, int) else (0 if code is None else 2)
    finally:
        sys.stdin, sys.stdout, sys.stderr = saved
    return CliResult(argv, status, stdout.text(), stderr.text())
