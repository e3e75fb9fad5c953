"""Commands of the task lifecycle. Requests are JSON documents (`--json FILE`, `-` for stdin)
with `TaskLedger`'s fields, so that lease tokens never appear on a command line; an owner's
move of one task (`task pause`) takes its task, reason and key as arguments.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from typing import Any, TypeAlias, cast

import attrs
from aios_ledger.core import (
    ClaimBatchRequest,
    ClaimRequest,
    TaskCreateCommand,
)
from aios_ledger.core.batches import structure_batch
from aios_ledger.core.tasks.operations import TASK_OPERATIONS
from aios_ledger.core.tasks.queries import MAX_LIST
from aios_ledger.core.tasks.requests import MAX_CLAIM_BATCH, TaskRequest
from aios_ledger.core.tasks.transitions import TaskTransition
from aios_ledger.shell.cli_support import (
    UsageError,
    emit,
    json_flag,
    read_json_argument,
)
from aios_ledger.shell.console import (
    Shown,
    history_view,
    is_terminal,
    print_changes,
    task_view,
    tasks_view,
    watch_on_terminal,
)
from aios_ledger.shell.tasks.arguments import task_ledger

WATCH_INTERVAL = 2.0
MAX_WATCH_INTERVAL = 3600.0


Commands: TypeAlias = "argparse._SubParsersAction[argparse.ArgumentParser]"


def register(commands: Commands) -> None:
    """The task commands; each operation's is made from its row (`row.command`: `task NAME`
    under `task`, else a command of its own), but for those written below."""
    rows = TASK_OPERATIONS.values()
    moves = [row.command[5:] for row in rows if row.command and row.command.startswith("task ")]
    names = ["create", "list", "show", "history", *moves[1:]]  # moves[0]: create
    task = commands.add_parser("task", help="tasks: " + ", ".join(names))
    task_commands = task.add_subparsers(dest="task_command", required=True)
    _create_command(task_commands)
    listing = task_commands.add_parser(
        "list", help="tasks, in claim order when --status is given; --agent: those it held"
    )
    listing.add_argument("--status", help="only tasks of this status")
    listing.add_argument(
        "--agent",
        help="only tasks this agent held in any attempt (newest first, as GET /v1/tasks?agent=)",
    )
    listing.add_argument(
        "--limit", type=int, default=100, help=f"at most this many (<= {MAX_LIST})"
    )
    listing.add_argument(
        "--watch",
        type=float,
        nargs="?",
        const=WATCH_INTERVAL,
        metavar="SECONDS",
        help=f"keep listing until Ctrl-C: re-drawn every SECONDS (default {WATCH_INTERVAL}) on "
        "a terminal; elsewhere one JSON array a line, each time the list changes",
    )
    json_flag(listing)
    listing.set_defaults(handler=_task_list)
    show = task_commands.add_parser("show", help="one task")
    show.add_argument("task_id")
    json_flag(show)
    show.set_defaults(handler=_task_show)
    history = task_commands.add_parser(
        "history", help="a task's timeline: time, event, agent, attempt, decision, reason"
    )
    history.add_argument("task_id")
    json_flag(history)
    history.set_defaults(handler=_task_history)

    for row in rows:
        if row.command is None or row.name == "create":  # create: first under `task`, above
            continue
        group, _, name = row.command.rpartition(" ")
        parent = task_commands if group == "task" else commands
        if row.name in _WRITTEN:
            _WRITTEN[row.name](parent, name)
        elif group == "task" and set(attrs.fields_dict(cast(Any, row.request))) == set(_MOVE):
            _move_command(parent, name, row)
        else:
            _document_command(parent, name, row)


def _create_command(commands: Commands) -> None:
    create = _json_command(
        commands,
        "create",
        'enqueue tasks: {"idempotency_key": K, "task": {...}} or a list of them',
        _task_create,
    )
    create.add_argument(
        "--governed",
        action="store_true",
        help="create each task governed: no worker may claim it until its initial execution "
        "projection (`project`) lands",
    )
    _budget_options(create)


def _claim_command(commands: Commands, name: str) -> None:
    claim = _json_command(
        commands,
        name,
        "claim the next eligible task: {agent_id, capabilities, lease_seconds, "
        "task_id?, idempotency_key?, lease_token?}; prints null when there is none",
        _claim,
    )
    claim.add_argument(
        "--limit",
        type=int,
        metavar="N",
        help=f"claim up to N tasks in one transaction (<= {MAX_CLAIM_BATCH}) and print a list; "
        "the request then names no task_id, idempotency_key or lease_token",
    )


def _expire_command(commands: Commands, name: str) -> None:
    expire = commands.add_parser(name, help=TASK_OPERATIONS["expire"].summary)
    expire.set_defaults(handler=_expire)


# The operations whose commands take more than their request: flags, a batch, a loop.
_WRITTEN: dict[str, Callable[[Commands, str], None]] = {
    "claim": _claim_command,
    "expire": _expire_command,
}

# The fields of an owner's move of one task: its command takes them as arguments.
_MOVE = ("task_id", "reason", "idempotency_key")


def _move_command(commands: Commands, name: str, row: TaskTransition) -> None:
    """`task NAME TASK_ID --reason TEXT --idempotency-key KEY`: an owner's move of one task."""
    move = commands.add_parser(name, help=row.summary)
    move.add_argument("task_id")
    move.add_argument("--reason", required=True, help="why (kept in the sealed event)")
    move.add_argument(
        "--idempotency-key",
        required=True,
        metavar="KEY",
        help="the key the move is filed under: the same key again gets the answer recorded for it",
    )

    def handle(args: argparse.Namespace) -> Any:
        request = row.request.from_mapping({name: getattr(args, name) for name in _MOVE})
        with task_ledger(args) as ledger:
            return ledger.apply(request)

    move.set_defaults(handler=handle)


def _document_command(commands: Commands, name: str, row: TaskTransition) -> None:
    """A command whose JSON document is one request of the row's record; a keyed one takes a
    list of them too, since a repeat of the whole list after a lost answer is then safe."""
    fields = ", ".join(
        field.name + ("?" if field.default is not attrs.NOTHING else "")
        for field in attrs.fields(cast(Any, row.request))
        if field.name != "agent_id"  # the acting agent: the ledger's to name
    )
    many = ", or a list of them (one transaction: all or none)" if row.keyed else ""
    build = cast(Callable[[object], TaskRequest[Any]], row.request.from_mapping)
    apply = _apply_document if row.keyed else _apply_one

    def handle(args: argparse.Namespace) -> Any:
        return apply(args, read_json_argument(args.json), build)

    _json_command(commands, name, f"{row.summary}: {{{fields}}}{many}", handle)


def _json_command(
    commands: Commands,
    name: str,
    help: str,
    handler: Callable[[argparse.Namespace], Any],
) -> argparse.ArgumentParser:
    """A command whose request is the JSON document of `--json FILE`."""
    parser = commands.add_parser(name, help=help)
    parser.add_argument("--json", required=True, metavar="FILE", help="request JSON (- for stdin)")
    parser.set_defaults(handler=handler)
    return parser


# `task create`'s budget flags: each sets that limit of every task's `budget` in the file.
_BUDGET_FLAGS = (
    ("--wall-seconds", "wall_seconds", "the agent's process is stopped after SECONDS"),
    ("--max-input-tokens", "input_tokens", "input tokens over all attempts"),
    ("--max-output-tokens", "output_tokens", "output tokens over all attempts"),
)


def _budget_options(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group(
        "budget",
        "limits set in each task's `budget` (over what the file says); the attempts "
        "limit is the task's max_attempts",
    )
    for flag, name, what in _BUDGET_FLAGS:
        group.add_argument(flag, dest=f"budget_{name}", type=int, metavar="N", help=what)
    group.add_argument(
        "--max-cost",
        metavar="MICROS:CURRENCY",
        help="cost over all attempts, in millionths of the currency's unit (2500000:EUR is "
        "EUR 2.50)",
    )


def _budget_flags(args: argparse.Namespace) -> dict[str, Any]:
    """The budget limits the command line sets (empty: none)."""
    limits: dict[str, Any] = {
        name: getattr(args, f"budget_{name}")
        for _, name, _ in _BUDGET_FLAGS
        if getattr(args, f"budget_{name}") is not None
    }
    if args.max_cost is not None:
        micros, _, currency = str(args.max_cost).partition(":")
        if not micros.isdigit() or not currency:
            raise UsageError("USAGE_INVALID", "--max-cost takes MICROS:CURRENCY, e.g. 2500000:EUR")
        limits["cost"] = {"micros": int(micros), "currency": currency}
    return limits


def _each_create(document: Any, change: Callable[[dict[str, Any]], dict[str, Any]]) -> Any:
    """Each create of `document` with its task changed; the request's own checks refuse the rest."""
    if isinstance(document, list):
        return [_each_create(item, change) for item in document]
    if not isinstance(document, dict) or not isinstance(document.get("task"), dict):
        return document
    return {**document, "task": change(document["task"])}


def _with_budget(task: dict[str, Any], limits: dict[str, Any]) -> dict[str, Any]:
    """The task with the command line's limits in its budget, over what the file says."""
    stated = task.get("budget")
    return {**task, "budget": {**stated, **limits} if isinstance(stated, dict) else limits}


def _task_create(args: argparse.Namespace) -> Any:
    document = read_json_argument(args.json)
    limits = _budget_flags(args)
    if limits:
        document = _each_create(document, lambda task: _with_budget(task, limits))
    if args.governed:
        document = _each_create(document, lambda task: {**task, "governed": True})
    return _apply_document(args, document, TaskCreateCommand.from_mapping)


def _task_list(args: argparse.Namespace) -> Any:
    if args.watch is not None:
        return _task_watch(args)
    with task_ledger(args) as ledger:
        return Shown(ledger.list_tasks(args.status, limit=args.limit, agent=args.agent), tasks_view)


def _task_watch(args: argparse.Namespace) -> int:
    if not 0 < args.watch <= MAX_WATCH_INTERVAL:
        raise UsageError("USAGE_INVALID", f"--watch takes 0 < SECONDS <= {MAX_WATCH_INTERVAL}")
    with task_ledger(args) as ledger:

        def read() -> Any:
            return ledger.list_tasks(args.status, limit=args.limit, agent=args.agent)

        if not args.json and is_terminal(sys.stdout):
            watch_on_terminal(read, tasks_view, sys.stdout, interval=args.watch)
        else:
            print_changes(read, sys.stdout, interval=args.watch)
    return 0


def _task_show(args: argparse.Namespace) -> Shown:
    with task_ledger(args) as ledger:
        return Shown(ledger.get(args.task_id), task_view)


def _task_history(args: argparse.Namespace) -> Shown:
    with task_ledger(args) as ledger:
        return Shown(ledger.history(args.task_id), history_view)


def _claim(args: argparse.Namespace) -> Any:
    """`--limit N`: a batch, whose own record refuses a task, key or token as unknown fields."""
    document = read_json_argument(args.json)
    request: ClaimRequest | ClaimBatchRequest
    if args.limit is None:
        request = ClaimRequest.from_mapping(document)
    elif isinstance(document, dict):
        request = ClaimBatchRequest.from_mapping({**document, "limit": args.limit})
    else:
        request = ClaimBatchRequest.from_mapping(document)
    with task_ledger(args) as ledger:
        answer = ledger.apply(request)
    if answer is None:
        emit(None)
        return 0
    return answer


def _apply_document(
    args: argparse.Namespace, document: Any, record: Callable[[object], TaskRequest[Any]]
) -> Any:
    """One request of `record`, or a list of them in one transaction (all or none)."""
    if isinstance(document, list):
        requests = structure_batch(document, record)
        with task_ledger(args) as ledger:
            return ledger.apply_all(requests)
    return _apply_one(args, document, record)


def _apply_one(
    args: argparse.Namespace, document: Any, record: Callable[[object], TaskRequest[Any]]
) -> Any:
    request = record(document)
    with task_ledger(args) as ledger:
        return ledger.apply(request)


def _expire(args: argparse.Namespace) -> Any:
    with task_ledger(args) as ledger:
        return ledger.expire_leases()
