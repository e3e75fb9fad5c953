"""The task ledger a command's arguments name: its database, and how it is opened."""

from __future__ import annotations

import argparse

from aios_ledger.shell.cli_support import database_path, migrate_on_open, synchronous
from aios_ledger.shell.tasks.ledger import TaskLedger


def task_ledger(args: argparse.Namespace) -> TaskLedger:
    return TaskLedger(
        database_path(args), migrate=migrate_on_open(args), synchronous=synchronous(args)
    )
