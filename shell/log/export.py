"""Exporting the sealed log as JSON lines, and checking such an export without the database."""

from __future__ import annotations

import contextlib
import heapq
import json
import os
import stat
from collections.abc import Container, Iterable, Iterator
from io import BufferedReader
from typing import IO, Any

from aios_ledger.core import EventRow, LedgerError, SealRow
from aios_ledger.core.log import VerificationReport, verify_export_lines
from aios_ledger.core.log.archived import ArchivedEventRow
from aios_ledger.core.log.export import (
    MAX_LINE_BYTES,
    export_archived_line,
    export_header,
    export_line,
    export_state_line,
    export_trailer,
)
from aios_ledger.core.log.rows import RUN_EVENTS
from aios_ledger.core.log.state import stored_row_state
from aios_ledger.core.log.verification import head_of_rows
from aios_ledger.core.sealed_tables import SEALED_TABLES
from aios_ledger.shell.db.connection import Database, Row, fetch_one, fetch_value
from aios_ledger.shell.db.run import Connection
from aios_ledger.shell.log.verification import (
    SEALED_ROW_COLUMNS,
    STATE_STATEMENTS,
    ProgressCounter,
    ProgressHook,
    SealedRowsById,
)


def write_line(out: IO[str], value: dict[str, Any]) -> None:
    """One line of an export as compact JSON; a stored blob (never the ledger's) as tagged hex, so
    that a tampered row still exports and then fails the offline check."""
    exportable = {
        key: "blob:" + item.hex() if isinstance(item, bytes) else item
        for key, item in value.items()
    }
    out.write(json.dumps(exportable, sort_keys=True, separators=(",", ":"), ensure_ascii=True))
    out.write("\n")


def write_events(
    out: IO[str],
    rows: Iterator[Row],
    sealed_rows: Iterator[Row],
    counter: ProgressCounter,
    *,
    archived: Iterable[Row] = (),
    tasks: Container[str] | None = None,
) -> Iterator[tuple[int, str | None]]:
    """Write each event's line (of `tasks` alone, when given) and the `archived` events' lines
    between them by id; yield each line's id and seal for the trailer's head."""
    sealed = SealedRowsById(tuple(row[name] for name in SEALED_ROW_COLUMNS) for row in sealed_rows)
    # An event before a listing of the same id (which only a hand-made listing can have).
    for row in heapq.merge(rows, archived, key=lambda row: row["event_id"]):
        if "archive_event_id" in row:
            listed = ArchivedEventRow.from_row(row)
            write_line(out, export_archived_line(listed))
            yield listed.event_id, listed.seal
        elif tasks is None or row["task_id"] in tasks:
            event = EventRow.from_row(row)
            seal = None if row["seal_event_id"] is None else SealRow.from_row(row)
            write_line(out, export_line(event, seal, sealed.of(event.event_id)))
            counter.step()
            yield event.event_id, None if seal is None else seal.seal


def export_log(
    db: Database, out: IO[str], *, task_id: str | None, progress: ProgressHook | None = None
) -> dict[str, Any]:
    """Write the header, one line per event with its seal, and the trailer; return a summary."""

    def work(conn: Connection) -> dict[str, Any]:
        if task_id is None:
            total = int(fetch_value(conn, "log_max_event_id"))
            statement, rows_statement, params = "log_export_all", "all_event_seal_rows", {}
        else:
            summary = fetch_one(conn, "console_task_event_count", {"task_id": task_id})
            total = 0 if summary is None else int(summary["event_count"])
            statement, params = "log_export_task", {"task_id": task_id}
            rows_statement = "log_export_task_sealed_rows"
            if total == 0:
                raise LedgerError("TASK_NOT_FOUND", f"no events for task {task_id!r}")
        counter = ProgressCounter(progress, total)
        write_line(out, export_header(task_id, dense_ids=db.dense_event_ids))

        def lines() -> Iterator[tuple[int, str | None]]:
            with contextlib.ExitStack() as stack:
                rows = stack.enter_context(db.cursor_rows(statement, params))
                sealed_rows = stack.enter_context(db.cursor_rows(rows_statement, params))
                # A task's export holds no archived events: they left with their task.
                archived = (
                    stack.enter_context(db.cursor_rows("all_archived_events"))
                    if task_id is None
                    else ()
                )
                yield from write_events(out, rows, sealed_rows, counter, archived=archived)

        head = head_of_rows(lines())
        state_lines = 0
        if task_id is None:
            for table, state_statement in STATE_STATEMENTS.items():
                with db.cursor_rows(state_statement) as state_rows:
                    for row in state_rows:
                        if _before_seals(table, row):
                            continue
                        sealed = row["sealed_row_digest"]
                        line = export_state_line(
                            table, *stored_row_state(SEALED_TABLES[table], row, sealed)
                        )
                        write_line(out, line)
                        state_lines += 1
        write_line(out, export_trailer(head))
        counter.close()
        return {
            "scope": "all" if task_id is None else "task",
            "task_id": task_id,
            "state_rows": state_lines,
            **head.public(),
        }

    return db.read(work)


def open_input(path: str | os.PathLike[str]) -> BufferedReader:
    """The file at `path` open to read; a device such as /dev/zero has no end, so is refused."""
    name = repr(str(path)[:200])
    try:
        handle = open(path, "rb")  # noqa: SIM115 - the caller closes it
    except OSError as exc:
        raise LedgerError("INPUT_UNREADABLE", f"{name}: {exc.strerror or exc}") from None
    except (ValueError, TypeError):  # a NUL in the path
        raise LedgerError("INPUT_UNREADABLE", f"{name} is not a usable path") from None
    if stat.S_ISCHR(os.fstat(handle.fileno()).st_mode):
        handle.close()
        raise LedgerError("INPUT_UNREADABLE", f"{name} is a device")
    return handle


def verify_export(path: str | os.PathLike[str]) -> VerificationReport:
    """Check an export file with the core verifier, without any database."""
    with open_input(path) as handle:
        return verify_export_lines(_bounded_lines(handle), SEALED_TABLES)


def _bounded_lines(handle: IO[bytes]) -> Iterator[bytes]:
    """The file's lines, a longer one cut at MAX_LINE_BYTES + 1 bytes and the rest read past, so
    that memory stays bounded whatever the file holds."""
    while True:
        line = handle.readline(MAX_LINE_BYTES + 1)
        if not line:
            return
        if len(line) > MAX_LINE_BYTES and not line.endswith(b"\n"):
            while True:
                rest = handle.readline(MAX_LINE_BYTES + 1)
                if not rest or rest.endswith(b"\n"):
                    break
        yield line


def _before_seals(table: str, row: Row) -> bool:
    """A run event appended before appends were sealed and never since: nothing proves it, so an
    export holds no state line the offline check would take for one inserted behind its back."""
    return table == RUN_EVENTS and row["sealed_event_id"] is None and bool(row["sealed_history"])
