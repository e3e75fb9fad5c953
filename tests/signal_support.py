"""Children a test interrupts (SIGINT, as Ctrl-C would), started with SIGINT at its default.

A job that a non-interactive shell starts in the background (`make test &`, `setsid bash .ci/run
&`) has SIGINT and SIGQUIT ignored, and its children keep that through exec; Python then
installs no KeyboardInterrupt handler, so a child the test interrupts would go on running, as
POSIX means it to for such a job (the command line honours it: it never takes over an ignored
SIGINT). A test that sends SIGINT therefore sets the child's disposition itself, so that the
suite passes however it was started.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence

# Runs before the child's program, in the same process (exec keeps the pid): a wrapper rather
# than Popen's preexec_fn, which is unsafe in a process with threads (pytest-xdist's workers).
_DEFAULT_SIGINT_THEN_EXEC = (
    "import os, signal, sys; "
    "signal.signal(signal.SIGINT, signal.SIG_DFL); "
    "os.execv(sys.argv[1], sys.argv[1:])"
)


def interruptible(argv: Sequence[str]) -> list[str]:
    """`argv` (its program an absolute path) run with SIGINT at its default disposition."""
    return [sys.executable, "-I", "-S", "-c", _DEFAULT_SIGINT_THEN_EXEC, *argv]
