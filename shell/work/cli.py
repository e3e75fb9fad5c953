"""Commands of the main job: `worker`, `review` and `status`."""

from __future__ import annotations

import argparse
import functools
import logging
import time
from typing import TYPE_CHECKING, Any

from aios_ledger.core import LedgerError
from aios_ledger.core.config import ReviewSettings, WorkerSettings
from aios_ledger.core.work import next_poll_delay
from aios_ledger.shell.actors import process_acting_as
from aios_ledger.shell.cli_support import (
    EXIT_REFUSED,
    UsageError,
    command_line_actor,
    database_path,
    emit,
    json_flag,
    migrate_on_open,
    open_database,
    required_setting,
    section_settings,
    setting_option,
    synchronous,
)
from aios_ledger.shell.clock import read_clock, system_clock
from aios_ledger.shell.console import Shown, status_view
from aios_ledger.shell.remote.credentials import read_token_file
from aios_ledger.shell.work.reviewer import review_submitted
from aios_ledger.shell.work.status import read_status
from aios_ledger.shell.work.worker import Worker, WorkerConfig, require_exec_program

# The API's client (and httpx under it) is imported with --api only: a local process needs neither.
if TYPE_CHECKING:
    from aios_ledger.shell.remote.client import LedgerClient
    from aios_ledger.shell.remote.review import RemoteReview

# A long-running worker started before its API waits for it, retrying this often (doubling).
API_WAIT_MIN_SECONDS = 1.0
API_WAIT_MAX_SECONDS = 30.0
LOG = logging.getLogger("aios_ledger.worker")


def register(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    worker = commands.add_parser("worker", help="claim tasks and run a command for each")
    worker.set_defaults(handler=_worker, default_log_level="INFO")
    option = functools.partial(setting_option, worker, record=WorkerSettings)
    option("--agent-id", help="the agent's id, as claims record it")
    option(
        "--capability",
        name="capabilities",
        repeated=True,
        help="a capability this worker offers (repeat for more; replaces the file's list)",
    )
    option("--exec", help="shell command run per task: claim JSON on stdin, result on stdout")
    option("--lease-seconds", parse=int, help="each claim's lease")
    option("--timeout", parse=float, help="seconds a command may run")
    option("--max-tasks", parse=int, help="stop after this many tasks")
    option("--concurrency", parse=int, help="commands run at once, each for a task of its own")
    option("--poll-min", parse=float, help="first wait when idle, seconds")
    option("--poll-max", parse=float, help="longest wait when idle, seconds")
    option(
        "--grace",
        parse=float,
        help="seconds a running command may finish after SIGINT/SIGTERM; then it is killed "
        "and its task released",
    )
    worker.add_argument("--once", action="store_true", help="handle at most one task, then exit")
    worker.add_argument(
        "--until-empty",
        action="store_true",
        help="exit when no task is left to claim instead of polling",
    )
    api_options(worker)

    review = commands.add_parser("review", help="judge submitted tasks with an auxiliary run")
    review.set_defaults(handler=_review, default_log_level="INFO")
    option = functools.partial(setting_option, review, record=ReviewSettings)
    option(
        "--as",
        name="reviewer",
        help="who judges: the name the ledger holds against each result's author "
        "(SELF_REVIEW); required without --api, where it is the token's name",
    )
    option(
        "--exec",
        help="shell command: {instruction, evidence, result} on stdin, {decision, reason} out",
    )
    option("--limit", parse=int, help="at most this many tasks")
    option("--timeout", parse=float, help="seconds a review may run")
    option(
        "--max-attempts",
        parse=int,
        help="reviews of one task attempt that may fail before the task is left SUBMITTED "
        "for a person (each round runs at most one review per task)",
    )
    api_options(review)

    status = commands.add_parser(
        "status", help="counts by status, oldest queued task, leases about to expire, last events"
    )
    json_flag(status)
    status.set_defaults(handler=_status)


def _worker(args: argparse.Namespace) -> Any:
    settings = section_settings(args, WorkerSettings)
    command = required_setting(settings.exec, "--exec", WorkerSettings, "exec")
    require_exec_program(command)
    client = api_client(args, patient=not (args.once or args.until_empty))
    agent_id: str
    if client is None:
        agent_id = required_setting(settings.agent_id, "--agent-id", WorkerSettings, "agent_id")
    else:
        agent_id = _token_agent(client, settings.agent_id)
    # A worker acts as its agent unless it was told who it is.
    actor = functools.partial(command_line_actor, args, default=agent_id)
    config = WorkerConfig(
        agent_id=agent_id,
        capabilities=tuple(settings.capabilities),
        command=command,
        lease_seconds=settings.lease_seconds,
        timeout=settings.timeout,
        once=args.once,
        until_empty=args.until_empty,
        max_tasks=settings.max_tasks,
        poll_min=settings.poll_min,
        poll_max=max(settings.poll_max, settings.poll_min),
        grace=settings.grace,
        concurrency=settings.concurrency,
    )
    if client is not None:
        from aios_ledger.shell.remote.workspaces import RemoteWorkspaces

        workspaces = RemoteWorkspaces(client)
        worker = Worker.over(
            client,
            client,
            config,
            workspaces=workspaces,
            close=client.close,
            explain_idle=client.idle_reason,
        )
    else:
        worker = Worker(
            database_path(args),
            config,
            migrate=migrate_on_open(args),
            synchronous=synchronous(args),
        )
    worker.install_signal_handlers()
    try:
        with process_acting_as(actor):
            code = worker.run()
    finally:
        worker.close()
    summary: dict[str, Any] = {
        "agent_id": config.agent_id,
        "tasks": [
            {"task_id": o.task_id, "attempt": o.attempt, "outcome": o.outcome, "detail": o.detail}
            for o in worker.outcomes
        ],
        "exit": code,
    }
    if worker.idle is not None:
        summary["idle"] = worker.idle.public()  # why it ended without (more) work
    return summary


def api_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--api",
        metavar="URL",
        help="work through the governed write API at URL (aios-ledger serve) instead of --db",
    )
    parser.add_argument(
        "--token-file",
        metavar="FILE",
        help="with --api: the file holding this agent's API token (aios-ledger token issue)",
    )


def api_client(args: argparse.Namespace, *, patient: bool = False) -> LedgerClient | None:
    """The client of `--api URL --token-file FILE`, its token checked at once, or None without
    --api; a `patient` caller (a long-running worker) waits for an API that does not answer."""
    if args.api is None:
        if args.token_file is not None:
            raise UsageError("USAGE_INVALID", "--token-file goes with --api")
        return None
    if args.token_file is None:
        raise UsageError("USAGE_INVALID", "--api needs --token-file FILE")
    from aios_ledger.shell.remote.client import LedgerClient

    client = LedgerClient(args.api, read_token_file(args.token_file))
    try:
        client.agent_name = str(_identity(client, patient=patient)["name"])
    except BaseException:
        client.close()
        raise
    return client


def _identity(client: LedgerClient, *, patient: bool) -> dict[str, Any]:
    delay = API_WAIT_MIN_SECONDS
    while True:
        try:
            return client.whoami()
        except LedgerError as refused:
            if not patient or refused.code != "API_UNAVAILABLE":
                raise
            LOG.warning("%s; trying again in %.0fs", refused, delay)
            time.sleep(delay)
            delay = next_poll_delay(
                delay, minimum=API_WAIT_MIN_SECONDS, maximum=API_WAIT_MAX_SECONDS
            )


def _token_agent(
    client: LedgerClient, agent_id: str | None, *, flag: str = "--agent-id (or [worker] agent_id)"
) -> str:
    """The name a worker or reviewer acts under over the API: its token's; another name given is
    a mistake, not silently replaced."""
    name = str(client.agent_name)
    if agent_id is not None and agent_id != name:
        client.close()
        option = flag.split(" ", 1)[0]
        raise UsageError(
            "AGENT_MISMATCH",
            f"{flag} is {agent_id!r}, but the token's name is {name!r}, which the API acts "
            f"under: leave {option} out with --api, or use the token of {agent_id!r}",
        )
    return name


def _review(args: argparse.Namespace) -> int:
    """The round's summary on stdout, and exit 1 when any review failed or ran out."""
    settings = section_settings(args, ReviewSettings)
    command = required_setting(settings.exec, "--exec", ReviewSettings, "exec")
    require_exec_program(command)
    client = api_client(args)
    reviewer: str | None
    backend: RemoteReview | None = None
    if client is None:
        reviewer = required_setting(settings.reviewer, "--as", ReviewSettings, "reviewer")
    else:
        from aios_ledger.shell.remote.review import RemoteReview

        reviewer = None  # the API judges under the token's name
        _token_agent(client, settings.reviewer, flag="--as (or [review] reviewer)")
        backend = RemoteReview(client)
    # A local reviewer acts as the name it judges under unless it was told who it is.
    with process_acting_as(functools.partial(command_line_actor, args, default=reviewer)):
        summary = review_submitted(
            None if client is not None else database_path(args),
            command,
            limit=settings.limit,
            timeout=settings.timeout,
            max_attempts=settings.max_attempts,
            migrate=migrate_on_open(args),
            backend=backend,
            reviewer=reviewer,
        )
    emit(summary)
    return EXIT_REFUSED if summary["exit"] else 0


def _status(args: argparse.Namespace) -> Shown:
    now = read_clock(system_clock)
    with open_database(args) as db:
        return Shown(db.read(lambda conn: read_status(conn, now)), status_view)
