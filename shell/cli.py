"""The `aios-ledger` command line: JSON on stdout (tables on a terminal), `CODE: detail` on
stderr, non-zero on refusal (2 for a usage mistake).

Each capability adds its commands from its own module (`COMMAND_GROUPS`); this module holds only
the parser, the shared options, how `--help` groups the commands (`HELP_GROUPS`) and the error
boundary.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable, Sequence
from importlib.metadata import version

import argcomplete
from aios_ledger.core import LedgerError
from aios_ledger.core.config import SYNCHRONOUS_LEVELS
from aios_ledger.shell.api import cli as api_cli
from aios_ledger.shell.attest import cli as attest_cli
from aios_ledger.shell.cli_help import CommandGroup, attach_help
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
from aios_ledger.shell.completion_cli import register as register_completion
from aios_ledger.shell.config import CONFIG_ENV, CONFIG_FILE
from aios_ledger.shell.console import Shown, is_terminal, show
from aios_ledger.shell.db.connection import DEFAULT_PATH_ENV
from aios_ledger.shell.git import cli as git_cli
from aios_ledger.shell.log import cli as log_cli
from aios_ledger.shell.logs import LOG_FORMATS, LOG_LEVELS, configure_logging
from aios_ledger.shell.mcp import cli as mcp_cli
from aios_ledger.shell.projection import cli as projection_cli
from aios_ledger.shell.proofs import cli as proofs_cli
from aios_ledger.shell.runs import cli as runs_cli
from aios_ledger.shell.schemas_cli import register as register_schemas
from aios_ledger.shell.tasks import cli as tasks_cli
from aios_ledger.shell.tracing import start_tracing
from aios_ledger.shell.work import cli as work_cli

Register = Callable[["argparse._SubParsersAction[argparse.ArgumentParser]"], None]

# One group of commands per capability, each registered by its own module.
COMMAND_GROUPS: tuple[Register, ...] = (
    projection_cli.register,
    tasks_cli.register,
    runs_cli.register,
    work_cli.register,
    mcp_cli.register,
    log_cli.register,
    proofs_cli.register,
    git_cli.register,
    attest_cli.register,
    register_schemas,
    api_cli.register,
    register_completion,
)

# How `aios-ledger --help` lists the commands: by what a person is doing, not by the module that
# registers them. Every registered command is in exactly one group (tests/test_cli_help.py).
HELP_GROUPS: tuple[CommandGroup, ...] = (
    CommandGroup(
        "start here",
        "create a ledger, see where it stands, learn the files it reads",
        ("init", "status", "schema", "completion"),
    ),
    CommandGroup(
        "tasks",
        "enqueue, claim, submit and judge work; follow what happens",
        (
            "task",
            "claim",
            "heartbeat",
            "release",
            "submit",
            "cancel",
            "expire-leases",
            "events",
        ),
    ),
    CommandGroup(
        "workers and reviews",
        "run agents on tasks, review their results, the governed envelopes they run in",
        ("worker", "review", "mcp", "run", "aux", "binding", "project"),
    ),
    CommandGroup(
        "governed writes",
        "an accepted task's proposal written to its repository's branch",
        ("repo", "propose", "proposals", "write", "write-recover", "why", "verify-attestation"),
    ),
    CommandGroup(
        "the log",
        "check that no event was changed or removed, export and archive it",
        (
            "verify",
            "head",
            "prove",
            "verify-proof",
            "export",
            "verify-export",
            "archive",
            "verify-archive",
        ),
    ),
    CommandGroup(
        "the server",
        "the HTTP API for agents on other machines, and its tokens",
        ("serve", "token"),
    ),
    CommandGroup(
        "signed checkpoints",
        "sign the log's tree head for others to hold, and witness another ledger's",
        ("key", "checkpoint", "verify-checkpoint", "witness"),
    ),
    CommandGroup(
        "the database",
        "its schema and migrations, and moving a ledger to PostgreSQL",
        ("migrate", "schema-dump", "copy"),
    ),
)


def build_parser() -> argparse.ArgumentParser:
    # No abbreviations of the global options: `witness --log URL` is its own option, not a
    # prefix of --log-level.
    parser = Parser(
        prog="aios-ledger", description="A governed task ledger for AI agents.", allow_abbrev=False
    )
    parser.add_argument(
        "--version", action="version", version=f"aios-ledger {version('aios-ledger')}"
    )
    parser.add_argument(
        "--db", help=f"database file (default: ${DEFAULT_PATH_ENV} or ./{DEFAULT_DB})"
    )
    parser.add_argument(
        "--config",
        metavar="FILE",
        help=f"settings file (default: ${CONFIG_ENV}, else ./{CONFIG_FILE} if there is one)",
    )
    parser.add_argument(
        "--synchronous",
        choices=SYNCHRONOUS_LEVELS,
        help="how hard each commit syncs (default: FULL; config file: [database] synchronous)",
    )
    parser.add_argument(
        "--log-level",
        type=str.upper,
        choices=LOG_LEVELS,
        help="least level logged on stderr (default: INFO for worker and review, else WARNING)",
    )
    parser.add_argument(
        "--log-format",
        choices=LOG_FORMATS,
        default="text",
        help="text lines, or one JSON object per line (for services)",
    )
    parser.add_argument(
        "--no-migrate",
        action="store_true",
        help="leave the schema to the DBA: refuse a database that is behind (SCHEMA_TOO_OLD) "
        f"instead of migrating it; `init` and `migrate` still migrate (also: {MIGRATE_ENV}=0)",
    )
    commands: argparse._SubParsersAction[argparse.ArgumentParser]
    commands = parser.add_subparsers(
        dest="command",
        required=True,
        parser_class=Parser,
        metavar="COMMAND",
        help="one of the commands below",
    )
    for register in COMMAND_GROUPS:
        register(commands)
    attach_help(parser, HELP_GROUPS)
    return parser


# What a shell reports for a command killed by SIGPIPE (128 + 13).
EXIT_BROKEN_PIPE = 141


def main(argv: Sequence[str] | None = None) -> int:
    try:
        return _run(argv)
    except BrokenPipeError:
        # The reader went away (`events --follow | head -1`): nothing more to say, and the
        # interpreter's own flush of stdout at exit must not raise again.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return EXIT_BROKEN_PIPE


def _run(argv: Sequence[str] | None) -> int:
    try:
        parser = build_parser()
        # Under the shell's completion (_ARGCOMPLETE set) this prints the candidates and exits;
        # otherwise it does nothing.
        argcomplete.autocomplete(parser)
        args = parser.parse_args(argv)
        level = args.log_level or getattr(args, "default_log_level", "WARNING")
        configure_logging(level, args.log_format)
        # Off unless the OpenTelemetry environment asks for traces (docs/observability.md).
        start_tracing(f"aios-ledger-{args.command}")
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
    if isinstance(result, Shown):
        if not args.json and is_terminal(sys.stdout):
            show(result, sys.stdout)
            return 0
        result = result.value
    if result is not None:
        emit(result)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
