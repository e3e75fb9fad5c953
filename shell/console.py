"""What a person sees on a terminal: tables for the listings, a progress bar for long walks.

Programs get JSON; a terminal gets the same answer as rich tables, each view a function of the
answer alone, so that `render(view, width=...)` shows it without a terminal.
"""

from __future__ import annotations

import io
import json
import sys
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import IO, TYPE_CHECKING, Any, Literal

import attrs
from aios_ledger.core.actors import actor_label_of
from aios_ledger.core.timestamps import Timestamp

# rich is imported where a view is drawn: most commands answer a program, which needs no rich.
if TYPE_CHECKING:
    from rich.console import Console, ConsoleOptions, RenderableType, RenderResult
    from rich.measure import Measurement
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


# -- tables: drawn at the terminal's width, never splitting an id, a code or a timestamp ----


@attrs.frozen
class ColumnKind:
    """What a column's cells may give up to fit: `shortest` > 0 lets an id be shortened in the
    middle, both ends staying to tell ids apart; `wraps` lets prose wrap at spaces."""

    shortest: int
    wraps: bool
    justify: Literal["left", "right"]


ID_SHORTEST = 11  # five cells each side of the ellipsis
PROSE_WORD_CELLS = 20  # a longer word in prose is cut with an ellipsis rather than split

COLUMN_KINDS: Mapping[str, ColumnKind] = {
    "id": ColumnKind(ID_SHORTEST, wraps=False, justify="left"),
    "code": ColumnKind(0, wraps=False, justify="left"),
    "time": ColumnKind(0, wraps=False, justify="left"),
    "number": ColumnKind(0, wraps=False, justify="right"),
    "prose": ColumnKind(0, wraps=True, justify="left"),
}


@attrs.frozen
class Column:
    header: str
    kind: str = "prose"  # a key of COLUMN_KINDS


def shorten_middle(text: str, cells: int) -> str:
    """`text` in at most `cells` characters: its start, an ellipsis and its end."""
    if len(text) <= cells:
        return text
    if cells <= 1:
        return "…"[:cells]
    head = cells // 2
    tail = cells - 1 - head
    return text[:head] + "…" + (text[-tail:] if tail else "")


def column_widths(
    kinds: Sequence[ColumnKind], natural: Sequence[int], least: Sequence[int], room: int
) -> list[int] | None:
    """Each column's width in `room` cells, prose narrowed first, then ids; None when even the
    least widths do not fit."""
    if sum(natural) <= room:
        return list(natural)
    if sum(least) > room:
        return None
    widths = list(natural)
    excess = sum(widths) - room
    prose = [i for i, kind in enumerate(kinds) if kind.wraps]
    ids = [i for i, kind in enumerate(kinds) if kind.shortest > 0]
    for giving in (prose, ids):
        while excess > 0:
            slack = [(widths[i] - least[i], i) for i in giving]
            most, widest = max(slack, default=(0, -1))
            if most <= 0:
                break
            widths[widest] -= 1
            excess -= 1
    return widths


class Records:
    """Rows of cells under columns: a table when the width allows, else one record per block
    of `header: value` lines (always with `blocks=True`)."""

    def __init__(self, title: str | None, *columns: Column, blocks: bool = False) -> None:
        self.title = title
        self.columns = columns
        self.kinds = [COLUMN_KINDS[column.kind] for column in columns]
        self.rows: list[tuple[Any, ...]] = []
        self.caption: str | None = None
        self.blocks = blocks

    def add_row(self, *cells: str | Text | None) -> None:
        self.rows.append(cells)

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        from rich.text import Text

        if self.title:
            yield Text(self.title, style="table.title", no_wrap=True, overflow="ellipsis")
        rows = self._cells()
        widths = None
        if not self.blocks:
            natural, least = self._natural_and_least(rows)
            room = options.max_width - 3 * len(self.columns) - 1  # borders and padding
            widths = column_widths(self.kinds, natural, least, room)
        if widths is None:
            yield self._blocks(rows, options.max_width)
        else:
            yield self._table(rows, widths)
        if self.caption:
            yield Text(self.caption, style="table.caption", overflow="ellipsis")

    def __rich_measure__(self, console: Console, options: ConsoleOptions) -> Measurement:
        from rich.measure import Measurement

        natural, _ = self._natural_and_least(self._cells())
        widest = sum(natural) + 3 * len(self.columns) + 1
        return Measurement(min(widest, 20), widest).clamp(max_width=options.max_width)

    def _cells(self) -> list[list[Text]]:
        return [[_text(cell) for cell in row] for row in self.rows]

    def _natural_and_least(self, rows: Sequence[Sequence[Text]]) -> tuple[list[int], list[int]]:
        natural: list[int] = []
        least: list[int] = []
        for index, (column, kind) in enumerate(zip(self.columns, self.kinds, strict=True)):
            cells = [row[index].cell_len for row in rows]
            header = len(column.header)
            widest = max([header, *cells])
            natural.append(widest)
            if kind.wraps:
                words = [len(word) for row in rows for word in row[index].plain.split()]
                longest_word = min(max(words, default=1), PROSE_WORD_CELLS)
                header_word = max(len(word) for word in column.header.split() or [""])
                least.append(min(widest, max(header_word, longest_word)))
            elif kind.shortest:
                least.append(max(header, min(widest, kind.shortest)))
            else:
                least.append(widest)
        return natural, least

    def _table(self, rows: Sequence[Sequence[Text]], widths: Sequence[int]) -> Table:
        from rich.table import Table

        table = Table(header_style="bold")
        for column, kind, width in zip(self.columns, self.kinds, widths, strict=True):
            table.add_column(
                column.header,
                width=width,
                no_wrap=not kind.wraps,
                overflow="ellipsis",
                justify=kind.justify,
            )
        for row in rows:
            table.add_row(
                *(
                    _fitted(cell, kind, width)
                    for cell, kind, width in zip(row, self.kinds, widths, strict=True)
                )
            )
        return table

    def _blocks(self, rows: Sequence[Sequence[Text]], width: int) -> Table:
        from rich.table import Table

        keys = max((len(column.header) for column in self.columns), default=0) + 1
        room = max(1, width - keys - 1)
        grid = Table.grid(padding=(0, 1))
        grid.add_column(no_wrap=True, style="bold")
        grid.add_column(max_width=room, overflow="ellipsis")
        for number, row in enumerate(rows):
            if number:
                grid.add_row("", "")
            for column, kind, cell in zip(self.columns, self.kinds, row, strict=True):
                value = _fitted(cell, kind, room)
                value.no_wrap = not kind.wraps
                grid.add_row(f"{column.header}:", value)
        return grid


def _text(value: str | Text | None) -> Text:
    from rich.text import Text

    return value if isinstance(value, Text) else _plain(value)


def _fitted(cell: Text, kind: ColumnKind, width: int) -> Text:
    """An id longer than its column shortened in the middle; anything else as it is."""
    if kind.shortest and cell.cell_len > width:
        from rich.text import Text

        return Text(shorten_middle(cell.plain, width), style=cell.style)
    return cell


# -- cells ---------------------------------------------------------------------------------


def _cut(text: str, limit: int = MAX_CELL) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _cell(value: Any, limit: int = MAX_CELL) -> Text:
    from rich.text import Text

    if value is None:
        return Text("-", style="dim")
    return Text(_cut(value if isinstance(value, str) else json.dumps(value, sort_keys=True), limit))


def _plain(value: Any) -> Text:
    """An id, a code or a time, whole (the table shortens an id if it must)."""
    return _cell(value, sys.maxsize)


def _status(value: Any) -> Text:
    from rich.text import Text

    return Text(str(value), style=STATUS_STYLES.get(str(value), ""))


def _task_status(task: Mapping[str, Any]) -> Text:
    """A task's status, and whether a governed task still waits for its projection."""
    shown = _status(task["status"])
    if task.get("awaiting_projection") and task["status"] in AWAITING_STATUSES:
        shown.append(" awaiting projection", style="bold")
    return shown


# A governed task cancelled before its projection waits for nothing.
AWAITING_STATUSES = frozenset({"QUEUED", "PAUSED"})


def _moment(milliseconds: Any) -> Text:
    if not isinstance(milliseconds, int):
        return _plain(milliseconds)
    return _plain(Timestamp.from_epoch_ms(milliseconds).text)


Cell = Callable[[Mapping[str, Any]], "str | Text | None"]


def _listing(
    title: str | None,
    rows: Sequence[Mapping[str, Any]],
    *columns: tuple[str, str, Cell],
    caption: str | None = None,
) -> Records:
    table = Records(title, *(Column(header, kind) for header, kind, _ in columns))
    for row in rows:
        table.add_row(*(cell(row) for _, _, cell in columns))
    table.caption = caption
    return table


def _field(name: str) -> Cell:
    return lambda row: _plain(row[name])


def _number(name: str) -> Cell:
    return lambda row: str(row[name])


# -- views ---------------------------------------------------------------------------------


def tasks_view(tasks: Sequence[Mapping[str, Any]]) -> RenderableType:
    return _listing(
        None,
        tasks,
        ("task", "id", _field("task_id")),
        ("status", "code", _task_status),
        ("priority", "number", _number("priority")),
        ("attempt", "number", lambda task: f"{task['attempt']}/{task['max_attempts']}"),
        # A server older than the field gives the holder of a claimed task only.
        ("last holder", "id", lambda task: _plain(task.get("last_holder", task["claimed_by"]))),
        ("updated", "time", _field("updated_at")),
        ("goal", "prose", lambda task: _cell(task["goal"], 80)),
        caption=f"{len(tasks)} task(s)",
    )


_TASK_FIELD_KINDS = {
    "task_id": "id",
    "claimed_by": "id",
    "last_holder": "id",
    "status": "code",
    "priority": "number",
    "attempt": "number",
    "max_attempts": "number",
    "revision": "number",
    "lease_seconds": "number",
}


def _task_field_kind(name: str) -> str:
    if name.endswith("_at"):
        return "time"
    return _TASK_FIELD_KINDS.get(name, "prose")


def task_view(task: Mapping[str, Any]) -> RenderableType:
    record = Records(
        f"task {task['task_id']}",
        *(Column(key, _task_field_kind(key)) for key in task),
        blocks=True,
    )
    record.add_row(
        *(
            _holders(value)
            if key == "holders" and isinstance(value, list)
            else _status(value)
            if key == "status"
            else _cell(value, 400)
            if _task_field_kind(key) == "prose"
            else _plain(value)
            for key, value in task.items()
        )
    )
    return record


def _holders(holders: Sequence[Mapping[str, Any]]) -> Text:
    from rich.text import Text

    if not holders:
        return Text("never claimed", style="dim")
    lines = (
        f"attempt {holder.get('attempt')}: {holder.get('agent_id')} at {holder.get('claimed_at')}"
        for holder in holders
    )
    return Text("\n".join(lines))


def events_view(events: Sequence[Mapping[str, Any]]) -> RenderableType:
    return _listing(
        None,
        events,
        ("#", "number", _number("event_id")),
        ("time", "time", _field("created_at")),
        ("event", "code", _field("event_type")),
        ("agent", "id", _field("agent_id")),
        ("by", "prose", lambda event: _plain(actor_label_of(event.get("actor")))),
        ("payload", "prose", lambda event: _cell(event.get("payload"))),
    )


def history_view(entries: Sequence[Mapping[str, Any]]) -> RenderableType:
    return _listing(
        None,
        entries,
        ("time", "time", _field("time")),
        ("event", "code", _field("event")),
        ("agent", "id", _field("agent")),
        ("by", "prose", lambda entry: _plain(entry.get("actor"))),
        ("attempt", "number", _number("attempt")),
        ("decision", "code", _field("decision")),
        ("next state", "code", lambda entry: _status(entry["next_state"] or "")),
        ("reason", "prose", lambda entry: _cell(entry["reason"], 200)),
        caption=f"{len(entries)} event(s)",
    )


def aux_runs_view(runs: Sequence[Mapping[str, Any]]) -> RenderableType:
    return _listing(
        None,
        runs,
        ("auxiliary run", "id", _field("id")),
        ("state", "code", _run_state),
        ("kind", "code", _field("kind")),
        ("mode", "code", _field("mode")),
        (
            "session / run",
            "id",
            lambda run: _plain("{session_id} / {run_id}".format(**run["target"])),
        ),
        ("updated", "time", lambda run: _moment(run["updated_at_ms"])),
        caption=f"{len(runs)} auxiliary run(s)",
    )


def _run_state(run: Mapping[str, Any]) -> Text:
    state = _status(run["state"])
    if run.get("error_code"):
        state.append(f" {run['error_code']}", style="red")
    return state


def status_view(report: Mapping[str, Any]) -> RenderableType:
    from rich.console import Group
    from rich.text import Text

    headers = [*report["tasks"], "total"]
    counts = Records(
        f"aios-ledger status at {report['now']}", *(Column(name, "number") for name in headers)
    )
    counts.add_row(*(str(count) for count in report["tasks"].values()), str(report["total"]))
    oldest = report["oldest_queued"]
    waiting = Text(
        "oldest queued: none"
        if oldest is None
        else f"oldest queued: {oldest['task_id']} since {oldest['created_at']}"
    )
    waiting.append(f"\ngoverned, awaiting projection: {report.get('awaiting_projection', 0)}")
    holders: tuple[tuple[str, str, Cell], ...] = (
        ("task", "id", _field("task_id")),
        ("held by", "id", _field("claimed_by")),
    )
    expired = _listing(
        "leases expired (the next claim takes them over)",
        report["leases_expired"],
        *holders,
        ("at", "time", _field("lease_expires_at")),
    )
    window = report["leases_expiring_within_seconds"]
    leases = _listing(
        f"leases expiring within {window}s",
        report["leases_expiring"],
        *holders,
        ("until", "time", _field("lease_expires_at")),
    )
    last = _listing(
        "last events",
        report["last_events"],
        ("#", "number", _number("event_id")),
        ("time", "time", _field("created_at")),
        ("event", "code", _field("event_type")),
        ("task", "id", _field("task_id")),
        ("agent", "id", _field("agent_id")),
    )
    return Group(counts, waiting, expired, leases, last, *_spend_tables(report.get("spend")))


# The spend tables of `status`: report key, title, heading, field and kind of the key column.
_SPEND_TABLES = (
    ("by_task", "spend by task (largest cost first)", "task", "task_id", "id"),
    ("by_agent", "spend by agent", "agent", "agent_id", "id"),
    ("by_repository", "spend by repository", "repository", "repository", "id"),
    ("by_day", "spend by UTC day", "day", "day", "time"),
)


def _spend_tables(spend: Mapping[str, Any] | None) -> list[RenderableType]:
    """What tasks spent, one table per grouping that has rows."""
    from rich.text import Text

    if not spend or not any(spend.get(name) for name, *_ in _SPEND_TABLES):
        return [Text("spend: none reported")]
    return [
        _listing(
            title,
            spend[name],
            (heading, kind, _field(key)),
            ("reports", "number", _number("reports")),
            ("tokens in", "number", _number("input_tokens")),
            ("tokens out", "number", _number("output_tokens")),
            ("cost", "code", _cost),
            ("over budget", "number", _number("over_budget")),
        )
        for name, title, heading, key, kind in _SPEND_TABLES
        if spend.get(name)
    ]


def _cost(row: Mapping[str, Any]) -> str:
    currency = row["currency"]
    micros = int(row["cost_micros"])  # shown to the micro-unit: no float on the way
    return "-" if currency is None else f"{micros // 10**6}.{micros % 10**6:06d} {currency}"


def why_view(document: Mapping[str, Any]) -> RenderableType:
    """`why COMMIT` for a person: per landed write, the labelled lines of `why_summary`."""
    from aios_ledger.core.attest.why import why_summary
    from rich.console import Group
    from rich.text import Text

    summary = why_summary(document)
    parts: list[RenderableType] = [Text(f"commit {summary.commit}", style="bold")]
    for number, write in enumerate(summary.writes, 1):
        title = f"write {number} of {len(summary.writes)}" if len(summary.writes) > 1 else None
        block = Records(title, *(Column(label) for label, _ in write), blocks=True)
        block.add_row(*(text for _, text in write))
        parts.append(block)
    return Group(*parts)


def event_line(event: Mapping[str, Any]) -> str:
    """One event on one line, for `events --follow` on a terminal."""
    payload = _cut(json.dumps(event.get("payload"), sort_keys=True))
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
) -> None:
    """Draw `view` of `read()` and re-draw it in place every `interval` seconds, until Ctrl-C."""
    from rich.console import Console
    from rich.live import Live

    with Live(view(read()), console=Console(file=stream), auto_refresh=False) as live:
        while True:
            time.sleep(interval)
            live.update(view(read()), refresh=True)


def print_changes(
    read: Callable[[], Any],
    stream: IO[str],
    *,
    interval: float,
) -> None:
    """For a program: `read()` as one JSON line now and each time it changes, until Ctrl-C."""
    last: Any = None
    printed = False
    while True:
        current = read()
        if not printed or current != last:
            stream.write(json.dumps(current, sort_keys=True, ensure_ascii=True) + "\n")
            stream.flush()
            last, printed = current, True
        time.sleep(interval)


# -- progress ------------------------------------------------------------------------------


@contextmanager
def progress_bar(label: str, stream: IO[str] | None = None) -> Iterator[ProgressHook | None]:
    """A hook `(done, total)` that draws a bar on `stream` (stderr), or None when it is not a
    terminal, so that the walk pays nothing for it."""
    target = sys.stderr if stream is None else stream
    if not is_terminal(target):
        yield None
        return
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

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
