"""What every command group shares: the database and its schema setting, JSON in and out,
usage errors."""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Callable
from typing import Any, NoReturn

from aios_ledger.core import LedgerError
from aios_ledger.core.jsonvalue import loads_document
from aios_ledger.shell.db.connection import DEFAULT_PATH_ENV, Database

DEFAULT_DB = "aios-ledger.db"
MIGRATE_ENV = "AIOS_LEDGER_MIGRATE"
EXIT_REFUSED = 1
EXIT_USAGE = 2
MAX_INPUT_BYTES = 8 * 1024 * 1024 + 1  # more than any document may hold: read no further

Handler = Callable[[argparse.Namespace], Any]


class UsageError(LedgerError):
    pass


class Parser(argparse.ArgumentParser):
    """argparse that reports a usage mistake as a coded error instead of exiting by itself."""

    def error(self, message: str) -> NoReturn:
        raise UsageError("USAGE_INVALID", message)


def emit(value: Any) -> None:
    sys.stdout.write(json.dumps(value, indent=2, sort_keys=True, ensure_ascii=True) + "\n")


def database_path(args: argparse.Namespace) -> str:
    return str(args.db or os.environ.get(DEFAULT_PATH_ENV) or DEFAULT_DB)


def migrate_on_open(args: argparse.Namespace) -> bool:
    """False under `--no-migrate` or `AIOS_LEDGER_MIGRATE=0`: the schema is the DBA's, and a
    database that is behind is refused (`SCHEMA_TOO_OLD`) instead of migrated."""
    setting = os.environ.get(MIGRATE_ENV, "1")
    if setting not in {"0", "1"}:
        raise UsageError("USAGE_INVALID", f"{MIGRATE_ENV} must be 0 or 1, not {setting[:20]!r}")
    return not args.no_migrate and setting == "1"


def open_database(args: argparse.Namespace) -> Database:
    return Database(database_path(args), migrate=migrate_on_open(args))


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
