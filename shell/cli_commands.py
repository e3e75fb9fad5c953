"""The list of command groups the command line is built from, one module per capability."""

from __future__ import annotations

import argparse
from collections.abc import Callable

from . import cli_log, cli_projection

Register = Callable[["argparse._SubParsersAction[argparse.ArgumentParser]"], None]

COMMAND_GROUPS: tuple[Register, ...] = (cli_projection.register, cli_log.register)
