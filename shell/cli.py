"""The `aios-ledger` command line: JSON on stdout, `CODE: detail` on stderr, non-zero on refusal.

Each capability adds its commands from its own module (`COMMAND_GROUPS`); this module holds only
the parser, the shared options and the error boundary.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence

from aios_ledger.core import LedgerError
from aios_ledger.shell import schemas_cli
from aios_ledger.shell.cli_support import (
    DEFAULT_DB,
    EXIT_REFUSED,
    EXIT_USAGE,
    MIGRATE_ENV,
    Handler,
    Parser,
    UsageError,
    emit,
)
from aios_ledger.shell.db.connection import DEFAULT_PATH_ENV
from aios_ledger.shell.log import cli as log_cli
from aios_ledger.shell.projection import cli as projection_cli
from aios_ledger.shell.runs import cli as runs_cli
from aios_ledger.shell.tasks import cli as tasks_cli
from aios_ledger.shell.work import cli as work_cli

Register = Callable[["argparse._SubParsersAction[argparse.ArgumentParser]"], None]

# One group of commands per capability, each registered by its own module.
COMMAND_GROUPS: tuple[Register, ...] = (
    projection_cli.register,
    tasks_cli.register,
    runs_cli.register,
    work_cli.register,
    log_cli.register,
    schemas_cli.register,
)


def build_parser() -> argparse.ArgumentParser:
    parser = Parser(prog="aios-ledger", description="A governed task ledger for AI agents.")
    parser.add_argument(
        "--db", help=f"database file (default: ${DEFAULT_PATH_ENV} or ./{DEFAULT_DB})"
    )
    parser.add_argument(
        "--no-migrate",
        action="store_true",
        help="leave the schema to the DBA: refuse a database that is behind (SCHEMA_TOO_OLD) "
        f"instead of migrating it; `init` and `migrate` still migrate (also: {MIGRATE_ENV}=0)",
    )
    commands: argparse._SubParsersAction[argparse.ArgumentParser]
    commands = parser.add_subparsers(dest="command", required=True, parser_class=Parser)
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
