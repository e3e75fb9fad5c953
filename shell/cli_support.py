"""What every command group shares: the database and the settings (flags over the config file
over built-in defaults), JSON in and out, usage errors."""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Callable, Sequence
from typing import Any, NoReturn, TypeVar

import attrs
from aios_ledger.core import LedgerError
from aios_ledger.core.actors import VIA_CLI, Actor
from aios_ledger.core.config import LedgerSettings
from aios_ledger.core.jsonvalue import loads_document
from aios_ledger.core.schemas import field_default
from aios_ledger.core.structuring import Problem, check_built, structure
from aios_ledger.shell.actors import ACTOR_ENV, declared_actor, declared_identity
from aios_ledger.shell.config import config_path, load_settings
from aios_ledger.shell.db.connection import DEFAULT_PATH_ENV, Database, engine_for

DEFAULT_DB = "aios-ledger.db"
MIGRATE_ENV = "AIOS_LEDGER_MIGRATE"
EXIT_REFUSED = 1
EXIT_USAGE = 2
MAX_INPUT_BYTES = 8 * 1024 * 1024 + 1  # more than any document may hold: read no further

Handler = Callable[[argparse.Namespace], Any]
S = TypeVar("S")


class UsageError(LedgerError):
    pass


class HelpFormatter(argparse.RawDescriptionHelpFormatter, argparse.ArgumentDefaultsHelpFormatter):
    """Every option's default in its help, unless it has none; the description and the epilog
    as written."""

    def _get_help_string(self, action: argparse.Action) -> str:
        default = action.default
        if default is None or default is False or default == []:
            return action.help or ""
        return super()._get_help_string(action) or ""


class Parser(argparse.ArgumentParser):
    """argparse that reports a usage mistake as a coded error instead of exiting by itself,
    and shows defaults in every `--help`."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("formatter_class", HelpFormatter)
        super().__init__(*args, **kwargs)

    def error(self, message: str) -> NoReturn:
        raise UsageError("USAGE_INVALID", message)


def json_flag(parser: argparse.ArgumentParser) -> None:
    """`--json` for a command that shows a table on a terminal: JSON there too."""
    parser.add_argument(
        "--json", action="store_true", help="print JSON even on a terminal (always JSON elsewhere)"
    )


def emit(value: Any) -> None:
    sys.stdout.write(json.dumps(value, indent=2, sort_keys=True, ensure_ascii=True) + "\n")


def ledger_settings(args: argparse.Namespace) -> LedgerSettings:
    """The config file's settings, read once per command, and only by commands that use them."""
    settings = getattr(args, "settings", None)
    if not isinstance(settings, LedgerSettings):
        settings = load_settings(config_path(getattr(args, "config", None)))
        args.settings = settings
    return settings


def command_line_actor(args: argparse.Namespace, default: str | None = None) -> Actor:
    """Who the command acts as, declared, so recorded as unauthenticated: `--as`, else the
    environment, else the config file, else `default`."""
    flag = getattr(args, "acting_as", None)
    if flag is not None or os.environ.get(ACTOR_ENV):
        name = declared_identity(flag)
    else:
        name = ledger_settings(args).identity.actor
    return declared_actor(VIA_CLI, name or default)


def _named_database(args: argparse.Namespace) -> str:
    configured = ledger_settings(args).database.path
    return str(args.db or os.environ.get(DEFAULT_PATH_ENV) or configured or DEFAULT_DB)


def database_path(args: argparse.Namespace) -> str:
    """The ledger the command works on, which must exist: a mistyped `--db` never creates a
    new, empty ledger (only `init` does)."""
    migrate_on_open(args)  # an unclear setting is a usage mistake, whatever the path
    path = _named_database(args)
    engine_for(path).require_ledger(path)
    return path


def new_database_path(args: argparse.Namespace) -> str:
    """The ledger `init` creates or migrates; its directory must exist."""
    path = _named_database(args)
    engine_for(path).require_creatable(path)
    return path


def migrate_on_open(args: argparse.Namespace) -> bool:
    """False when the schema is the DBA's: a database that is behind is then refused instead of
    migrated."""
    setting = os.environ.get(MIGRATE_ENV)
    if setting not in {None, "0", "1"}:
        raise UsageError("USAGE_INVALID", f"{MIGRATE_ENV} must be 0 or 1, not {setting[:20]!r}")
    if args.no_migrate:
        return False
    return setting == "1" if setting is not None else ledger_settings(args).database.migrate


def synchronous(args: argparse.Namespace) -> str:
    return str(args.synchronous or ledger_settings(args).database.synchronous)


def open_database(args: argparse.Namespace) -> Database:
    path = database_path(args)
    return Database(path, migrate=migrate_on_open(args), synchronous=synchronous(args))


attrs.resolve_types(LedgerSettings)
SECTIONS: dict[Any, str] = {field.type: field.name for field in attrs.fields(LedgerSettings)}


def _usage_refusal(flag: str) -> Callable[[str, Sequence[Problem]], LedgerError]:
    def refuse(_what: str, problems: Sequence[Problem]) -> LedgerError:
        return UsageError("USAGE_INVALID", f"{flag}: " + "; ".join(p.message for p in problems))

    return refuse


def setting_option(
    parser: argparse.ArgumentParser,
    flag: str,
    record: type,
    name: str | None = None,
    *,
    help: str,
    parse: Callable[[str], Any] = str,
    repeated: bool = False,
) -> None:
    """A flag for the setting `name` (by default the flag's own) of a config section, checked by
    that very field; None when not given, so that the file's value stands."""
    name = name or flag.removeprefix("--").replace("-", "_")

    def convert(text: str) -> Any:
        try:
            value = parse(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text[:40]!r} is not a number") from None
        raw = [value] if repeated else value
        try:
            checked = getattr(structure({name: raw}, record, what=name), name)
        except LedgerError as refused:
            raise argparse.ArgumentTypeError(refused.detail) from None
        return checked[0] if repeated else checked

    default = field_default(attrs.fields_dict(record)[name])
    shown = "none" if default is None or default == [] else default
    parser.add_argument(
        flag,
        dest=name,
        type=convert,
        default=None,
        action="append" if repeated else "store",
        help=f"{help} (default: {shown}; config file: [{SECTIONS[record]}] {name})",
    )


def section_settings(args: argparse.Namespace, record: type[S]) -> S:
    """The config file's section `record`, with every flag given on the command line over it."""
    section = getattr(ledger_settings(args), SECTIONS[record])
    given = {
        field.name: getattr(args, field.name)
        for field in attrs.fields(record)  # type: ignore[arg-type]
        if getattr(args, field.name, None) is not None
    }
    merged: S = attrs.evolve(section, **given)
    check_built(merged, what=SECTIONS[record], refuse=_usage_refusal(f"[{SECTIONS[record]}]"))
    return merged


def required_setting(value: S | None, flag: str, record: type, name: str) -> S:
    if value is None:
        section = SECTIONS[record]
        raise UsageError("USAGE_INVALID", f"{flag} is required (or [{section}] {name} in a config)")
    return value


def read_json_argument(source: str) -> Any:
    """Read a JSON document from a file path, or from stdin when the path is `-`."""
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
