"""Exporting the sealed log as JSON lines, and checking such an export without the database."""

from __future__ import annotations

import json
import os
import stat
from collections.abc import Iterator
from typing import IO, Any

import apsw
from aios_ledger.core import EventRow, LedgerError, SealRow, VerificationReport, verify_export_lines
from aios_ledger.core.log.export import (
    MAX_LINE_BYTES,
    export_header,
    export_line,
    export_trailer,
)
from aios_ledger.core.log.verification import head_of_rows
from aios_ledger.shell.db.connection import Database, Row, fetch_value
from aios_ledger.shell.log.verification import ProgressCounter, ProgressHook


def _json_line(value: dict[str, Any]) -> str:
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


def _joined_seal(row: Row) -> SealRow | None:
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

    def work(conn: apsw.Connection) -> dict[str, Any]:
        if task_id is None:
            total = int(fetch_value(conn, "log_max_event_id"))
            statement, params = "log_export_all", {}
        else:
            total = int(fetch_value(conn, "log_task_event_count", {"task_id": task_id}))
            statement, params = "log_export_task", {"task_id": task_id}
            if total == 0:
                raise LedgerError("TASK_NOT_FOUND", f"no events for task {task_id!r}")
        counter = ProgressCounter(progress, total)
        out.write(_json_line(export_header(task_id)) + "\n")

        def lines() -> Iterator[tuple[int, str | None]]:
            with db.cursor_rows(statement, params) as rows:
                for row in rows:
                    event = EventRow.from_row(row)
                    seal = _joined_seal(row)
                    out.write(_json_line(export_line(event, seal)) + "\n")
                    counter.step()
                    yield event.event_id, None if seal is None else seal.seal

        head = head_of_rows(lines())
        out.write(_json_line(export_trailer(head)) + "\n")
        counter.close()
        return {"scope": "all" if task_id is None else "task", "task_id": task_id, **head.public()}

    return db.read(work)


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
        return verify_export_lines(_bounded_lines(handle))


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
