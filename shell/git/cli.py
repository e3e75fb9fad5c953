"""Commands of governed repositories and proposals: repo add|settings|list|show, propose,
proposals. (The governed write's commands are `shell/governed/cli.py`'s.)"""

from __future__ import annotations

import argparse
import os
from typing import Any

import attrs
from aios_ledger.core import LedgerError
from aios_ledger.core.config import RemoteSettings
from aios_ledger.core.git import ProposalRow
from aios_ledger.core.git.answers import proposal_answer
from aios_ledger.core.git.forges import FORGES
from aios_ledger.core.git.settings import DEFAULT_SETTINGS, OPTIONS
from aios_ledger.shell.cli_support import (
    database_path,
    open_database,
    read_json_argument,
    section_settings,
    setting_option,
)
from aios_ledger.shell.db.connection import fetch_all
from aios_ledger.shell.db.engines import is_database_url
from aios_ledger.shell.git.proposals import DEFAULT_LIMITS, admitted_context, record_proposal
from aios_ledger.shell.git.remotes import Credentials, credentials_of, remote_kind
from aios_ledger.shell.git.repos import (
    add_remote_repository,
    add_repository,
    change_repository_settings,
    list_repositories,
    read_baseline,
    show_repository,
)

# The number settings of `repo add` and `repo settings` (option, metavar: `OPTIONS`), each's help.
_NUMBER_HELP = {
    "scan_max_bytes": "the bytes one proposal may bring to be scanned (default 67108864)",
    "scan_max_seconds": "the seconds one proposal's scan may take (default 20)",
    "agent_scan_max_bytes": "the bytes of scanning one agent's proposals may cost per window"
    " (default 1073741824)",
    "agent_scan_max_seconds": "the seconds of scanning one agent's proposals may cost per window"
    " (default 600)",
    "agent_scan_window_seconds": "the window of the agent budget, in whole seconds, 60 to 2592000"
    " (default 3600)",
}

# The pull request's options beside `--pull-requests FORGE`: (option, setting, value, help).
_PULL_REQUEST_OPTIONS = (
    (
        "--forge-api",
        "api_url",
        "URL",
        "the forge's REST API (default: derived from the remote's URL, e.g."
        " https://api.github.com, https://HOST/api/v1 for Gitea, https://HOST/api/v4 for GitLab)",
    ),
    (
        "--forge-project",
        "project",
        "OWNER/NAME",
        "the project on the forge (default: the remote's path)",
    ),
    (
        "--pull-request-base",
        "base_branch",
        "BRANCH",
        "the branch requests are opened into (default: the repository's HEAD branch)",
    ),
    (
        "--forge-token-file",
        "token_file",
        "FILE",
        "a file holding the forge's token (default: the remote's --token-file); it needs"
        " pull-request permission",
    ),
)


def register(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    repo = commands.add_parser("repo", help="governed repositories")
    repo_commands = repo.add_subparsers(dest="repo_command", required=True)
    add = repo_commands.add_parser(
        "add", help="register a bare repository, or a remote one through a mirror, under a name"
    )
    add.add_argument("name", help="the name bindings use, e.g. acme/widgets")
    add.add_argument(
        "path",
        help="the bare repository's directory, or a remote's URL: ssh://, git@host:path,"
        " https:// (http:// is warned about outside loopback)",
    )
    remote_options(add)
    add.add_argument(
        "--protected",
        action="append",
        metavar="PATTERN",
        help="a protected branch pattern, added to the defaults (repeatable; the defaults: "
        "HEAD's branch, main, master, release/*)",
    )
    add.add_argument(
        "--no-default-protection",
        dest="default_protection",
        action="store_false",
        help="protect only HEAD's branch and the --protected patterns, not main, master, release/*",
    )
    _settings_options(add, changing=False)
    add.set_defaults(handler=_repo_add)
    settings = repo_commands.add_parser(
        "settings", help="change a governed repository's settings (sealed, idempotent by key)"
    )
    settings.add_argument("name")
    settings.add_argument(
        "--idempotency-key",
        required=True,
        metavar="KEY",
        help="the change's key: the same key and options again answer the first change",
    )
    settings.add_argument(
        "--expected-revision",
        type=int,
        metavar="N",
        help="change only while the repository "
        "is at this revision (`repo show`), else REVISION_CONFLICT",
    )
    _settings_options(settings, changing=True)
    settings.set_defaults(handler=_repo_settings)
    listing = repo_commands.add_parser("list", help="the governed repositories")
    listing.set_defaults(handler=_repo_list)
    show = repo_commands.add_parser("show", help="one governed repository")
    show.add_argument("name")
    show.set_defaults(handler=_repo_show)

    propose = commands.add_parser(
        "propose", help="record a bundle as the proposal of a claimed task's attempt"
    )
    propose.add_argument(
        "--json", required=True, metavar="FILE", help="{task_id, lease_token, bundle}"
    )
    propose.set_defaults(handler=_propose)

    proposals = commands.add_parser("proposals", help="a task's proposals and their facts")
    proposals.add_argument("task_id")
    proposals.set_defaults(handler=_proposals)


def remote_options(parser: argparse.ArgumentParser, *, mirror: bool = True) -> None:
    """The options naming the ledger's credential for a remote (`[remote]` over them)."""
    if mirror:
        parser.add_argument(
            "--mirror",
            metavar="DIR",
            help="where the ledger keeps its bare mirror of the remote (default: [remote] mirrors/"
            "NAME.git, else beside a SQLite ledger LEDGER.mirrors/NAME.git)",
        )
    for flag, purpose in (
        ("--ssh-key", "the SSH private key (ssh remotes)"),
        ("--known-hosts", "the pinned known_hosts file: an unknown or changed host key is refused"),
        ("--token-file", "a file holding the HTTPS token (never the token itself)"),
        (
            "--key-credential",
            "the systemd credential holding the SSH private key, by name"
            " ($CREDENTIALS_DIRECTORY/NAME; instead of --ssh-key)",
        ),
        (
            "--token-credential",
            "the systemd credential holding the HTTPS token, by name"
            " ($CREDENTIALS_DIRECTORY/NAME; instead of --token-file)",
        ),
        ("--token-user", "the user name sent with the token"),
        ("--ca-bundle", "the CA certificates of a self-hosted forge (https)"),
    ):
        setting_option(parser, flag, RemoteSettings, help=purpose)


def refuse_remote_options(args: argparse.Namespace) -> None:
    """A local repository takes none of the remote options given on the command line."""
    names = ("mirror", *attrs.fields_dict(Credentials))
    if any(getattr(args, name, None) is not None for name in names):
        raise LedgerError("REMOTE_URL_INVALID", "the remote options are for a remote URL")


def _mirror_of(args: argparse.Namespace, ledger: str, mirrors: str | None) -> str:
    name = args.name.replace("/", "--") + ".git"
    if args.mirror is not None:
        return str(args.mirror)
    if mirrors is not None:
        return os.path.join(mirrors, name)
    if is_database_url(ledger):
        raise LedgerError(
            "REMOTE_MIRROR_REQUIRED",
            "a ledger on PostgreSQL keeps no files: give --mirror DIR or [remote] mirrors",
        )
    return os.path.join(f"{ledger}.mirrors", name)


def _settings_options(parser: argparse.ArgumentParser, *, changing: bool) -> None:
    baseline = parser.add_mutually_exclusive_group() if changing else parser
    baseline.add_argument(
        "--secrets-baseline",
        metavar="FILE",
        help="a detect-secrets baseline (`detect-secrets "
        "scan > FILE`): its content is kept in the ledger, sealed by its sha256",
    )
    if changing:
        baseline.add_argument(
            "--no-secrets-baseline",
            dest="clear_secrets_baseline",
            action="store_true",
            help="remove the repository's baseline",
        )
    gitlinks = parser.add_mutually_exclusive_group() if changing else parser
    gitlinks.add_argument(
        "--allow-gitlinks",
        dest="allow_gitlinks",
        action="store_const",
        const=True,
        help="let proposals carry gitlinks (submodule commits; default: refused)",
    )
    if changing:
        gitlinks.add_argument(
            "--no-allow-gitlinks",
            dest="allow_gitlinks",
            action="store_const",
            const=False,
            help="refuse gitlinks again",
        )
    for setting, purpose in _NUMBER_HELP.items():
        option, metavar = OPTIONS[setting].split()
        parser.add_argument(option, dest=setting, metavar=metavar, help=purpose)
    pull_requests = parser.add_mutually_exclusive_group() if changing else parser
    pull_requests.add_argument(
        "--pull-requests",
        metavar="FORGE",
        choices=FORGES,
        help="after each write, propose its branch into the base branch as a pull request"
        " (github, gitea: Gitea or Forgejo) or merge request (gitlab)",
    )
    if changing:
        pull_requests.add_argument(
            "--no-pull-requests",
            dest="clear_pull_request",
            action="store_true",
            help="open no more pull requests",
        )
    for option, _setting, metavar, purpose in _PULL_REQUEST_OPTIONS:
        parser.add_argument(option, metavar=metavar, help=purpose)


def _pull_request_of(args: argparse.Namespace) -> dict[str, Any] | None:
    """The pull request's setting the options give (the rest derived from the remote's URL)."""
    given = {
        setting: getattr(args, option.lstrip("-").replace("-", "_"))
        for option, setting, _, _ in _PULL_REQUEST_OPTIONS
    }
    if args.pull_requests is None:
        named = [option for option, setting, _, _ in _PULL_REQUEST_OPTIONS if given[setting]]
        if named:
            raise LedgerError(
                "PULL_REQUEST_SETTING_INVALID", f"{', '.join(named)} go with --pull-requests FORGE"
            )
        return None
    if given["token_file"] is not None:
        given["token_file"] = os.path.abspath(given["token_file"])
    return {"forge": args.pull_requests, **{k: v for k, v in given.items() if v is not None}}


def _number(option: str, text: str, kind: type) -> int | float:
    try:
        return int(text, 10) if kind is int else float(text)
    except ValueError:
        what = "a whole number" if kind is int else "a number of seconds"
        raise LedgerError(
            "REPOSITORY_SETTING_INVALID", f"{option}: {text[:80]!r} is not {what}"
        ) from None


def _settings_of(args: argparse.Namespace) -> dict[str, Any]:
    """The settings the options give (the baseline file read), by setting name."""
    baseline = args.secrets_baseline
    settings: dict[str, Any] = {
        "secrets_baseline": None if baseline is None else read_baseline(baseline),
        "clear_secrets_baseline": getattr(args, "clear_secrets_baseline", False) or None,
        "allow_gitlinks": args.allow_gitlinks,
    }
    for setting in _NUMBER_HELP:
        text = getattr(args, setting)
        kind = type(getattr(DEFAULT_SETTINGS, setting))
        settings[setting] = (
            None if text is None else _number(OPTIONS[setting].split()[0], text, kind)
        )
    settings["pull_request"] = _pull_request_of(args)
    settings["clear_pull_request"] = getattr(args, "clear_pull_request", False) or None
    return {name: value for name, value in settings.items() if value is not None}


def _repo_add(args: argparse.Namespace) -> Any:
    settings = _settings_of(args)
    if remote_kind(args.path) is not None:
        remote = section_settings(args, RemoteSettings)
        with open_database(args) as db:
            return add_remote_repository(
                db,
                args.name,
                args.path,
                _mirror_of(args, database_path(args), remote.mirrors),
                credentials_of(remote),
                args.protected,
                default_protection=args.default_protection,
                settings=settings or None,
            )
    refuse_remote_options(args)
    with open_database(args) as db:
        return add_repository(
            db,
            args.name,
            args.path,
            args.protected,
            default_protection=args.default_protection,
            settings=settings or None,
        )


def _repo_settings(args: argparse.Namespace) -> Any:
    settings = _settings_of(args)
    with open_database(args) as db:
        return change_repository_settings(
            db,
            args.name,
            settings,
            idempotency_key=args.idempotency_key,
            expected_revision=args.expected_revision,
        )


def _repo_list(args: argparse.Namespace) -> Any:
    with open_database(args) as db:
        return list_repositories(db)


def _repo_show(args: argparse.Namespace) -> Any:
    with open_database(args) as db:
        return show_repository(db, args.name)


def _propose(args: argparse.Namespace) -> Any:
    raw = read_json_argument(args.json)
    if not isinstance(raw, dict) or set(raw) != {"task_id", "lease_token", "bundle"}:
        raise LedgerError("FIELDS_INVALID", "propose takes {task_id, lease_token, bundle}")
    bundle = raw["bundle"]
    if not isinstance(bundle, str):
        raise LedgerError("FIELDS_INVALID", "bundle: the path of a git bundle file")
    task_id, lease_token = str(raw["task_id"]), str(raw["lease_token"])
    with open_database(args) as db:
        # The lease before the bundle: a proposal its lease refuses is never read.
        db.read(lambda conn: admitted_context(conn, task_id, lease_token=lease_token))
        try:
            with open(bundle, "rb") as handle:
                data = handle.read(DEFAULT_LIMITS.max_bundle_bytes + 1)
        except (OSError, ValueError) as exc:
            raise LedgerError("INPUT_UNREADABLE", f"{bundle[:200]!r}: {exc}") from None
        return record_proposal(db, task_id, data, lease_token=lease_token)


def _proposals(args: argparse.Namespace) -> Any:
    with open_database(args) as db:
        rows = db.read(
            lambda conn: fetch_all(conn, "task_proposals_of_task", {"task_id": args.task_id})
        )
    answers = [proposal_answer(ProposalRow.from_row(row), idempotent=False) for row in rows]
    return [
        {name: value for name, value in answer.items() if name != "idempotent"}
        for answer in answers
    ]
