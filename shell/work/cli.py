"""Commands of the main job: `worker`, `review` and `status`."""

from __future__ import annotations

import argparse
import math
import sys
from typing import Any

from aios_ledger.core import LedgerError
from aios_ledger.core.tasks.status import EXPIRING_WINDOW_SECONDS, render_status, status_report
from aios_ledger.shell.cli_support import database_path, migrate_on_open, open_database
from aios_ledger.shell.clock import read_clock, system_clock
from aios_ledger.shell.db.connection import fetch_all, fetch_one
from aios_ledger.shell.work.reviewer import DEFAULT_REVIEW_TIMEOUT, review_submitted
from aios_ledger.shell.work.worker import Worker, WorkerConfig

STATUS_ROWS = 10


def register(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    worker = commands.add_parser("worker", help="claim tasks and run a command for each")
    worker.add_argument("--agent-id", required=True)
    worker.add_argument(
        "--capability",
        action="append",
        default=[],
        dest="capabilities",
        help="a capability this worker offers (repeat for more)",
    )
    worker.add_argument(
        "--exec",
        required=True,
        dest="command",
        help="shell command run per task: claim JSON on stdin, result on stdout",
    )
    worker.add_argument("--lease-seconds", type=int, default=30)
    worker.add_argument("--timeout", type=float, default=None, help="seconds per command")
    worker.add_argument("--once", action="store_true", help="handle at most one task, then exit")
    worker.add_argument(
        "--until-empty",
        action="store_true",
        help="exit when no task is left to claim instead of polling",
    )
    worker.add_argument("--max-tasks", type=int, default=None)
    worker.add_argument("--poll-min", type=float, default=0.2)
    worker.add_argument("--poll-max", type=float, default=5.0)
    worker.add_argument(
        "--grace",
        type=float,
        default=10.0,
        help="seconds a running command may finish after SIGINT/SIGTERM",
    )
    worker.set_defaults(handler=_worker)

    review = commands.add_parser("review", help="judge submitted tasks with an auxiliary run")
    review.add_argument(
        "--exec",
        required=True,
        dest="command",
        help="shell command: {instruction, evidence, result} on stdin, "
        "{decision, reason} on stdout",
    )
    review.add_argument("--limit", type=int, default=100)
    review.add_argument("--timeout", type=float, default=DEFAULT_REVIEW_TIMEOUT)
    review.set_defaults(handler=_review)

    status = commands.add_parser("status", help="queue summary (a table; --json for JSON)")
    status.add_argument("--json", action="store_true")
    status.set_defaults(handler=_status)


def _positive(name: str, value: float | None) -> None:
    # `float` takes "inf" and "1e999" (infinity): no sleep or timeout can take that.
    if value is not None and not (value > 0 and math.isfinite(value)):
        raise LedgerError("USAGE_INVALID", f"--{name} must be a positive finite number")


def _worker(args: argparse.Namespace) -> Any:
    for name in ("lease_seconds", "timeout", "max_tasks", "poll_min", "poll_max"):
        _positive(name.replace("_", "-"), getattr(args, name))
    if not (args.grace >= 0 and math.isfinite(args.grace)):
        raise LedgerError("USAGE_INVALID", "--grace must be a finite number, not negative")
    config = WorkerConfig(
        agent_id=args.agent_id,
        capabilities=tuple(args.capabilities),
        command=args.command,
        lease_seconds=args.lease_seconds,
        timeout=args.timeout,
        once=args.once,
        until_empty=args.until_empty,
        max_tasks=args.max_tasks,
        poll_min=args.poll_min,
        poll_max=max(args.poll_max, args.poll_min),
        grace=args.grace,
    )
    worker = Worker(database_path(args), config, migrate=migrate_on_open(args))
    worker.install_signal_handlers()
    try:
        code = worker.run()
    finally:
        worker.close()
    return {
        "agent_id": config.agent_id,
        "tasks": [
            {"task_id": o.task_id, "attempt": o.attempt, "outcome": o.outcome, "detail": o.detail}
            for o in worker.outcomes
        ],
        "exit": code,
    }


def _review(args: argparse.Namespace) -> Any:
    _positive("limit", args.limit)
    _positive("timeout", args.timeout)
    return review_submitted(
        database_path(args),
        args.command,
        limit=args.limit,
        timeout=args.timeout,
        migrate=migrate_on_open(args),
    )


def _status(args: argparse.Namespace) -> Any:
    now = read_clock(system_clock)
    with open_database(args) as db:

        def read(conn: Any) -> dict[str, Any]:
            return status_report(
                fetch_all(conn, "status_counts"),
                fetch_one(conn, "status_oldest_queued"),
                fetch_all(
                    conn,
                    "status_expiring_leases",
                    {"until": now.plus_seconds(EXPIRING_WINDOW_SECONDS).text, "limit": STATUS_ROWS},
                ),
                fetch_all(conn, "status_last_events", {"limit": STATUS_ROWS}),
                now=now.text,
            )

        report = db.read(read)
    if args.json:
        return report
    sys.stdout.write(render_status(report))
    return 0
