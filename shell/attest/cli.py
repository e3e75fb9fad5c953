"""`aios-ledger why COMMIT` and `aios-ledger verify-attestation COMMIT --repo PATH --key PUB`."""

from __future__ import annotations

import argparse
from typing import Any

from aios_ledger.core.config import RemoteSettings
from aios_ledger.shell.attest.commits import (
    verify_commit_attestation,
    verify_remote_attestation,
    why_commit,
)
from aios_ledger.shell.attest.keys import (
    KEY_ENV,
    SigningKey,
    configured_key_path,
    load_signer,
    read_verifier,
)
from aios_ledger.shell.cli_support import (
    json_flag,
    ledger_settings,
    open_database,
    section_settings,
)
from aios_ledger.shell.console import Shown, why_view
from aios_ledger.shell.git.cli import refuse_remote_options, remote_options
from aios_ledger.shell.git.remotes import credentials_of, remote_kind


def register(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    why = commands.add_parser(
        "why",
        help="from a commit back to everything: task, agent, evidence, review, write, attestation",
    )
    why.add_argument("commit", help="the commit's object id (a landed governed write's)")
    why.add_argument("--repo", metavar="NAME", help="only writes to this governed repository")
    json_flag(why)
    why.set_defaults(handler=_why)

    verify = commands.add_parser(
        "verify-attestation",
        help="check a commit's attestation from its repository alone, with the public key",
    )
    verify.add_argument("commit", help="the commit (any name git resolves in the repository)")
    verify.add_argument(
        "--repo",
        metavar="PATH|URL",
        required=True,
        help="the git repository, or a remote's URL (its branches and notes are fetched)",
    )
    verify.add_argument(
        "--key",
        metavar="PUB",
        required=True,
        help="the verifier key (NAME+KEYID+BASE64), or a file holding it",
    )
    remote_options(verify, mirror=False)  # for a remote --repo, as `repo add` reads one
    verify.set_defaults(handler=_verify)


def attest_key_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--attest-key",
        metavar="FILE",
        help=f"the signer key that attests the write (default: [attest] key, [checkpoint] key, "
        f"${KEY_ENV}, or the attest-key systemd credential); none: the write lands unattested",
    )


def signing_key(args: argparse.Namespace) -> SigningKey | None:
    """The attesting key: the option, the config file's (the checkpoints' key signs both), else
    the environment's or the systemd credential."""
    settings = ledger_settings(args)
    path = configured_key_path(
        getattr(args, "attest_key", None) or settings.attest.key or settings.checkpoint.key
    )
    return None if path is None else load_signer(path)


def _why(args: argparse.Namespace) -> Any:
    with open_database(args) as db:
        return Shown(why_commit(db, args.commit, args.repo), why_view)


def _verify(args: argparse.Namespace) -> Any:
    verifier = read_verifier(args.key)
    if remote_kind(args.repo) is not None:
        credentials = credentials_of(section_settings(args, RemoteSettings))
        return verify_remote_attestation(args.repo, args.commit, verifier, credentials)
    refuse_remote_options(args)
    return verify_commit_attestation(args.repo, args.commit, verifier)
