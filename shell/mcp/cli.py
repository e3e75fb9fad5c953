"""The `mcp` command: the ledger's tools for a model, in front of a running `serve`.

The MCP SDK is imported when the command runs, so that every other command starts without it."""

from __future__ import annotations

import argparse

from aios_ledger.shell.cli_support import UsageError
from aios_ledger.shell.listen import parse_listen
from aios_ledger.shell.remote.credentials import read_token_file

TRANSPORTS = ("stdio", "http")
DEFAULT_MCP_LISTEN = "127.0.0.1:18893"


def register(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    mcp = commands.add_parser(
        "mcp", help="the ledger's tools for a model (Model Context Protocol: stdio or HTTP)"
    )
    mcp.add_argument(
        "--api",
        "--server",
        required=True,
        metavar="URL",
        help="the ledger's HTTP API (aios-ledger serve) every call goes through",
    )
    mcp.add_argument(
        "--transport",
        choices=TRANSPORTS,
        default="stdio",
        help="stdio: one client on stdin/stdout, as --token-file's agent; http: Streamable "
        "HTTP at /mcp, each request as its own bearer token",
    )
    mcp.add_argument(
        "--token-file",
        metavar="FILE",
        help="with stdio: the file holding the token to act as (aios-ledger token issue); "
        "never a token on the command line",
    )
    mcp.add_argument(
        "--listen",
        metavar="HOST:PORT",
        help=f"with http: the address to listen on (default: {DEFAULT_MCP_LISTEN})",
    )
    mcp.set_defaults(handler=_mcp, default_log_level="WARNING")


def _mcp(args: argparse.Namespace) -> int:
    from aios_ledger.shell.mcp import server

    if args.transport == "stdio":
        if args.listen is not None:
            raise UsageError("USAGE_INVALID", "--listen goes with --transport http")
        if args.token_file is None:
            raise UsageError("USAGE_INVALID", "--transport stdio needs --token-file FILE")
        server.run_stdio(args.api, read_token_file(args.token_file))
        return 0
    if args.token_file is not None:
        raise UsageError(
            "USAGE_INVALID",
            "--token-file goes with stdio: over http each request brings its own bearer token",
        )
    host, port = parse_listen(args.listen or DEFAULT_MCP_LISTEN)
    server.run_http(args.api, host, port)
    return 0
