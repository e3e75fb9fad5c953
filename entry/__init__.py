"""The `aios-ledger` console script: the command line under a Ctrl-C guard from its first instant.

Importing the command line takes a while (the core, the shell, their libraries); a SIGINT then
would end in a traceback, since `shell.cli.main`'s own guard is not running yet. This package
imports nothing of the ledger until `main` runs, inside the guard, so that a Ctrl-C at any
moment ends the command with `INTERRUPTED` and exit status 130, never a traceback.
"""

from __future__ import annotations

import sys

EXIT_INTERRUPTED = 130


def main() -> int:
    try:
        from aios_ledger.shell.cli import main as command_line

        return command_line()
    except KeyboardInterrupt:
        sys.stderr.write("INTERRUPTED: stopped by the user\n")
        return EXIT_INTERRUPTED
