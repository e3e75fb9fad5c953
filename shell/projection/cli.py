"""Commands of the foundation: init, migrate, binding put, project, events."""

from __future__ import annotations

import argparse
import os
import sys
from typing import TYPE_CHECKING, Any, TextIO

from aios_ledger.core import InitialExecutionProjectionError, JsonObject
from aios_ledger.core.config import ProjectionSettings
from aios_ledger.core.projection import (
    InitialExecutionProjectionRequest,
    ProjectionAnswer,
    SourceCaptureProjectionRecoveryRequest,
)
from aios_ledger.shell.cli_support import (
    EXIT_REFUSED,
    UsageError,
    database_path,
    emit,
    json_flag,
    ledger_settings,
    migrate_on_open,
    new_database_path,
    open_database,
    read_json_argument,
    setting_option,
)
from aios_ledger.shell.clock import AUTHORIZATION_ENV, configured_authorization
from aios_ledger.shell.console import Shown, event_line, events_view, is_terminal
from aios_ledger.shell.db.connection import Database
from aios_ledger.shell.db.engines import is_database_url
from aios_ledger.shell.db.migrator import migrate_database, migration_status
from aios_ledger.shell.db.schema_dump import schema_sql
from aios_ledger.shell.log.follow import follow_events, json_line, log_end
from aios_ledger.shell.projection.bindings import RegisteredBindingResolver, register_binding
from aios_ledger.shell.projection.store import InitialExecutionProjectionStore
from aios_ledger.shell.remote.credentials import API_URL_ENV
from aios_ledger.shell.tasks.arguments import task_ledger
from aios_ledger.shell.work.cli import api_client, api_options

# The API's client (and httpx under it) is imported only where --api or the binding API is used.
if TYPE_CHECKING:
    from aios_ledger.shell.remote.bindings import HttpBindingResolver

FOLLOW_INTERVAL = 0.5
# `events --follow --api` gives up after this many reconnections in a row: minutes of backoff.
STREAM_RECONNECTS = 100
MAX_INTERVAL = 3600.0


def register(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    init = commands.add_parser("init", help="create or migrate the database")
    init.set_defaults(handler=_init)

    migrate = commands.add_parser("migrate", help="apply pending migrations")
    migrate.add_argument("--status", action="store_true", help="only show applied and pending")
    migrate.set_defaults(handler=_migrate)

    upgrade = commands.add_parser(
        "upgrade",
        help="make a ledger of the last 0.x release a 1.0 ledger: verify it, rewrite its seals "
        "and its schema history in one transaction, verify it again (once; again says so)",
    )
    upgrade.set_defaults(handler=_upgrade)

    binding = commands.add_parser("binding", help="governed bindings")
    binding_commands = binding.add_subparsers(dest="binding_command", required=True)
    put = binding_commands.add_parser("put", help="register a binding from a JSON file (- stdin)")
    put.add_argument("file")
    put.set_defaults(handler=_binding_put)

    project = commands.add_parser("project", help="project a task's initial execution envelope")
    project.add_argument("task_id")
    form = project.add_mutually_exclusive_group(required=True)
    form.add_argument(
        "--pin",
        action="store_true",
        help="read the task and its binding, show what the projection authorizes, and project "
        "exactly that: a request pinned to what was read (no request file)",
    )
    form.add_argument("--request", help="request JSON file (- for stdin)")
    project.add_argument(
        "--from-source-capture",
        action="store_true",
        help="with --request: recover after a governed source capture that asked for rework",
    )
    project.add_argument(
        "--preview",
        action="store_true",
        help="print the envelope and digest that would be projected (with --pin: what it "
        "authorizes and the pinned request), and whether it would be accepted; write nothing",
    )
    project.add_argument(
        "--adapter",
        help="with --pin (required): the runtime adapter the envelope runs; workers offering "
        "agent.runtime.ADAPTER may claim the task",
    )
    project.add_argument(
        "--job", metavar="JOB_ID", help="with --pin: the job (default: the task's one binding)"
    )
    project.add_argument("--reason", help="with --pin: the reason the event records")
    project.add_argument(
        "--idempotency-key",
        metavar="KEY",
        help="with --pin: the request's key (default: derived from what it pins, so the same "
        "read is the same request)",
    )
    project.add_argument(
        "--yes",
        "-y",
        action="store_true",
        help="with --pin: project without asking (it asks only when stdin is a terminal)",
    )
    setting_option(
        project,
        "--authorization-id",
        ProjectionSettings,
        help=f"the owner authorization id (before ${AUTHORIZATION_ENV}, then the config file)",
    )
    json_flag(project)
    project.set_defaults(handler=_project)

    events = commands.add_parser(
        "events",
        help="a task's events in order; with --follow, new events (of one task or all) as they "
        "are sealed, until Ctrl-C",
    )
    events.add_argument("task_id", nargs="?", help="the task (optional with --follow: all tasks)")
    events.add_argument(
        "--follow",
        action="store_true",
        help="keep printing new events, one JSON line each on a pipe, until Ctrl-C",
    )
    events.add_argument(
        "--after",
        type=int,
        metavar="EVENT_ID",
        help="with --follow: start after this event id (0: from the first event; default: "
        "only events sealed from now on)",
    )
    events.add_argument(
        "--interval",
        type=float,
        metavar="SECONDS",
        help=f"with --follow: how often the log is read (default: {FOLLOW_INTERVAL})",
    )
    api_options(events)  # with --follow: the server's event stream instead of --db
    json_flag(events)
    events.set_defaults(handler=_events)

    dump = commands.add_parser(
        "schema-dump",
        help="print the schema after all migrations (PostgreSQL's with --db URL: migrated into "
        "a scratch schema there, read back with pg_dump, dropped)",
    )
    dump.set_defaults(handler=_schema_dump)


def _init(args: argparse.Namespace) -> Any:
    with Database.as_found(new_database_path(args)) as db:
        return _migration_report(db)


def _migration_report(db: Database) -> dict[str, Any]:
    report = migrate_database(db)
    return {
        "database": db.path,
        "applied": list(report.applied),
        "adopted_legacy": report.adopted_legacy,
        "sealed_at_adoption": report.sealed_at_adoption,
    }


def _migrate(args: argparse.Namespace) -> Any:
    with Database.as_found(database_path(args)) as db:
        if args.status:
            return migration_status(db)
        return _migration_report(db)


def _upgrade(args: argparse.Namespace) -> Any:
    from aios_ledger.shell.log.upgrade import upgrade_ledger

    with Database.as_found(database_path(args)) as db:
        return upgrade_ledger(db)


def _binding_put(args: argparse.Namespace) -> Any:
    with open_database(args) as db:
        return register_binding(db, read_json_argument(args.file))


def _project(args: argparse.Namespace) -> Any:
    _check_form(args)
    raw = None if args.pin else read_json_argument(args.request)
    path, migrate = database_path(args), migrate_on_open(args)
    kind: type[InitialExecutionProjectionRequest | SourceCaptureProjectionRecoveryRequest] = (
        SourceCaptureProjectionRecoveryRequest
        if args.from_source_capture
        else InitialExecutionProjectionRequest
    )
    request = None if args.pin else kind.from_mapping(raw)
    authorization = owner_authorization(args)
    resolver: RegisteredBindingResolver | HttpBindingResolver
    api_url = os.environ.get(API_URL_ENV)
    if api_url:
        from aios_ledger.shell.remote.bindings import HttpBindingResolver

        # The unit's loop: the binding comes from the governed write API, with its credential.
        resolver = HttpBindingResolver(api_url)
    else:
        resolver = RegisteredBindingResolver(path, migrate=migrate)
    store = InitialExecutionProjectionStore(
        path, resolver, migrate=migrate, authorization_id=authorization
    )
    try:
        if request is None:
            return _pin(args, store)
        if args.preview:
            return _preview_answer(store.preview(args.task_id, request))
        if isinstance(request, SourceCaptureProjectionRecoveryRequest):
            return store.project_from_source_capture(args.task_id, request)
        return store.project(args.task_id, request)
    finally:
        store.close()
        resolver.close()


_PIN_ONLY = ("adapter", "job", "reason", "idempotency_key", "yes")


def _check_form(args: argparse.Namespace) -> None:
    """The options of one form are usage mistakes in the other."""
    if args.pin:
        if args.from_source_capture:
            raise UsageError(
                "USAGE_INVALID", "--pin projects a new task; a recovery takes --request"
            )
        if args.adapter is None:
            raise UsageError(
                "USAGE_INVALID",
                "--pin needs --adapter NAME: the runtime adapter the envelope runs (workers "
                "offering agent.runtime.NAME may claim the task)",
            )
        return
    given = [name for name in _PIN_ONLY if getattr(args, name) not in (None, False)]
    if given:
        flags = ", ".join("--" + name.replace("_", "-") for name in given)
        raise UsageError("USAGE_INVALID", f"{flags} go with --pin, not with --request")


def owner_authorization(args: argparse.Namespace) -> str:
    """The owner authorization id `project` runs under: the option, the environment, then the
    config file, the order every setting of the command line follows."""
    chosen = args.authorization_id or configured_authorization()
    if chosen is None:
        chosen = ledger_settings(args).projection.authorization_id
    if chosen is None:
        raise InitialExecutionProjectionError(
            "AUTHORIZATION_DENIED",
            "no owner authorization id is configured: pass --authorization-id ID, set "
            f"{AUTHORIZATION_ENV}, or set authorization_id under [projection] in the config "
            "file (docs/configuration.md)",
        )
    return str(chosen)


def _pin(args: argparse.Namespace, store: InitialExecutionProjectionStore) -> Any:
    """Read, show, ask and apply the projection pinned to what was read: text on a terminal,
    else one JSON document."""
    pinned = store.pin(
        args.task_id,
        adapter=args.adapter,
        job_id=args.job,
        reason=args.reason,
        idempotency_key=args.idempotency_key,
    )
    human = not args.json and is_terminal(sys.stdout)
    document: dict[str, Any] = {"authorized": pinned.authorized, "request": pinned.request.public()}
    if args.preview:
        preview = store.preview(args.task_id, pinned.request)
        document = {
            "preview": True,
            **document,
            "would_project": preview["would_project"],
            "refusal": preview["refusal"],
        }
        if human:
            sys.stdout.write(authorized_text(pinned.authorized))
            sys.stdout.write(_verdict_text(preview["refusal"]))
            return 0 if preview["refusal"] is None else EXIT_REFUSED
        return _preview_answer(document)
    if not args.yes and is_terminal(sys.stdin):
        # On stderr unless stdout is a terminal, so that a JSON stdout stays one document.
        _confirm(pinned.authorized, sys.stdout if human else sys.stderr)
    elif human:
        sys.stdout.write(authorized_text(pinned.authorized))
    answer = store.project(args.task_id, pinned.request)
    if human:
        sys.stdout.write(projected_text(answer))
        return 0
    return {**document, "projection": answer}


def _confirm(authorized: JsonObject, stream: TextIO) -> None:
    stream.write(authorized_text(authorized) + "Project it? [y/N] ")
    stream.flush()
    reply = sys.stdin.readline()
    if reply.strip().lower() not in {"y", "yes"}:
        raise InitialExecutionProjectionError(
            "PROJECTION_NOT_CONFIRMED",
            "the owner did not confirm: nothing was written (--yes projects without asking)",
        )


# What a person reads before authorizing: one line each, whole ids and digests.
_AUTHORIZED_LINES = (
    ("job", "{job_id}"),
    ("repository", "{repository}"),
    ("base", "{base_oid}"),
    ("branch", "{target_branch} ({branch_mode}, generation {generation})"),
    ("capability", "{capability}"),
    ("adapter", "{adapter}"),
    ("envelope", "{execution_digest}"),
    ("authorization", "{authorization_id}"),
    ("key", "{idempotency_key}"),
)


def authorized_text(authorized: JsonObject) -> str:
    """What a pinned projection authorizes, as a person reads it on a terminal."""
    head = (
        "Project task {task_id} (as read: {status}, revision {revision}, attempt {attempt}) "
        "under this envelope:\n"
    ).format_map(authorized)
    width = max(len(label) for label, _ in _AUTHORIZED_LINES)
    lines = [
        f"  {label.ljust(width)}  {form.format_map(authorized)}\n"
        for label, form in _AUTHORIZED_LINES
    ]
    return head + "".join(lines)


def projected_text(answer: ProjectionAnswer) -> str:
    capability = ", ".join(answer["required_capabilities"])
    return (
        f"Projected {answer['task_id']}: revision {answer['revision']}, envelope "
        f"{answer['execution_digest']}"
        + (" (a replay: it was projected already)" if answer["idempotent"] else "")
        + f". Workers offering {capability} may claim it.\n"
    )


def _verdict_text(refusal: JsonObject | None) -> str:
    if refusal is None:
        return "It would project (nothing written: --preview).\n"
    return f"It would be refused: {refusal['code']}: {refusal['detail']}\n"


def _preview_answer(preview: dict[str, Any]) -> Any:
    """A preview the projection would refuse also exits 1 with its code, as `project` would."""
    refusal = preview.get("refusal")
    if refusal is None:
        return preview
    emit(preview)
    sys.stderr.write(f"{refusal['code']}: {refusal['detail']}\n")
    return EXIT_REFUSED


def _events(args: argparse.Namespace) -> Any:
    if args.follow:
        return _follow(args)
    if args.task_id is None:
        raise UsageError("USAGE_INVALID", "events needs a TASK_ID (or --follow for every task)")
    if args.after is not None or args.interval is not None or args.api is not None:
        raise UsageError("USAGE_INVALID", "--after, --interval and --api go with --follow")
    with task_ledger(args) as ledger:
        return Shown(ledger.events(args.task_id), events_view)


def _follow(args: argparse.Namespace) -> int:
    interval = FOLLOW_INTERVAL if args.interval is None else args.interval
    if not 0 < interval <= MAX_INTERVAL or (args.after is not None and args.after < 0):
        raise UsageError(
            "USAGE_INVALID", f"--interval takes 0 < SECONDS <= {MAX_INTERVAL}; --after >= 0"
        )
    line = json_line if args.json or not is_terminal(sys.stdout) else event_line
    client = api_client(args)
    if client is not None:
        if args.interval is not None:
            client.close()
            raise UsageError("USAGE_INVALID", "--interval reads a --db; the API's stream pushes")
        with client:
            # Each event of the server's stream as it comes, through reconnections.
            events = client.follow_events(
                after=args.after, task_id=args.task_id, reconnects=STREAM_RECONNECTS
            )
            for event in events:
                sys.stdout.write(line(event) + "\n")
                sys.stdout.flush()
        return 0
    if args.task_id is not None:
        with task_ledger(args) as ledger:
            ledger.get(args.task_id)  # a mistyped id is TASK_NOT_FOUND, not a silent wait
    with open_database(args) as db:
        after = log_end(db) if args.after is None else args.after
        follow_events(
            db, sys.stdout, after=after, task_id=args.task_id, interval=interval, line=line
        )
    return 0


def _schema_dump(args: argparse.Namespace) -> Any:
    sys.stdout.write(schema_sql(args.db if is_database_url(args.db) else None))
    return 0
