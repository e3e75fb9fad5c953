"""Commands for runs and auxiliary runs: run create|append|evidence, aux list|show."""

from __future__ import annotations

import argparse
from typing import Any

from aios_ledger.core.auxiliary import AuxiliaryRunState
from aios_ledger.core.runs import EvidenceReadRequest
from aios_ledger.core.runs.evidence import DEFAULT_MAX_BYTES, DEFAULT_MAX_EVENTS
from aios_ledger.shell.auxiliary.service import (
    auxiliary_run_events,
    list_auxiliary_runs,
    read_auxiliary_run,
)
from aios_ledger.shell.cli_support import (
    json_flag,
    open_database,
    read_json_argument,
)
from aios_ledger.shell.console import Shown, aux_runs_view
from aios_ledger.shell.runs.store import RunEvidenceReader, RunStore


def register(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    run = commands.add_parser("run", help="runs of a session and their events")
    run_commands = run.add_subparsers(dest="run_command", required=True)

    create = run_commands.add_parser("create", help="create a run (same id and prompt: replay)")
    create.add_argument("session_id")
    create.add_argument("prompt")
    create.add_argument("--run-id", help="the run's id (default: a new random id)")
    create.set_defaults(handler=_run_create)

    append = run_commands.add_parser("append", help="append an event to a run")
    append.add_argument("run_id")
    append.add_argument("kind")
    append.add_argument("--payload", help="payload JSON file (- for stdin); default null")
    append.set_defaults(handler=_run_append)

    evidence = run_commands.add_parser(
        "evidence", help="a bounded, digest-pinned evidence snapshot of a run"
    )
    evidence.add_argument("session_id")
    evidence.add_argument("run_id")
    evidence.add_argument(
        "--max-events", type=int, default=DEFAULT_MAX_EVENTS, help="at most this many events"
    )
    evidence.add_argument(
        "--max-bytes", type=int, default=DEFAULT_MAX_BYTES, help="at most this many bytes"
    )
    evidence.set_defaults(handler=_run_evidence)

    aux = commands.add_parser("aux", help="auxiliary runs")
    aux_commands = aux.add_subparsers(dest="aux_command", required=True)

    listing = aux_commands.add_parser("list", help="auxiliary runs, oldest first")
    listing.add_argument(
        "--state", choices=[state.value for state in AuxiliaryRunState], help="only this state"
    )
    listing.add_argument("--session", dest="session_id", help="only runs reading this session")
    listing.add_argument("--run", dest="run_id", help="only runs reading this run")
    listing.add_argument("--limit", type=int, default=100, help="at most this many (<= 1000)")
    json_flag(listing)
    listing.set_defaults(handler=_aux_list)

    show = aux_commands.add_parser("show", help="one auxiliary run: snapshot, spec, output")
    show.add_argument("aux_id")
    show.set_defaults(handler=_aux_show)


def _runs(args: argparse.Namespace) -> RunStore:
    return RunStore(database=open_database(args))


def _run_create(args: argparse.Namespace) -> Any:
    with _runs(args) as runs:
        return runs.create_run(args.session_id, args.prompt, run_id=args.run_id).public()


def _run_append(args: argparse.Namespace) -> Any:
    payload = None if args.payload is None else read_json_argument(args.payload)
    with _runs(args) as runs:
        event = runs.append_event(args.run_id, args.kind, payload)
        return {"run_id": event.run_id, **event.public()}


def _run_evidence(args: argparse.Namespace) -> Any:
    request = EvidenceReadRequest.from_mapping(
        {
            "target": {"session_id": args.session_id, "run_id": args.run_id},
            "max_events": args.max_events,
            "max_bytes": args.max_bytes,
        }
    )
    with _runs(args) as runs:
        return RunEvidenceReader(runs).read(request).public()


def _aux_list(args: argparse.Namespace) -> Shown:
    with open_database(args) as db:
        if args.run_id is not None:  # a run that does not exist is not a run without reviews
            RunStore(database=db).get_run(args.run_id)
        rows = list_auxiliary_runs(
            db,
            state=args.state,
            session_id=args.session_id,
            run_id=args.run_id,
            limit=args.limit,
        )
    return Shown([row.listed() for row in rows], aux_runs_view)


def _aux_show(args: argparse.Namespace) -> Any:
    with open_database(args) as db:
        row = read_auxiliary_run(db, args.aux_id)
        return {**row.public(), "events": auxiliary_run_events(db, args.aux_id)}
