"""The `aios-ledger` command line: JSON on stdout (tables on a terminal), `CODE: detail` on
stderr, non-zero on refusal (2 for a usage mistake). Each capability registers its commands from
its own module (`COMMAND_GROUPS`); this one holds the shared options and the error boundary.
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
from collections.abc import Sequence
from typing import Any

import argcomplete
from aios_ledger.core import LedgerError
from aios_ledger.core.wal_checkpoints import SYNCHRONOUS_LEVELS
from aios_ledger.shell.actors import ACTOR_ENV, process_acting_as
from aios_ledger.shell.cli_help import CommandGroup, attach_help
from aios_ledger.shell.cli_support import (
    DEFAULT_DB,
    EXIT_REFUSED,
    EXIT_USAGE,
    MIGRATE_ENV,
    Handler,
    Parser,
    UsageError,
    command_line_actor,
    emit,
)
from aios_ledger.shell.config import CONFIG_ENV, CONFIG_FILE
from aios_ledger.shell.console import Shown, is_terminal, show
from aios_ledger.shell.db.connection import DEFAULT_PATH_ENV
from aios_ledger.shell.logs import LOG_FORMATS, LOG_LEVELS, configure_logging
from aios_ledger.shell.tracing import start_tracing, stop_tracing

# The commands of two modules, which `--help` lists together too (with `events`, and without
# `copy`, which it lists with the database's).
TASK_COMMANDS = ("task", "claim", "heartbeat", "release", "submit", "cancel", "expire-leases")
LOG_COMMANDS = (
    "verify",
    "head",
    "prove",
    "integrate",
    "verify-proof",
    "export",
    "verify-export",
    "archive",
    "verify-archive",
)
# A process imports only the module of the command it runs, so that it starts quickly.
COMMAND_GROUPS: tuple[tuple[str, tuple[str, ...]], ...] = (
    (
        "aios_ledger.shell.projection.cli",
        ("init", "migrate", "upgrade", "binding", "project", "events", "schema-dump"),
    ),
    ("aios_ledger.shell.tasks.cli", TASK_COMMANDS),
    ("aios_ledger.shell.runs.cli", ("run", "aux")),
    ("aios_ledger.shell.work.cli", ("worker", "review", "status")),
    ("aios_ledger.shell.mcp.cli", ("mcp",)),
    ("aios_ledger.shell.log.cli", (*LOG_COMMANDS, "copy")),
    ("aios_ledger.shell.proofs.cli", ("key", "checkpoint", "verify-checkpoint", "witness")),
    ("aios_ledger.shell.git.cli", ("repo", "propose", "proposals")),
    ("aios_ledger.shell.governed.cli", ("write", "write-recover")),
    ("aios_ledger.shell.attest.cli", ("why", "verify-attestation")),
    ("aios_ledger.shell.schemas_cli", ("schema",)),
    ("aios_ledger.shell.serve.cli", ("serve",)),
    ("aios_ledger.shell.api.cli", ("token",)),
    ("aios_ledger.shell.completion_cli", ("completion",)),
)

# `--help` lists the commands by what a person is doing, not by the module that registers them.
HELP_GROUPS: tuple[CommandGroup, ...] = (
    CommandGroup(
        "start here",
        "create a ledger, see where it stands, learn the files it reads",
        ("init", "status", "schema", "completion"),
    ),
    CommandGroup(
        "tasks",
        "enqueue, claim, submit and judge work; follow what happens",
        (*TASK_COMMANDS, "events"),
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
        LOG_COMMANDS,
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
        ("migrate", "upgrade", "schema-dump", "copy"),
    ),
)


class VersionAction(argparse.Action):
    """`--version`, reading the installed version only when asked: importlib.metadata is slow."""

    def __init__(self, option_strings: Sequence[str], dest: str, **_: Any) -> None:
        super().__init__(
            option_strings,
            dest=argparse.SUPPRESS,
            default=argparse.SUPPRESS,
            nargs=0,
            help="show program's version number and exit",
        )

    def __call__(
        self,
        parser: argparse.ArgumentParser,
        namespace: argparse.Namespace,
        values: object,
        option_string: str | None = None,
    ) -> None:
        from importlib.metadata import version

        sys.stdout.write(f"aios-ledger {version('aios-ledger')}\n")
        parser.exit()


def build_parser(argv: Sequence[str] | None = None) -> argparse.ArgumentParser:
    """The parser of every command, or given `argv`, of the one group that holds the command
    it names."""
    # No abbreviations: `witness --log URL` is its own option, not a prefix of --log-level.
    parser = Parser(
        prog="aios-ledger", description="A governed task ledger for AI agents.", allow_abbrev=False
    )
    parser.add_argument("--version", action=VersionAction)
    parser.add_argument(
        "--db", help=f"database file (default: ${DEFAULT_PATH_ENV} or ./{DEFAULT_DB})"
    )
    parser.add_argument(
        "--config",
        metavar="FILE",
        help=f"settings file (default: ${CONFIG_ENV}, else ./{CONFIG_FILE} if there is one)",
    )
    parser.add_argument(
        "--as",
        dest="acting_as",
        metavar="NAME",
        help=f"who you are, as every event you write records it (declared, unauthenticated; "
        f"default: ${ACTOR_ENV}, else [identity] actor, else your user name)",
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
    command = None if argv is None else command_named(parser, argv)
    groups = [group for group in COMMAND_GROUPS if command in group[1]] or COMMAND_GROUPS
    for module, _ in groups:
        importlib.import_module(module).register(commands)
    registered = set(commands.choices)
    attach_help(
        parser,
        [
            CommandGroup(
                group.title,
                group.purpose,
                tuple(name for name in group.commands if name in registered),
            )
            for group in HELP_GROUPS
        ],
    )
    return parser


def command_named(parser: argparse.ArgumentParser, argv: Sequence[str]) -> str | None:
    """The command `argv` names past the global options; None when every command is needed
    (help, an unknown option, tab completion)."""
    if "_ARGCOMPLETE" in os.environ:
        return None
    takes_value = {
        option
        for action in parser._actions
        if action.nargs != 0
        for option in action.option_strings
    }
    flags = {
        option
        for action in parser._actions
        if action.nargs == 0 and not isinstance(action, (argparse._HelpAction, VersionAction))
        for option in action.option_strings
    }
    arguments = iter(argv)
    for argument in arguments:
        if argument in takes_value:
            next(arguments, None)
        elif argument.partition("=")[0] in takes_value and "=" in argument:
            continue
        elif argument not in flags:
            return None if argument.startswith("-") else argument
    return None


# What a shell reports for a command killed by SIGPIPE (128 + 13).
EXIT_BROKEN_PIPE = 141


def main(argv: Sequence[str] | None = None) -> int:
    try:
        return _run(argv)
    except BrokenPipeError:
        # The reader went away; the interpreter's own flush of stdout must not raise again.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return EXIT_BROKEN_PIPE


def _run(argv: Sequence[str] | None) -> int:
    try:
        arguments = sys.argv[1:] if argv is None else list(argv)
        parser = build_parser(arguments)
        # Under the shell's completion this prints the candidates and exits.
        argcomplete.autocomplete(parser)
        args = parser.parse_args(arguments)
        level = args.log_level or getattr(args, "default_log_level", "WARNING")
        configure_logging(level, args.log_format)
        # Off unless the OpenTelemetry environment asks for traces (docs/observability.md).
        start_tracing(f"aios-ledger-{args.command}")
        handler: Handler = args.handler
        try:
            with process_acting_as(lambda: command_line_actor(args)):
                result = handler(args)
        finally:
            stop_tracing()
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
