"""Commands of the tamper-evident log: verify, head, prove, integrate, verify-proof, export,
verify-export, archive (and its show and restore) and verify-archive."""

from __future__ import annotations

import argparse
import contextlib
import errno
import json
import os
import stat
import sys
import time
from pathlib import Path
from typing import IO, Any

from aios_ledger.core import LedgerError
from aios_ledger.core.jsonvalue import loads_document
from aios_ledger.core.log import LedgerHead
from aios_ledger.core.log.merkle import InclusionProof, parse_proof, parse_root
from aios_ledger.core.proofs import VerifierKey, open_checkpoint
from aios_ledger.core.proofs.checkpoints import checkpoint_root
from aios_ledger.shell.cli_support import emit, ledger_settings, open_database, read_json_argument
from aios_ledger.shell.clock import read_clock, system_clock
from aios_ledger.shell.console import progress_bar
from aios_ledger.shell.db.connection import Database, engine_for, is_database_url
from aios_ledger.shell.db.merkle import (
    Integrator,
    current_tree_head,
    prove_consistency,
    prove_integrated,
)
from aios_ledger.shell.log.archive import (
    archive_tasks,
    restore_archive,
    show_archive,
    verify_archive,
)
from aios_ledger.shell.log.copy import copy_ledger
from aios_ledger.shell.log.export import export_log, verify_export
from aios_ledger.shell.log.verification import ledger_head, verify_log
from aios_ledger.shell.proofs.cli import read_note_argument
from aios_ledger.shell.proofs.keys import check_ed25519, checkpoint_verifier_keys

EXIT_NOT_INTACT = 3
# `prove --wait`'s default patience, and `integrate --follow`'s pause when nothing waits.
DEFAULT_PROVE_WAIT = 10.0
INTEGRATE_INTERVAL = 0.05


def register(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    verify = commands.add_parser(
        "verify", help="walk the whole event log and report tampering (exit 0 only when intact)"
    )
    verify.add_argument(
        "--head",
        help="a head printed earlier by `head` (JSON text, a file, or - for stdin): "
        "also detect that the newest events were removed since",
    )
    verify.add_argument(
        "--log-key",
        action="append",
        metavar="VKEY",
        help="the ledger's checkpoint verifier key: each stored checkpoint of its name must "
        "verify under it (repeatable; default: [checkpoint] log_keys, and the verifier of "
        "[checkpoint] key when that is set)",
    )
    verify.add_argument(
        "--witness-key",
        action="append",
        metavar="VKEY",
        help="a witness's verifier key: each stored cosignature by it must verify over its "
        "checkpoint (repeatable; default: [checkpoint] witnesses)",
    )
    verify.set_defaults(handler=_verify)

    head = commands.add_parser("head", help="print the log's head: count, last id and digest")
    head.set_defaults(handler=_head)

    prove = commands.add_parser(
        "prove",
        help="an RFC 9162 inclusion proof of an event in the Merkle log, or with --consistency "
        "OLD NEW a consistency proof between two tree sizes (docs/proofs.md)",
    )
    prove.add_argument("event_id", nargs="?", type=int, metavar="EVENT_ID")
    prove.add_argument("--size", type=int, metavar="N", help="the tree of the first N leaves")
    prove.add_argument(
        "--consistency", nargs=2, type=int, metavar=("OLD", "NEW"), help="two tree sizes"
    )
    prove.add_argument(
        "--wait",
        action="store_true",
        help="wait until the event is in the tree (it may not be committed yet); "
        "EVENT_NOT_INTEGRATED after --timeout",
    )
    prove.add_argument(
        "--timeout",
        type=float,
        default=DEFAULT_PROVE_WAIT,
        metavar="S",
        help=f"with --wait: at most S seconds (default {DEFAULT_PROVE_WAIT:g})",
    )
    prove.set_defaults(handler=_prove)

    integrate = commands.add_parser(
        "integrate",
        help="append committed events to the Merkle log (PostgreSQL; serve does it in the "
        "background), once or with --follow until interrupted",
    )
    integrate.add_argument(
        "--follow", action="store_true", help="keep integrating what commits, until interrupted"
    )
    integrate.add_argument(
        "--interval",
        type=float,
        default=INTEGRATE_INTERVAL,
        metavar="S",
        help=f"with --follow: seconds between passes that found nothing (default "
        f"{INTEGRATE_INTERVAL:g})",
    )
    integrate.set_defaults(handler=_integrate)

    check_proof = commands.add_parser(
        "verify-proof",
        help="check a proof `prove` wrote, offline (no database), against a root you trust or "
        "a signed checkpoint of the proof's tree and the log's public key",
    )
    check_proof.add_argument("file", help="the proof's JSON (a file, or - for stdin)")
    check_proof.add_argument("--root", help="the trusted root (hex) of the proof's tree (NEW's)")
    check_proof.add_argument("--old-root", help="a consistency proof: the trusted root of OLD")
    check_proof.add_argument(
        "--checkpoint",
        metavar="NOTE",
        help="instead of --root: a checkpoint note of the proof's tree (`checkpoint`, GET "
        "/v1/checkpoint?size=N), opened with --log-key; its root is the one trusted",
    )
    check_proof.add_argument(
        "--old-checkpoint",
        metavar="NOTE",
        help="instead of --old-root: a checkpoint note of OLD, opened with --log-key",
    )
    check_proof.add_argument(
        "--log-key", metavar="VKEY", help="the log's verifier key the checkpoints must verify under"
    )
    check_proof.set_defaults(handler=_verify_proof)

    export = commands.add_parser("export", help="write events with their seals as JSON lines")
    scope = export.add_mutually_exclusive_group(required=True)
    scope.add_argument("--task", metavar="ID", help="one task's events")
    scope.add_argument("--all", action="store_true", help="every event")
    export.add_argument("--output", metavar="FILE", help="write here instead of stdout")
    export.set_defaults(handler=_export)

    check = commands.add_parser(
        "verify-export", help="check an export file offline (exit 0 only when intact)"
    )
    check.add_argument("file")
    check.set_defaults(handler=_verify_export)

    archive = commands.add_parser(
        "archive",
        help="export finished tasks' chains to a new file, then delete them behind one sealed "
        "TASKS_ARCHIVED event",
    )
    # Without a subcommand, `archive` archives (its options then required, checked by the
    # handler: argparse would demand them of `archive show` too).
    archive.add_argument(
        "--finished-before",
        metavar="TIMESTAMP",
        help="archive SUCCEEDED, FAILED and CANCELLED tasks last written before this time",
    )
    archive.add_argument("--output", metavar="FILE", help="the archive file (must not exist)")
    archive.add_argument(
        "--dry-run", action="store_true", help="say what would be archived, write nothing"
    )
    archive.set_defaults(handler=_archive)
    archive_commands = archive.add_subparsers(dest="archive_command", required=False)
    show = archive_commands.add_parser(
        "show",
        help="read an archive file back: each task's goal, instructions, result, verdict and "
        "events (no database opened; verify-archive checks the file)",
    )
    show.add_argument("file", metavar="FILE")
    show.add_argument("task_id", nargs="?", metavar="TASK_ID", help="only this task")
    show.add_argument("--json", action="store_true", help="the whole answer as JSON")
    show.set_defaults(handler=_archive_show)
    restore = archive_commands.add_parser(
        "restore",
        help="put an archive's tasks back (rows and events, with their ids and seals) behind "
        "one sealed TASKS_RESTORED event, once the file checks out as verify-archive checks it",
    )
    restore.add_argument("file", metavar="FILE")
    restore.add_argument(
        "--idempotency-key", metavar="KEY", help="answer a retry with the answer recorded for KEY"
    )
    restore.set_defaults(handler=_archive_restore)

    check_archive = commands.add_parser(
        "verify-archive",
        help="check an archive file offline and against the digest the ledger recorded "
        "(exit 0 only when intact)",
    )
    check_archive.add_argument("file")
    check_archive.set_defaults(handler=_verify_archive)

    copy = commands.add_parser(
        "copy",
        help="copy a whole ledger (a SQLite file or a PostgreSQL URL) into an empty PostgreSQL "
        "ledger in one transaction, then verify it (exit 0 only when intact with the same head)",
    )
    copy.add_argument("--from", dest="source", required=True, metavar="PATH_OR_URL")
    copy.add_argument("--to", dest="target", required=True, metavar="URL")
    copy.set_defaults(handler=_copy)


def parse_head_argument(text: str) -> LedgerHead:
    if text.lstrip().startswith("{"):
        return LedgerHead.from_mapping(loads_document(text, what="head"))
    return LedgerHead.from_mapping(read_json_argument(text))


def _report(report: dict[str, Any]) -> int:
    emit(report)
    if report["intact"]:
        return 0
    counts = ", ".join(f"{code} {count}" for code, count in report["finding_counts"].items())
    sys.stderr.write(f"LOG_NOT_INTACT: {counts}\n")
    return EXIT_NOT_INTACT


def _verify(args: argparse.Namespace) -> int:
    head = None if args.head is None else parse_head_argument(args.head)
    configured = ledger_settings(args).checkpoint
    keys = checkpoint_verifier_keys(configured, args.log_key)
    witnesses = tuple(
        VerifierKey.parse(text) for text in (args.witness_key or configured.witnesses)
    )
    with open_database(args) as db, progress_bar("verify") as progress:
        report = verify_log(
            db, head=head, progress=progress, checkpoint_keys=keys, witness_keys=witnesses
        )
        return _report(report.public())


def _head(args: argparse.Namespace) -> Any:
    with open_database(args) as db:
        return ledger_head(db).public()


def _prove(args: argparse.Namespace) -> Any:
    if args.consistency is not None:
        if args.event_id is not None or args.size is not None:
            raise LedgerError("USAGE_INVALID", "--consistency OLD NEW takes no EVENT_ID or --size")
        old, new = args.consistency
        with open_database(args) as db:
            return prove_consistency(db, old, new).public()
    if args.event_id is None:
        raise LedgerError("USAGE_INVALID", "give EVENT_ID, or --consistency OLD NEW")
    if not args.timeout >= 0:
        raise LedgerError("USAGE_INVALID", "--timeout is a number of seconds, 0 or more")
    wait = args.timeout if args.wait else 0.0
    with open_database(args) as db:
        return prove_integrated(db, args.event_id, args.size, wait_seconds=wait).public()


def _integrate(args: argparse.Namespace) -> Any:
    if not args.interval > 0:
        raise LedgerError("USAGE_INVALID", "--interval is a number of seconds above 0")
    with open_database(args) as db:
        if db.integrates_inline:  # every write appended its own leaves
            return {"engine": db.engine, "inline": True, "tree_size": current_tree_head(db).size}
        integrator = Integrator(db)
        done = integrator.catch_up(read_clock(system_clock))
        while args.follow:
            if not done.more:
                time.sleep(args.interval)
            done = integrator.run_pass(read_clock(system_clock))
        return {"engine": db.engine, "inline": False, **done.public()}


def _verify_proof(args: argparse.Namespace) -> Any:
    """Offline: the proof against the roots given, or those of checkpoints the log's key signed."""
    if (args.root is None) == (args.checkpoint is None):
        raise LedgerError("USAGE_INVALID", "give --root or --checkpoint (with --log-key)")
    if args.old_root is not None and args.old_checkpoint is not None:
        raise LedgerError("USAGE_INVALID", "give --old-root or --old-checkpoint, not both")
    if (args.checkpoint or args.old_checkpoint) and args.log_key is None:
        raise LedgerError("USAGE_INVALID", "a checkpoint is opened with the log's --log-key")
    proof = parse_proof(read_json_argument(args.file))
    log_key = None if args.log_key is None else VerifierKey.parse(args.log_key)

    def trusted(text: str | None, note: str | None, size: int, option: str) -> bytes | None:
        if note is None:
            return None if text is None else parse_root(text, option)
        assert log_key is not None
        opened = open_checkpoint(read_note_argument(note), log_key, check_ed25519)
        return checkpoint_root(opened.checkpoint, size)

    if isinstance(proof, InclusionProof):
        if args.old_root is not None or args.old_checkpoint is not None:
            raise LedgerError(
                "USAGE_INVALID", "--old-root and --old-checkpoint are for a consistency proof"
            )
        root = trusted(args.root, args.checkpoint, proof.tree_size, "--root")
        assert root is not None
        proof.check(root)
        return {"verified": True, "kind": "inclusion", **proof.public()}
    new_root = trusted(args.root, args.checkpoint, proof.new_size, "--root")
    assert new_root is not None
    old_root = trusted(args.old_root, args.old_checkpoint, proof.old_size, "--old-root")
    proof.check(new_root, old_root)
    return {"verified": True, "kind": "consistency", **proof.public()}


def _export(args: argparse.Namespace) -> Any:
    task_id = None if args.all else str(args.task)
    with open_database(args) as db:
        if args.output is None:
            _export_with_progress(db, sys.stdout, task_id)
            return 0
        summary = _export_to_file(db, Path(args.output), task_id)
    return {**summary, "output": args.output}


def _export_to_file(db: Database, path: Path, task_id: str | None) -> dict[str, Any]:
    """A regular or new file is written beside the target and renamed over it, so no half-written
    export is ever seen; a device or FIFO is written through, as renaming would replace it."""
    partial = None
    try:
        try:
            mode = os.stat(path).st_mode
        except FileNotFoundError:
            mode = stat.S_IFREG
        if stat.S_ISDIR(mode) or not path.name:  # `.`, `/`
            raise IsADirectoryError(errno.EISDIR, os.strerror(errno.EISDIR))
        if not stat.S_ISREG(mode):
            with open(path, "w", encoding="ascii", newline="\n") as out:
                return _export_with_progress(db, out, task_id)
        partial = path.with_name(path.name + ".partial")
        with open(partial, "w", encoding="ascii", newline="\n") as out:
            summary = _export_with_progress(db, out, task_id)
            out.flush()
            os.fsync(out.fileno())
        os.replace(partial, path)
    except BaseException as exc:
        if partial is not None:
            with contextlib.suppress(OSError, ValueError):
                partial.unlink()
        if not isinstance(exc, OSError | ValueError):  # ValueError: a NUL in the path
            raise
        detail = exc.strerror if isinstance(exc, OSError) else "not a usable path"
        raise LedgerError("OUTPUT_UNWRITABLE", f"{str(path)[:200]!r}: {detail}") from None
    return summary


def _export_with_progress(db: Database, out: IO[str], task_id: str | None) -> dict[str, Any]:
    with progress_bar("export") as progress:
        return export_log(db, out, task_id=task_id, progress=progress)


def _verify_export(args: argparse.Namespace) -> int:
    return _report(verify_export(args.file).public())


def _archive(args: argparse.Namespace) -> Any:
    if args.finished_before is None or args.output is None:
        raise LedgerError(
            "USAGE_INVALID", "archive needs --finished-before TIMESTAMP and --output FILE"
        )
    with open_database(args) as db, progress_bar("archive") as progress:
        return archive_tasks(
            db,
            finished_before=args.finished_before,
            output=args.output,
            dry_run=args.dry_run,
            progress=progress,
        )


def _archive_restore(args: argparse.Namespace) -> Any:
    with open_database(args) as db:
        return restore_archive(db, args.file, idempotency_key=args.idempotency_key)


def _archive_show(args: argparse.Namespace) -> int:
    shown = show_archive(args.file, args.task_id)
    if args.json:
        emit(shown)
    else:
        sys.stdout.write(render_archive(shown))
    return 0


def render_archive(shown: dict[str, Any]) -> str:
    """`archive show` as a person reads it: per task its main columns, bindings and events."""
    out = [
        f"archive {shown['file']} (format {shown['format']}, finished before "
        f"{shown['finished_before']}): {len(shown['tasks'])} task(s)"
    ]
    if not shown["rows_kept"]:
        out.append("format 1: the file holds the rows' digests only, not their columns")
    for task in shown["tasks"]:
        out.append("")
        out.append(f"task {task['task_id']}")
        for name in ("status", "goal", "instructions", "result", "verification"):
            value = task[name]
            text = value if isinstance(value, str) else json.dumps(value, sort_keys=True)
            out.append(f"  {name:<13} {_one_line(text)}")
        for bound in task["bindings"]:
            binding = json.dumps(bound["binding"], sort_keys=True)
            out.append(f"  {'binding':<13} {bound['job_id']}  {_one_line(binding)}")
        out.append(f"  {'events':<13} {len(task['events'])}")
        for event in task["events"]:
            payload = _one_line(json.dumps(event["payload"], sort_keys=True))
            out.append(
                f"    {event['event_id']!s:>6}  {event['created_at']}  "
                f"{event['event_type']:<28} {payload}"
            )
    return "\n".join(out) + "\n"


def _one_line(text: str, limit: int = 120) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 3] + "..."


def _verify_archive(args: argparse.Namespace) -> int:
    with open_database(args) as db:
        return _report(verify_archive(db, args.file))


def _copy(args: argparse.Namespace) -> Any:
    if not is_database_url(args.target):
        raise LedgerError("COPY_TARGET_INVALID", "--to must be a PostgreSQL URL")
    if not is_database_url(args.source):
        engine_for(args.source).require_ledger(args.source)  # a file: it must exist
    with Database(args.source, migrate=False) as source, Database(args.target) as target:
        report = copy_ledger(source, target).public()
    emit(report)
    return 0 if report["target_intact"] and report["heads_equal"] else EXIT_NOT_INTACT
