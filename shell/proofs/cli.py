"""Commands of signed checkpoints: `key generate`, `checkpoint`, `verify-checkpoint` and
`witness`."""

from __future__ import annotations

import argparse
import logging
import sys
from pathlib import Path
from typing import Any

from aios_ledger.core import LedgerError
from aios_ledger.core.proofs import (
    VerifierKey,
    cosignature_time,
    open_checkpoint,
    verified_cosignatures,
)
from aios_ledger.core.proofs.notes import MAX_NOTE_BYTES
from aios_ledger.shell.cli_support import UsageError, emit, ledger_settings, open_database
from aios_ledger.shell.clock import read_clock, system_clock
from aios_ledger.shell.db.merkle import integrate
from aios_ledger.shell.proofs.checkpoints import sign_checkpoint
from aios_ledger.shell.proofs.keys import (
    check_ed25519,
    generate_signer_key,
    load_signer,
    signer_from_key,
    write_key_file,
)
from aios_ledger.shell.proofs.witness import TOKEN_ENV, Witness

LOG = logging.getLogger("aios_ledger.witness")


def register(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    key = commands.add_parser("key", help="Ed25519 keys that sign checkpoints and cosignatures")
    key_commands = key.add_subparsers(dest="key_command", required=True, metavar="COMMAND")
    generate = key_commands.add_parser(
        "generate", help="write a new signer key to a new file (0600) and print its verifier key"
    )
    generate.add_argument(
        "--name",
        required=True,
        metavar="ORIGIN",
        help="the key's name: the log's origin (e.g. ledger.example.com/main), or the "
        "witness's name; no spaces, no '+'",
    )
    generate.add_argument("--out", required=True, metavar="FILE", help="a file that must not exist")
    generate.set_defaults(handler=_key_generate)

    checkpoint = commands.add_parser(
        "checkpoint",
        help="sign the ledger's tree head as a C2SP checkpoint, store it and print the note",
    )
    checkpoint.add_argument(
        "--key",
        metavar="FILE",
        help="the signer key file (default: [checkpoint] key, else the systemd credential "
        "[checkpoint] credential)",
    )
    checkpoint.add_argument(
        "--json", action="store_true", help="print the stored checkpoint as JSON, not the note"
    )
    checkpoint.set_defaults(handler=_checkpoint)

    check = commands.add_parser(
        "verify-checkpoint",
        help="check a checkpoint note offline with the log's verifier key (and witnesses'), "
        "and print its size and root (the root verify-proof trusts)",
    )
    check.add_argument(
        "file", help="the note (`checkpoint`'s output, GET /v1/checkpoint), - for stdin"
    )
    check.add_argument("--log-key", required=True, metavar="VKEY", help="the log's verifier key")
    check.add_argument(
        "--witness-key",
        action="append",
        default=[],
        metavar="VKEY",
        help="a witness whose cosignature must be on the note and verify (repeatable)",
    )
    check.set_defaults(handler=_verify_checkpoint)

    witness = commands.add_parser(
        "witness",
        help="witness a ledger: check each new checkpoint extends the last one seen, cosign it "
        "(cosignature/v1) and send the cosignature back",
    )
    witness.add_argument("--log", metavar="URL", help="pull: the ledger's API, fetched each round")
    witness.add_argument(
        "--listen",
        metavar="HOST:PORT",
        help="serve instead: answer C2SP tlog-witness POST /add-checkpoint (logs push to it)",
    )
    witness.add_argument(
        "--log-key",
        required=True,
        action="append",
        metavar="VKEY",
        help="the ledger's verifier key (with --listen: repeatable, each log it witnesses)",
    )
    witness.add_argument(
        "--key", required=True, metavar="FILE", help="the witness's own signer key file"
    )
    witness.add_argument(
        "--state",
        required=True,
        metavar="DIR",
        help="where the witness keeps the last checkpoint it cosigned (created if missing)",
    )
    witness.add_argument(
        "--token", metavar="TOKEN", help=f"a token with the witness role (default: ${TOKEN_ENV})"
    )
    witness.add_argument("--once", action="store_true", help="one round, then exit")
    witness.add_argument(
        "--interval",
        type=float,
        default=30.0,
        metavar="SECONDS",
        help="seconds between rounds (default 30)",
    )
    witness.set_defaults(handler=_witness, default_log_level="INFO")


def _key_generate(args: argparse.Namespace) -> Any:
    key = generate_signer_key(args.name)
    write_key_file(Path(args.out), key)
    verifier = signer_from_key(key).verifier
    return {"name": verifier.name, "verifier_key": verifier.text(), "key_file": args.out}


def _checkpoint(args: argparse.Namespace) -> int:
    settings = ledger_settings(args).checkpoint
    signer = load_signer(args.key or settings.key, settings.credential)
    with open_database(args) as db:
        integrate(db)  # a deployment without a server: the checkpoint covers what committed
        served = sign_checkpoint(db, signer, read_clock(system_clock))
    if args.json:
        emit(served.public())
    else:
        sys.stdout.write(served.note)
    return 0


def _verify_checkpoint(args: argparse.Namespace) -> Any:
    raw = read_note_argument(args.file)
    log_key = VerifierKey.parse(args.log_key)
    opened = open_checkpoint(raw, log_key, check_ed25519)
    witnesses = [VerifierKey.parse(key) for key in args.witness_key]
    cosigned = verified_cosignatures(opened.opened.note, witnesses, check_ed25519)
    missing = sorted({key.name for key in witnesses} - {signature.name for signature in cosigned})
    if missing:
        raise LedgerError("COSIGNATURE_MISSING", f"no cosignature by {', '.join(missing)}")
    by = [{"name": signature.name, "time": cosignature_time(signature)} for signature in cosigned]
    return {**opened.checkpoint.public(), "cosigned_by": by}


def read_note_argument(path: str) -> bytes:
    """A note's bytes from a file or stdin, at most one byte past the largest note."""
    if path == "-":
        return sys.stdin.buffer.read(MAX_NOTE_BYTES + 1)
    try:
        with open(path, "rb") as handle:
            return handle.read(MAX_NOTE_BYTES + 1)
    except OSError as failed:
        raise LedgerError("FILE_UNREADABLE", f"{path[:200]}: {failed.strerror}") from None


def _witness(args: argparse.Namespace) -> int:
    if (args.log is None) == (args.listen is None):
        raise UsageError("USAGE_INVALID", "give --log URL (pull) or --listen HOST:PORT (serve)")
    log_keys = [VerifierKey.parse(key) for key in args.log_key]
    if args.listen is not None:
        return _witness_server(args, log_keys)
    if len(log_keys) != 1:
        raise UsageError("USAGE_INVALID", "a pulling witness (--log) takes one --log-key")
    witness = Witness.configure(
        log_url=args.log,
        log_key=log_keys[0],
        key_file=Path(args.key),
        state_dir=Path(args.state),
        token=args.token,
    )
    if args.once:
        emit(witness.round())
        return 0
    witness.run(interval=args.interval)
    return 0


def _witness_server(args: argparse.Namespace, log_keys: list[VerifierKey]) -> int:
    import uvicorn
    from aios_ledger.shell.listen import bind_listener, parse_listen
    from aios_ledger.shell.proofs.witness_server import WitnessService, witness_app

    if args.once:
        raise UsageError("USAGE_INVALID", "--once is a pulling witness's (--log)")
    service = WitnessService.configure(
        log_keys=log_keys, key_file=Path(args.key), state_dir=Path(args.state)
    )
    host, port = parse_listen(args.listen)
    listener = bind_listener(host, port)
    config = uvicorn.Config(
        witness_app(service), host=host, port=port, log_config=None, access_log=False
    )
    LOG.info("witnessing %d log(s) on http://%s:%d", len(log_keys), host, port)
    try:
        uvicorn.Server(config).run(sockets=[listener])
    finally:
        listener.close()
    return 0
