"""Commands of the HTTP API's tokens: `token issue|list|revoke`."""

from __future__ import annotations

import argparse
from typing import Any

from aios_ledger.core.actors import ROLES
from aios_ledger.shell.api.tokens import issue_token, list_tokens, revoke_token
from aios_ledger.shell.cli_support import open_database


def register(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    token = commands.add_parser("token", help="API tokens: issue, list, revoke")
    token_commands = token.add_subparsers(dest="token_command", required=True)
    issue = token_commands.add_parser(
        "issue", help="issue a token (printed once; only its sha256 is stored)"
    )
    issue.add_argument("name", help="the token's name (an agent's id, for an agent)")
    issue.add_argument(
        "--role", dest="roles", action="append", required=True, choices=ROLES, help="repeatable"
    )
    issue.add_argument(
        "--capability",
        dest="capabilities",
        action="append",
        default=[],
        metavar="NAME",
        help="a capability the token may claim with (repeatable); a claim offering one not "
        "granted is refused CAPABILITY_NOT_GRANTED. None given: only tasks that need no "
        "capability",
    )
    issue.add_argument(
        "--any-capability",
        action="store_true",
        help="no ceiling: the token may claim offering any capability (instead of --capability)",
    )
    issue.set_defaults(handler=_issue)
    listing = token_commands.add_parser(
        "list",
        help="tokens' names, roles, granted capabilities (grant: listed, any, or before-grants "
        "for a token issued before grants, which has no ceiling) and status",
    )
    listing.set_defaults(handler=_list)
    revoke = token_commands.add_parser("revoke", help="revoke a token: it is refused from now on")
    revoke.add_argument("name")
    revoke.set_defaults(handler=_revoke)


def _issue(args: argparse.Namespace) -> Any:
    with open_database(args) as db:
        return issue_token(
            db,
            args.name,
            args.roles,
            capabilities=args.capabilities,
            any_capability=args.any_capability,
        )


def _list(args: argparse.Namespace) -> Any:
    with open_database(args) as db:
        return list_tokens(db)


def _revoke(args: argparse.Namespace) -> Any:
    with open_database(args) as db:
        return revoke_token(db, args.name)
