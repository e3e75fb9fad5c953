"""Reading an archive file back; proving it is `verify-archive`'s job."""

from __future__ import annotations

import contextlib
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import attrs
from aios_ledger.core.errors import LedgerError
from aios_ledger.core.jsonvalue import loads_document
from aios_ledger.core.log.archived import (
    BINDINGS_KEPT_FORMAT,
    LEDGER_SEALED_TABLES,
    ArchivedChainEnd,
    LedgerSealedRow,
)
from aios_ledger.core.log.export import (
    ROW_FIELD,
    ROWS_KEPT_FORMAT,
    parse_export_header,
    parse_line,
)
from aios_ledger.core.log.rows import (
    AUXILIARY_RUNS,
    GOVERNED_BINDINGS,
    RECORDED_ANSWERS,
    RUN_EVENTS,
    RUNS,
    TASK_PROPOSALS,
    TASKS,
)
from aios_ledger.core.log.seals import chain_of
from aios_ledger.core.log.state import stored_row_state
from aios_ledger.core.log.tables import SealedTables
from aios_ledger.core.log.verification import ARCHIVE_MISMATCH, Finding

ARCHIVE_INVALID = "ARCHIVE_INVALID"
ARCHIVE_TASK_NOT_FOUND = "ARCHIVE_TASK_NOT_FOUND"
# What `archive show` says of a task's row and of its lists, field by field: `name:column` is
# a column read as a JSON document and shown by another name.
_TASK_FIELDS = (
    "goal instructions status attempt created_at updated_at"
    " success_criteria:success_criteria_json required_capabilities:required_capabilities_json"
    " constraints:constraints_json metadata:metadata_json result:result_json"
    " verification:verification_json"
)
_LIST_FIELDS = {
    "evidence": (RUN_EVENTS, "run_id seq kind created_at payload:payload_json"),
    "reviews": (AUXILIARY_RUNS, "aux_id run_id kind state output:output_json error_code error"),
    "proposals": (
        TASK_PROPOSALS,
        "proposal_id attempt repository base_oid head_oid bundle_sha256"
        " changed_files:changed_files_json",
    ),
    "bindings": (GOVERNED_BINDINGS, "job_id binding_sha256 created_at binding:binding_json"),
}
_EVENT_FIELDS = "event_id event_type agent_id created_at payload:payload_json"


@attrs.frozen
class ArchivedTask:
    """One archived task as the file holds it; `row` is None in a format 1 archive."""

    task_id: str
    row: Mapping[str, Any] | None
    events: tuple[Mapping[str, Any], ...]
    rows: Mapping[str, tuple[Mapping[str, Any], ...]]


@attrs.frozen
class ArchiveContents:
    archive_format: int
    finished_before: str | None
    tasks: Mapping[str, ArchivedTask]


def read_archive(lines: Iterable[bytes | str]) -> ArchiveContents:
    """The tasks of an archive, in the order the file names them."""
    events: dict[str, list[Mapping[str, Any]]] = {}
    state: dict[str, dict[str, list[Mapping[str, Any]]]] = {}
    task_rows: dict[str, Mapping[str, Any]] = {}
    header = None
    for number, line in enumerate(lines, start=1):
        try:
            value = parse_line(line, number)
        except LedgerError as refused:
            over = refused.code == "EXPORT_INVALID"
            detail = refused.detail if over else f"line {number}: {refused.detail}"
            raise LedgerError(ARCHIVE_INVALID, detail) from None
        if header is None:
            with contextlib.suppress(LedgerError):
                header = parse_export_header(value)
            if header is None or header.scope != "archive":
                raise LedgerError(ARCHIVE_INVALID, "the first line is not an archive's header")
            continue
        if not isinstance(value, Mapping) or "end" in value or "archived" in value:
            continue
        if "state" in value:
            row = value.get(ROW_FIELD)
            if isinstance(row, Mapping) and (owner := _owner(value.get("state"), row)) is not None:
                if value.get("state") == TASKS:
                    task_rows[owner] = row
                else:
                    state.setdefault(owner, {}).setdefault(str(value.get("state")), []).append(row)
            continue
        task_id = value.get("task_id")
        if isinstance(task_id, str):
            events.setdefault(task_id, []).append(value)
    if header is None:
        raise LedgerError(ARCHIVE_INVALID, "the file is empty: no archive's header")
    tasks = {
        task_id: ArchivedTask(
            task_id=task_id,
            row=task_rows.get(task_id),
            events=tuple(events.get(task_id, ())),
            rows={table: tuple(found) for table, found in state.get(task_id, {}).items()},
        )
        for task_id in dict.fromkeys([*events, *task_rows])
    }
    return ArchiveContents(header.archive_format, header.finished_before, tasks)


def chain_ends(contents: ArchiveContents) -> dict[str, ArchivedChainEnd | None]:
    """Each archived chain's last event and seal in the file (None: malformed or unsealed)."""
    ends: dict[str, ArchivedChainEnd | None] = {}
    for task in contents.tasks.values():
        last = task.events[-1] if task.events else {}
        event_id, seal = last.get("event_id"), last.get("seal")
        ends[chain_of(task.task_id)] = (
            ArchivedChainEnd(event_id, seal)
            if type(event_id) is int and isinstance(seal, str)
            else None
        )
    return ends


def unanchored_chains(
    ends: Mapping[str, ArchivedChainEnd | None], recorded: Iterable[Mapping[str, ArchivedChainEnd]]
) -> list[tuple[str, str]]:
    """The file's chains, with why, whose last seal no sealed TASKS_ARCHIVED event recorded (a
    chain that ends at a recorded seal is the ledger's, and so are the rows it covers)."""
    known = {(chain, end) for chains in recorded for chain, end in chains.items()}
    found = []
    for chain, end in sorted(ends.items()):
        if end is None:
            found.append((chain, "the file's last event of the chain holds no seal"))
        elif (chain, end) not in known:
            found.append(
                (
                    chain,
                    f"the file's chain ends at event {end.last_event_id} with a seal that no "
                    "TASKS_ARCHIVED event of the ledger recorded: its seals, and the row "
                    "digests they cover, are not the ledger's",
                )
            )
    return found


@attrs.frozen
class FileSealedRow:
    """A row of the file that ledger-chain seals cover, with the digest of what the file holds."""

    task_id: str
    table: str
    key: str
    digest: str | None


@attrs.frozen
class RowSeal:
    """The ledger's last seal of a row: the event that took it and the row's digest then."""

    event_id: int
    row_digest: str


def file_sealed_rows(contents: ArchiveContents, tables: SealedTables) -> tuple[FileSealedRow, ...]:
    """The file's rows that ledger-chain seals cover, keyed as the ledger's seal names them."""
    found = []
    for task in contents.tasks.values():
        for table in LEDGER_SEALED_TABLES:
            for row in task.rows.get(table, ()):
                try:
                    key, digest = stored_row_state(tables[table], row)
                except (KeyError, TypeError, ValueError, LedgerError):
                    continue
                found.append(FileSealedRow(task.task_id, table, key, digest))
    return tuple(found)


def ledger_row_findings(
    contents: ArchiveContents,
    seals: Sequence[tuple[FileSealedRow, RowSeal | None]],
    recorded: Mapping[str, frozenset[LedgerSealedRow]] | None,
) -> list[Finding]:
    """The file's ledger-sealed rows held against the ledger's last seal of each, and against
    what the TASKS_ARCHIVED event recording the file says it removed."""
    by_task: dict[str, list[tuple[FileSealedRow, RowSeal | None]]] = {
        task.task_id: [] for task in contents.tasks.values()
    }
    for row, seal in seals:
        by_task[row.task_id].append((row, seal))
    findings: list[Finding] = []
    for task_id, rows in by_task.items():
        listed: list[LedgerSealedRow] = []
        for row, seal in rows:
            if seal is None and row.table == GOVERNED_BINDINGS and recorded is not None:
                # A binding registered before bindings were sealed: unprovable, as `verify`
                # counts it while stored; the file, whose digest the event recorded, holds it.
                continue
            if seal is None or seal.row_digest != row.digest:
                detail = (
                    "the file's row is not the one the ledger's seal covers: changed in "
                    "the file (with its line's digest), or never the ledger's"
                )
                findings.append(
                    Finding(ARCHIVE_MISMATCH, None, detail, table=row.table, key=row.key)
                )
                continue
            listed.append(LedgerSealedRow(row.table, row.key, seal.event_id))
        chain = chain_of(task_id)
        expected = frozenset() if recorded is None else recorded.get(chain, frozenset())
        if recorded is not None and frozenset(listed) != expected:
            detail = (
                f"the file holds {len(listed)} rows of the chain that seals of the ledger chain "
                f"cover, not the {len(expected)} the TASKS_ARCHIVED event recorded removing"
            )
            findings.append(Finding(ARCHIVE_MISMATCH, None, detail, chain=chain))
    return findings


def archived_task(contents: ArchiveContents, task_id: str) -> ArchivedTask:
    found = contents.tasks.get(task_id)
    if found is None:
        raise LedgerError(ARCHIVE_TASK_NOT_FOUND, f"the archive holds no task {task_id[:200]!r}")
    return found


def task_summary(task: ArchivedTask) -> dict[str, Any]:
    summary: dict[str, Any] = {"task_id": task.task_id, "row_kept": task.row is not None}
    summary.update(_fields(task.row or {}, _TASK_FIELDS))
    summary["events"] = [_fields(event, _EVENT_FIELDS) for event in task.events]
    for name, (table, fields) in _LIST_FIELDS.items():
        summary[name] = [_fields(row, fields) for row in task.rows.get(table, ())]
    summary["rows"] = {table: len(found) for table, found in sorted(task.rows.items())}
    return summary


def _fields(row: Mapping[str, Any], fields: str) -> dict[str, Any]:
    shown = {}
    for field in fields.split():
        name, _, column = field.partition(":")
        shown[name] = _document(row.get(column)) if column else row.get(name)
    return shown


def archive_summary_of(contents: ArchiveContents) -> dict[str, Any]:
    return {
        "format": contents.archive_format,
        "rows_kept": contents.archive_format >= ROWS_KEPT_FORMAT,
        "bindings_kept": contents.archive_format >= BINDINGS_KEPT_FORMAT,
        "finished_before": contents.finished_before,
        "tasks": [task_summary(task) for task in contents.tasks.values()],
    }


def _owner(table: object, row: Mapping[str, Any]) -> str | None:
    """The task a state row belongs to."""
    if table == AUXILIARY_RUNS:
        # A review of one of its attempt runs: its target session is `task:T`.
        session = row.get("session_id")
        owner = session.removeprefix("task:") if isinstance(session, str) else None
        return owner if owner and session != owner else None
    if table in (RUNS, RUN_EVENTS):
        # An attempt run `TASK@N` (its events are keyed by it too); a task id may hold `@`.
        run_id = row.get("run_id")
        owner = run_id.rpartition("@")[0] if isinstance(run_id, str) else None
    else:
        owner = row.get("subject") if table == RECORDED_ANSWERS else row.get("task_id")
    return owner if isinstance(owner, str) and owner else None


def _document(text: object) -> object:
    if not isinstance(text, str):
        return text
    try:
        return loads_document(text, what="an archived column")
    except LedgerError:
        return text
