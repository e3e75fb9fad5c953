"""The list of command groups the command line is built from, one module per capability."""

from __future__ import annotations

import argparse
from collections.abc import Callable

from . import cli_log, cli_projection, cli_runs, cli_tasks, cli_worker

Register = Callable[["argparse._SubParsersAction[argparse.ArgumentParser]"], None]

COMMAND_GROUPS: tuple[Register, ...] = (
    cli_projection.register,
    cli_tasks.register,
    cli_runs.register,
    cli_worker.register,
    cli_log.register,
)
