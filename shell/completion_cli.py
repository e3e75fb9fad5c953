"""`aios-ledger completion bash|zsh|fish`: the script a shell sources for argcomplete's tab
completion, which `main` answers from the very parser it would use."""

from __future__ import annotations

import argparse
import sys

from argcomplete.shell_integration import shellcode

SHELLS = ("bash", "zsh", "fish")


def register(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    completion = commands.add_parser(
        "completion", help="print the tab-completion script of a shell (bash, zsh or fish)"
    )
    completion.add_argument("shell", choices=SHELLS, help="the shell to complete in")
    completion.set_defaults(handler=_completion)


def _completion(args: argparse.Namespace) -> int:
    sys.stdout.write(shellcode(["aios-ledger"], shell=args.shell))
    return 0
