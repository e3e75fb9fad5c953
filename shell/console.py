"""What a person sees on a terminal: tables for the listings, a progress bar for long walks.

Programs get JSON (any stdout that is not a terminal, or `--json`); a terminal gets the same
answer as rich tables. Each view is a function of the answer alone, so `render(view, width=...)`
shows it as text at a fixed width, without a terminal. Progress bars go to stderr, and only when
stderr is a terminal.
"""

from __future__ import annotations

import io
import json
import sys
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import IO, TYPE_CHECKING, Any

import attrs
from aios_ledger.core.timestamps import Timestamp

# rich is imported where a view is drawn, not with this module: every command imports it for
# `Shown`, most processes answer a program (JSON), and importing rich cost each of them about a
# sixth of its start.
if TYPE_CHECKING:
    from rich.console import RenderableType
    from rich.table import Table
    from rich.text import Text

View = Callable[[Any], "RenderableType"]
ProgressHook = Callable[[int, int], None]

MAX_CELL = 60
STATUS_STYLES = {
    "QUEUED": "cyan",
    "CLAIMED": "yellow",
    "SUBMITTED": "magenta",
    "SUCCEEDED": "green",
    "FAILED": "red",
    "CANCELLED": "dim",
    "PENDING": "cyan",
    "RUNNING": "yellow",
    "COMPLETED": "green",
}


@attrs.frozen
class Shown:
    """A command's answer and the view a terminal shows it in."""

    value: Any
    view: View


def is_terminal(stream: IO[str]) -> bool:
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError):  # replaced or closed streams
        return False


def show(shown: Shown, stream: IO[str]) -> None:
    from rich.console import Console

    Console(file=stream).print(shown.view(shown.value))


def render(view: RenderableType, *, width: int) -> str:
    """The view as plain text `width` columns wide: what a terminal shows, without colour."""
    from rich.console import Console

    out = io.StringIO()
    Console(file=out, width=width, color_system=None, force_terminal=False).print(view)
    return out.getvalue()


# -- cells ---------------------------------------------------------------------------------


def _cell(value: Any, limit: int = MAX_CELL) -> Text:
    from rich.text import Text

    if value is None:
        return Text("-", style="dim")
    text = value if isinstance(value, str) else json.dumps(value, sort_keys=True)
    if len(text) > limit:
        text = text[: limit - 1] + "…"
    return Text(text)


def _status(value: Any) -> Text:
    from rich.text import Text

    return Text(str(value), style=STATUS_STYLES.get(str(value), ""))


def _moment(milliseconds: Any) -> Text:
    if not isinstance(milliseconds, int):
        return _cell(milliseconds)
    from rich.text import Text

    return Text(Timestamp.from_epoch_ms(milliseconds).text)


def _table(title: str | None, *columns: str) -> Table:
    from rich.table import Table

    table = Table(title=title, title_justify="left", header_style="bold")
    for column in columns:
        table.add_column(column, overflow="fold")
    return table


# -- views ---------------------------------------------------------------------------------


def tasks_view(tasks: Sequence[Mapping[str, Any]]) -> RenderableType:
    table = _table(None, "task", "status", "priority", "attempt", "last holder", "updated", "goal")
    for task in tasks:
        table.add_row(
            _cell(task["task_id"]),
            _status(task["status"]),
            str(task["priority"]),
            f"{task['attempt']}/{task['max_attempts']}",
            # Who holds it now, else whoever held its last attempt (a server before the field:
            # the row's holder of a claimed task).
            _cell(task.get("last_holder", task["claimed_by"])),
            _cell(task["updated_at"]),
            _cell(task["goal"], 40),
        )
    table.caption = f"{len(tasks)} task(s)"
    return table


def task_view(task: Mapping[str, Any]) -> RenderableType:
    table = _table(f"task {task['task_id']}", "field", "value")
    for key, value in task.items():
        if key == "holders" and isinstance(value, list):
            table.add_row(key, _holders(value))
            continue
        table.add_row(key, _status(value) if key == "status" else _cell(value, 400))
    return table


def _holders(holders: Sequence[Mapping[str, Any]]) -> Text:
    """Each attempt's holder on a line of its own: attempt, agent, when it was claimed."""
    from rich.text import Text

    if not holders:
        return Text("never claimed", style="dim")
    lines = (
        f"attempt {holder.get('attempt')}: {holder.get('agent_id')} at {holder.get('claimed_at')}"
        for holder in holders
    )
    return Text("\n".join(lines))


def events_view(events: Sequence[Mapping[str, Any]]) -> RenderableType:
    table = _table(None, "#", "time", "event", "agent", "payload")
    for event in events:
        table.add_row(
            str(event["event_id"]),
            _cell(event["created_at"]),
            _cell(event["event_type"]),
            _cell(event["agent_id"]),
            _cell(event.get("payload")),
        )
    return table


def history_view(entries: Sequence[Mapping[str, Any]]) -> RenderableType:
    table = _table(None, "time", "event", "agent", "attempt", "decision", "next state", "reason")
    for entry in entries:
        table.add_row(
            _cell(entry["time"]),
            _cell(entry["event"]),
            _cell(entry["agent"]),
            str(entry["attempt"]),
            _cell(entry["decision"]),
            _status(entry["next_state"] or ""),
            _cell(entry["reason"], 200),
        )
    table.caption = f"{len(entries)} event(s)"
    return table


def aux_runs_view(runs: Sequence[Mapping[str, Any]]) -> RenderableType:
    table = _table(None, "auxiliary run", "state", "kind", "mode", "session / run", "updated")
    for run in runs:
        target = run["target"]
        state = _status(run["state"])
        if run.get("error_code"):
            state.append(f" {run['error_code']}", style="red")
        table.add_row(
            _cell(run["id"]),
            state,
            _cell(run["kind"]),
            _cell(run["mode"]),
            _cell(f"{target['session_id']} / {target['run_id']}"),
            _moment(run["updated_at_ms"]),
        )
    table.caption = f"{len(runs)} auxiliary run(s)"
    return table


def status_view(report: Mapping[str, Any]) -> RenderableType:
    from rich.console import Group
    from rich.text import Text

    counts = _table(f"aios-ledger status at {report['now']}", *report["tasks"], "total")
    counts.add_row(*(str(count) for count in report["tasks"].values()), str(report["total"]))
    oldest = report["oldest_queued"]
    waiting = Text(
        "oldest queued: none"
        if oldest is None
        else f"oldest queued: {oldest['task_id']} since {oldest['created_at']}"
    )
    expired = _table("leases expired (the next claim takes them over)", "task", "held by", "at")
    for row in report["leases_expired"]:
        expired.add_row(_cell(row["task_id"]), _cell(row["claimed_by"]), row["lease_expires_at"])
    window = report["leases_expiring_within_seconds"]
    leases = _table(f"leases expiring within {window}s", "task", "held by", "until")
    for row in report["leases_expiring"]:
        leases.add_row(_cell(row["task_id"]), _cell(row["claimed_by"]), row["lease_expires_at"])
    last = _table("last events", "#", "time", "event", "task", "agent")
    for row in report["last_events"]:
        last.add_row(
            str(row["event_id"]),
            row["created_at"],
            _cell(row["event_type"]),
            _cell(row["task_id"]),
            _cell(row["agent_id"]),
        )
    return Group(counts, waiting, expired, leases, last, *_spend_tables(report.get("spend")))


# The spend tables of `status`, each under its title, by the column its rows are keyed by.
_SPEND_TABLES = (
    ("by_task", "spend by task (largest cost first)", "task", "task_id"),
    ("by_agent", "spend by agent", "agent", "agent_id"),
    ("by_repository", "spend by repository", "repository", "repository"),
    ("by_day", "spend by UTC day", "day", "day"),
)


def _spend_tables(spend: Mapping[str, Any] | None) -> list[RenderableType]:
    """What tasks spent, one table per grouping, those with rows only (nothing reported:
    one line saying so)."""
    from rich.text import Text

    if not spend or not any(spend.get(name) for name, *_ in _SPEND_TABLES):
        return [Text("spend: none reported")]
    tables: list[RenderableType] = []
    for name, title, heading, key in _SPEND_TABLES:
        rows = spend.get(name) or []
        if not rows:
            continue
        table = _table(title, heading, "reports", "tokens in", "tokens out", "cost", "over budget")
        for row in rows:
            currency = row["currency"]
            micros = int(row["cost_micros"])  # shown to the micro-unit: no float on the way
            cost = "-" if currency is None else f"{micros // 10**6}.{micros % 10**6:06d} {currency}"
            table.add_row(
                _cell(row[key]),
                str(row["reports"]),
                str(row["input_tokens"]),
                str(row["output_tokens"]),
                cost,
                str(row["over_budget"]),
            )
        tables.append(table)
    return tables


def event_line(event: Mapping[str, Any]) -> str:
    """One event on one line, for `events --follow` on a terminal."""
    payload = json.dumps(event.get("payload"), sort_keys=True)
    if len(payload) > MAX_CELL:
        payload = payload[: MAX_CELL - 1] + "…"
    return (
        f"#{event['event_id']} {event['created_at']} {event['event_type']} "
        f"task={event['task_id'] or '-'} agent={event['agent_id'] or '-'} {payload}"
    )


# -- watching ------------------------------------------------------------------------------


def watch_on_terminal(
    read: Callable[[], Any],
    view: View,
    stream: IO[str],
    *,
    interval: float,
    sleep: Callable[[float], None] = time.sleep,
) -> None:
    """Draw `view` of `read()` and re-draw it in place every `interval` seconds, until Ctrl-C."""
    from rich.console import Console
    from rich.live import Live

    with Live(view(read()), console=Console(file=stream), auto_refresh=False) as live:
        while True:
            sleep(interval)
            live.update(view(read()), refresh=True)


def print_changes(
    read: Callable[[], Any],
    stream: IO[str],
    *,
    interval: float,
    sleep: Callable[[float], None] = time.sleep,
) -> None:
    """For a program: `read()` as one JSON line now and each time it differs from the last
    line printed, read every `interval` seconds, until Ctrl-C."""
    last: Any = None
    printed = False
    while True:
        current = read()
        if not printed or current != last:
            stream.write(json.dumps(current, sort_keys=True, ensure_ascii=True) + "\n")
            stream.flush()
            last, printed = current, True
        sleep(interval)


# -- progress ------------------------------------------------------------------------------


@contextmanager
def progress_bar(label: str, stream: IO[str] | None = None) -> Iterator[ProgressHook | None]:
    """A hook `(done, total)` that draws a bar on `stream` (stderr), or None when it is not a
    terminal: nothing is drawn then, and the walk pays nothing for it."""
    target = sys.stderr if stream is None else stream
    if not is_terminal(target):
        yield None
        return
    from rich.console import Console
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        TextColumn,
        TimeElapsedColumn,
    )

    columns = (
        TextColumn(label),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("events"),
        TimeElapsedColumn(),
    )
    with Progress(*columns, console=Console(file=target), transient=False) as bar:
        task = bar.add_task(label, total=None)

        def advance(done: int, total: int) -> None:
            bar.update(task, completed=done, total=max(total, done))

        yield advance
