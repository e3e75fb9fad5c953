"""The `aios-ledger` console script: the command line under a Ctrl-C guard from its first instant.

Importing the command line takes a while (the core, the shell, their libraries); a SIGINT then
would end in a traceback, since `shell.cli.main`'s own guard is not running yet. This package
imports nothing of the ledger until `main` runs, and while it imports, a Ctrl-C is only noted:
a KeyboardInterrupt raised inside the import machinery can land in one of its callbacks, where
Python prints it as an ignored exception and carries on. Noted, it ends the command with
`INTERRUPTED` and exit status 130 once the imports are done, never with a traceback.
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
