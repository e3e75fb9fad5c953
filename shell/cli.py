"""The `aios-ledger` command line: JSON on stdout, `CODE: detail` on stderr, non-zero on refusal.

Each capability adds its commands from its own module (`COMMAND_GROUPS`); this module holds only
the parser, the shared options and the error boundary.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Callable, Sequence
from typing import Any, NoReturn

from aios_ledger.core import LedgerError

from .database import DEFAULT_PATH_ENV

DEFAULT_DB = "aios-ledger.db"
EXIT_REFUSED = 1
EXIT_USAGE = 2
MAX_INPUT_BYTES = 8 * 1024 * 1024 + 1  # more than any document may hold: read no further

Handler = Callable[[argparse.Namespace], Any]


class UsageError(LedgerError):
    pass


class _Parser(argparse.ArgumentParser):
    """argparse that reports a usage mistake as a coded error instead of exiting by itself."""

    def error(self, message: str) -> NoReturn:
        raise UsageError("USAGE_INVALID", message)


def emit(value: Any) -> None:
    sys.stdout.write(json.dumps(value, indent=2, sort_keys=True, ensure_ascii=True) + "\n")


def database_path(args: argparse.Namespace) -> str:
    return str(args.db or os.environ.get(DEFAULT_PATH_ENV) or DEFAULT_DB)


def read_json_argument(source: str) -> Any:
    """Read a JSON document from a file path, or from stdin when the path is `-`."""
    from aios_ledger.core import loads_document

    try:
        if source == "-":
            data = sys.stdin.buffer.read(MAX_INPUT_BYTES)
        else:
            with open(source, "rb") as handle:
                data = handle.read(MAX_INPUT_BYTES)
    except OSError as exc:
        raise LedgerError("INPUT_UNREADABLE", f"{source[:200]!r}: {exc.strerror or exc}") from None
    except ValueError:  # a NUL in the path
        raise LedgerError("INPUT_UNREADABLE", f"{source[:200]!r} is not a usable path") from None
    return loads_document(data, what=repr(source[:200]))


def build_parser() -> argparse.ArgumentParser:
    from .cli_commands import COMMAND_GROUPS

    parser = _Parser(prog="aios-ledger", description="A governed task ledger for AI agents.")
    parser.add_argument(
        "--db", help=f"database file (default: ${DEFAULT_PATH_ENV} or ./{DEFAULT_DB})"
    )
    commands: argparse._SubParsersAction[argparse.ArgumentParser]
    commands = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)
    for register in COMMAND_GROUPS:
        register(commands)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    try:
        args = build_parser().parse_args(argv)
        handler: Handler = args.handler
        result = handler(args)
    except LedgerError as refused:
        sys.stderr.write(f"{refused}\n")
        return EXIT_USAGE if isinstance(refused, UsageError) else EXIT_REFUSED
    except KeyboardInterrupt:
        sys.stderr.write("INTERRUPTED: stopped by the user\n")
        return 130
    if isinstance(result, int):
        return result
    if result is not None:
        emit(result)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
