"""Exporting the sealed log as JSON lines, and checking such an export without the database."""

from __future__ import annotations

import contextlib
import json
import os
import stat
from collections.abc import Iterator
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
from aios_ledger.core.log.rows import RUN_EVENTS, RowImage
from aios_ledger.core.log.state import stored_row_state
from aios_ledger.core.log.verification import head_of_rows
from aios_ledger.core.sealed_tables import SEALED_TABLES
from aios_ledger.shell.db.connection import Database, Row, fetch_value
from aios_ledger.shell.db.run import Connection
from aios_ledger.shell.log.verification import STATE_STATEMENTS, ProgressCounter, ProgressHook


def json_line(value: dict[str, Any]) -> str:
    return json.dumps(
        {key: _exportable(item) for key, item in value.items()},
        sort_keys=True,
        separators=(",", ":"),
        ensure_ascii=True,
    )


def _exportable(value: Any) -> Any:
    """Stored values as they are; a blob (never written by the ledger) as tagged hex text, so
    that a tampered row still exports and then fails the offline check."""
    if isinstance(value, bytes):
        return "blob:" + value.hex()
    return value


def joined_seal(row: Row) -> SealRow | None:
    """The seal row joined to an event row, or None when the event has no seal."""
    return None if row["seal_event_id"] is None else SealRow.from_row(row)


def export_log(
    db: Database,
    out: IO[str],
    *,
    task_id: str | None,
    progress: ProgressHook | None = None,
) -> dict[str, Any]:
    """Write the header, one line per event with its seal, and the trailer; return a summary."""

    def work(conn: Connection) -> dict[str, Any]:
        if task_id is None:
            total = int(fetch_value(conn, "log_max_event_id"))
            statement, rows_statement, params = "log_export_all", "all_event_seal_rows", {}
        else:
            total = int(fetch_value(conn, "log_task_event_count", {"task_id": task_id}))
            statement, params = "log_export_task", {"task_id": task_id}
            rows_statement = "log_export_task_sealed_rows"
            if total == 0:
                raise LedgerError("TASK_NOT_FOUND", f"no events for task {task_id!r}")
        counter = ProgressCounter(progress, total)
        out.write(json_line(export_header(task_id, dense_ids=db.dense_event_ids)) + "\n")

        def lines() -> Iterator[tuple[int, str | None]]:
            # A task's export holds no archived events: they left with their task.
            archived_source: contextlib.AbstractContextManager[Iterator[Row]] = (
                db.cursor_rows("all_archived_events")
                if task_id is None
                else contextlib.nullcontext(iter(()))
            )
            with (
                db.cursor_rows(statement, params) as rows,
                db.cursor_rows(rows_statement, params) as sealed_rows,
                archived_source as archived_rows,
            ):
                sealed = SealedRowStream(sealed_rows)
                archived = _ArchivedLines(archived_rows, out)
                for row in rows:
                    yield from archived.before(row["event_id"])
                    event = EventRow.from_row(row)
                    seal = joined_seal(row)
                    images = sealed.of(event.event_id)
                    out.write(json_line(export_line(event, seal, images)) + "\n")
                    counter.step()
                    yield event.event_id, None if seal is None else seal.seal
                yield from archived.before(None)

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
                        out.write(json_line(line) + "\n")
                        state_lines += 1
        out.write(json_line(export_trailer(head)) + "\n")
        counter.close()
        return {
            "scope": "all" if task_id is None else "task",
            "task_id": task_id,
            "state_rows": state_lines,
            **head.public(),
        }

    return db.read(work)


class _ArchivedLines:
    """The archived events stream of an export of everything, written out between the events
    around their ids; yields each one's (id, seal) for the trailer's head."""

    def __init__(self, rows: Iterator[Row], out: IO[str]) -> None:
        self._rows = rows
        self._out = out
        self._next = next(rows, None)

    def before(self, event_id: int | None) -> Iterator[tuple[int, str | None]]:
        while self._next is not None and (event_id is None or self._next["event_id"] < event_id):
            row = ArchivedEventRow.from_row(self._next)
            line = export_archived_line(row.event_id, row.archive_event_id, row.chain, row.seal)
            self._out.write(json_line(line) + "\n")
            yield row.event_id, row.seal
            self._next = next(self._rows, None)


class SealedRowStream:
    """The sealed rows stream, handed out by event id as the exported events go by."""

    def __init__(self, rows: Iterator[Row]) -> None:
        self._rows = rows
        self._next = next(rows, None)

    def of(self, event_id: int) -> tuple[RowImage, ...]:
        found: list[RowImage] = []
        while self._next is not None and self._next["event_id"] <= event_id:
            row = self._next
            if row["event_id"] == event_id:
                found.append(RowImage(row["row_table"], row["row_key"], row["row_digest"]))
            self._next = next(self._rows, None)
        return tuple(found)


def verify_export(path: str | os.PathLike[str]) -> VerificationReport:
    """Check an export file with the core verifier, without any database."""
    try:
        handle = open(path, "rb")  # noqa: SIM115 - closed below, read line by line
    except OSError as exc:
        name = repr(os.fspath(path)[:200])
        raise LedgerError("INPUT_UNREADABLE", f"{name}: {exc.strerror or exc}") from None
    except ValueError:  # a NUL in the path
        name = repr(os.fspath(path)[:200])
        raise LedgerError("INPUT_UNREADABLE", f"{name} is not a usable path") from None
    with handle:
        if stat.S_ISCHR(os.fstat(handle.fileno()).st_mode):
            # /dev/zero, /dev/urandom, a terminal: no end, or no file.
            raise LedgerError("INPUT_UNREADABLE", f"{os.fspath(path)[:200]!r} is a device")
        return verify_export_lines(_bounded_lines(handle), SEALED_TABLES)


def _bounded_lines(handle: IO[bytes]) -> Iterator[bytes]:
    """The file's lines, none held longer than MAX_LINE_BYTES + 1 bytes: the rest of a longer
    line is read past in bounded pieces, so that memory stays bounded whatever the file holds."""
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
    """A run event appended before appends were sealed (listed by migration 0014) and never
    sealed since: nothing proves it either way, so an export holds no state line of it (the
    offline check would take it for one inserted behind the ledger's back)."""
    return table == RUN_EVENTS and row["sealed_event_id"] is None and bool(row["sealed_history"])
