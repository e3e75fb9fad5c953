"""`aios-ledger schema [NAME]`: the JSON Schema of each request file the command line reads."""

from __future__ import annotations

import argparse
from typing import Any

from aios_ledger.core.request_schemas import REQUEST_DOCUMENTS, request_schema


def register(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    schema = commands.add_parser(
        "schema",
        help="the JSON Schema (draft 2020-12) of a request file; without NAME, the names",
    )
    schema.add_argument("name", nargs="?", choices=sorted(REQUEST_DOCUMENTS), metavar="NAME")
    schema.set_defaults(handler=_schema)


def _schema(args: argparse.Namespace) -> Any:
    if args.name is None:
        return {name: f"aios-ledger {doc.command}" for name, doc in REQUEST_DOCUMENTS.items()}
    return request_schema(args.name)
