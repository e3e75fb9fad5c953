"""The agent's guard: a small process between the worker and the agent's command, so that the
agent never outlives its worker, even a worker killed by SIGKILL.

The guard leads the process group the command stays in, and SIGKILLs that group when the kernel
tells it the worker died (`PR_SET_PDEATHSIG`). It is a process, not a `preexec_fn`, which is
unsafe in a threaded program, and imports only the standard library to start quickly.
"""

from __future__ import annotations

import ctypes
import os
import signal
import subprocess
import sys
from collections.abc import Sequence
from types import FrameType

PR_SET_PDEATHSIG = 1
# Sent when the worker dies: not SIGKILL (the guard must live to kill its group), nor the stop
# signals the worker sends to the group.
WORKER_GONE = signal.SIGUSR1
# Exit statuses of the guard itself, as `env` and shells use them.
GUARD_FAILED = 125
NOT_STARTED = 127


def guarded(command: Sequence[str], *, parent: int) -> list[str]:
    """The argv that runs `command` under a guard bound to the process `parent`."""
    return [sys.executable, "-I", "-S", os.path.abspath(__file__), str(parent), "--", *command]


def _kill_group(_signum: int = 0, _frame: FrameType | None = None) -> None:
    os.killpg(os.getpgid(0), signal.SIGKILL)


def _stay(_signum: int, _frame: FrameType | None) -> None:
    """SIGTERM and SIGINT reach the whole group: the command has them too. The guard stays to
    report how the command ended."""


def _bind_to_parent(parent: int) -> None:
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(PR_SET_PDEATHSIG, int(WORKER_GONE), 0, 0, 0) != 0:
        error = ctypes.get_errno()
        print(f"guard: prctl(PR_SET_PDEATHSIG): {os.strerror(error)}", file=sys.stderr)
        sys.exit(GUARD_FAILED)
    # The worker may have died before the request took effect; then no signal will come.
    if os.getppid() != parent:
        _kill_group()


def _end_as(returncode: int) -> None:
    if returncode < 0:
        if -returncode != signal.SIGKILL:
            signal.signal(-returncode, signal.SIG_DFL)
        os.kill(os.getpid(), -returncode)
        returncode = 128 - returncode  # a signal the guard survives ends it like a shell
    sys.exit(returncode)


def main(argv: Sequence[str]) -> None:
    if len(argv) < 3 or argv[1] != "--" or not argv[0].isdigit():
        print("usage: guard.py PARENT_PID -- COMMAND...", file=sys.stderr)
        sys.exit(GUARD_FAILED)
    if os.getpgid(0) != os.getpid():
        os.setpgid(0, 0)  # the group it kills must be its own, however it was started
    signal.signal(WORKER_GONE, _kill_group)
    signal.signal(signal.SIGTERM, _stay)
    signal.signal(signal.SIGINT, _stay)
    _bind_to_parent(int(argv[0]))
    try:
        command = subprocess.Popen(argv[2:])
    except OSError as exc:
        print(f"guard: cannot start {argv[2]!r}: {exc}", file=sys.stderr)
        sys.exit(NOT_STARTED)
    # The guard's copies of the pipes would hold them open after the command closed them.
    devnull = os.open(os.devnull, os.O_RDWR)
    os.dup2(devnull, 0)
    os.dup2(devnull, 1)
    _end_as(command.wait())


if __name__ == "__main__":
    main(sys.argv[1:])
