"""Commands of the governed write: write, write-recover."""

from __future__ import annotations

import argparse
from typing import Any

from aios_ledger.core import LedgerError
from aios_ledger.shell.attest.cli import attest_key_option, signing_key
from aios_ledger.shell.cli_support import open_database, read_json_argument
from aios_ledger.shell.governed.writes import LEASE_WAIT_SECONDS, governed_write, recover_writes


def register(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    write = commands.add_parser("write", help="write a verified task's proposal to its branch")
    write.add_argument("task_id")
    write.add_argument("--json", required=True, metavar="FILE", help="{idempotency_key}")
    write.add_argument(
        "--lease-wait",
        type=float,
        default=LEASE_WAIT_SECONDS,
        help="seconds to wait for another write of the same branch",
    )
    attest_key_option(write)
    write.set_defaults(handler=_write)

    recover = commands.add_parser(
        "write-recover", help="record the outcome of writes a crash left in doubt, from their refs"
    )
    recover.set_defaults(handler=_write_recover)


def _write(args: argparse.Namespace) -> Any:
    raw = read_json_argument(args.json)
    if not isinstance(raw, dict):
        raise LedgerError("FIELDS_INVALID", "write takes {idempotency_key}")
    with open_database(args) as db:
        return governed_write(
            db,
            {**raw, "task_id": args.task_id},
            lease_wait=max(0.0, args.lease_wait),
            attest_key=signing_key(args),
        )


def _write_recover(args: argparse.Namespace) -> Any:
    with open_database(args) as db:
        return recover_writes(db)
