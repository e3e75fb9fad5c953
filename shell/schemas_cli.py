"""`aios-ledger schema [NAME]`: the JSON Schema of each request file the command line reads, and
of each governed action's result contract."""

from __future__ import annotations

import argparse
from collections.abc import Mapping
from typing import Any

from aios_ledger.core.request_schemas import REQUEST_DOCUMENTS, request_schema
from aios_ledger.core.tasks.results import RESULT_CONTRACTS
from aios_ledger.shell.contracts import result_contract

# `result-agent-runtime` for the action `agent_runtime`: named as the request files are.
RESULT_SCHEMAS: Mapping[str, str] = {
    f"result-{action.replace('_', '-')}": action for action in RESULT_CONTRACTS
}


def register(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    schema = commands.add_parser(
        "schema",
        help="the JSON Schema (draft 2020-12) of a request file or of a governed action's "
        "result; without NAME, the names",
    )
    schema.add_argument(
        "name",
        nargs="?",
        choices=[*sorted(REQUEST_DOCUMENTS), *sorted(RESULT_SCHEMAS)],
        metavar="NAME",
        help="a request file (task, claim, submit, ...) or a result contract (result-...)",
    )
    schema.set_defaults(handler=_schema)


def _schema(args: argparse.Namespace) -> Any:
    if args.name is None:
        names = {name: f"aios-ledger {doc.command}" for name, doc in REQUEST_DOCUMENTS.items()}
        for name, action in RESULT_SCHEMAS.items():
            names[name] = f"aios-ledger submit --json FILE: `result` under a {action} envelope"
        return names
    if args.name in RESULT_SCHEMAS:
        return dict(result_contract(RESULT_CONTRACTS[RESULT_SCHEMAS[args.name]]))
    return request_schema(args.name)
