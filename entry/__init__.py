"""The `aios-ledger` console script: the command line under a Ctrl-C guard from its first instant.

Importing the command line takes a while, and a KeyboardInterrupt raised inside the import
machinery can land where Python prints it and carries on; so a Ctrl-C during the imports is only
noted, and ends the command with `INTERRUPTED` (exit status 130) once they are done.
"""

from __future__ import annotations

import signal
import sys
from types import FrameType

EXIT_INTERRUPTED = 130


def interrupted_by_the_user() -> int:
    sys.stderr.write("INTERRUPTED: stopped by the user\n")
    return EXIT_INTERRUPTED


def main() -> int:
    interrupted = False

    def note_the_interrupt(_signum: int, _frame: FrameType | None) -> None:
        nonlocal interrupted
        interrupted = True

    previous = signal.getsignal(signal.SIGINT)
    # A SIGINT the parent told us to ignore stays ignored.
    if previous is signal.default_int_handler:
        signal.signal(signal.SIGINT, note_the_interrupt)
    try:
        from aios_ledger.shell.cli import main as command_line
    finally:
        signal.signal(signal.SIGINT, previous)
    if interrupted:
        return interrupted_by_the_user()
    try:
        return command_line()
    except KeyboardInterrupt:
        return interrupted_by_the_user()
