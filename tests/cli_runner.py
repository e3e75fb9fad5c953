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
import logging
import os
import signal
import sys
import threading
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
    """A text stream with a `buffer` of bytes, like the one a process's stdout is: a pipe, or
    with `terminal` a terminal as far as `isatty()` tells (the command line draws tables and
    progress bars only there)."""

    def __init__(self, *, terminal: bool = False) -> None:
        super().__init__(io.BytesIO(), encoding="utf-8", errors="replace", write_through=True)
        self._terminal = terminal

    def isatty(self) -> bool:
        return self._terminal

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
def _logging_of_a_new_process() -> Iterator[None]:
    """Logging as a new interpreter has it for the call, and this process's back after it.

    With no handler on the root logger, a library's warning reaches the call's stderr through
    logging's last resort, as it does in a process of its own (pytest's capture would take it
    otherwise); the command line's own handler on `aios_ledger` is undone afterwards, so that
    it does not write to a stream of a call that has ended.
    """
    loggers = (logging.getLogger(), logging.getLogger("aios_ledger"))
    saved = [(logger.handlers[:], logger.level, logger.propagate) for logger in loggers]
    logging.getLogger().handlers.clear()
    logging.getLogger().setLevel(logging.WARNING)
    try:
        yield
    finally:
        for logger, (handlers, level, propagate) in zip(loggers, saved, strict=True):
            logger.handlers[:] = handlers
            logger.setLevel(level)
            logger.propagate = propagate


@contextlib.contextmanager
def _signal_handlers_kept() -> Iterator[None]:
    """The handlers of SIGINT and SIGTERM back as they were after the call: a command that
    installs its own (the worker's stop) must not leave them in the test process."""
    if threading.current_thread() is not threading.main_thread():
        yield  # only the main thread can install one
        return
    saved = {number: signal.getsignal(number) for number in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield
    finally:
        for number, handler in saved.items():
            signal.signal(number, handler)


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
    terminal: bool = False,
) -> CliResult:
    """`aios-ledger ARGS...` in this process: its exit status and what it wrote, to pipes or
    (`terminal`) to a terminal, whose width a test gives in `COLUMNS`."""
    argv = tuple(str(arg) for arg in args)
    stdout, stderr = _Output(terminal=terminal), _Output(terminal=terminal)
    saved = sys.stdin, sys.stdout, sys.stderr
    sys.stdin, sys.stdout, sys.stderr = _input(input), stdout, stderr
    try:
        with (
            _environment(env),
            _directory(cwd),
            _logging_of_a_new_process(),
            _signal_handlers_kept(),
        ):
            try:
                status = main(list(argv))
            except SystemExit as exited:  # argparse's usage errors and --help
                code = exited.code
                status = code if isinstance(code, int) else (0 if code is None else 2)
    finally:
        sys.stdin, sys.stdout, sys.stderr = saved
    return CliResult(argv, status, stdout.text(), stderr.text())
