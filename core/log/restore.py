"""Restoring an archive: every row and event it removed, put back with its original id and seal,
all or nothing, and one `TASKS_RESTORED` event recording what came back. The restored events
kept their Merkle leaves (an archive never removes them).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, TypedDict

import attrs
from aios_ledger.core.actors import Actor
from aios_ledger.core.errors import LedgerError
from aios_ledger.core.jsonvalue import JsonObject
from aios_ledger.core.kinds import Identifier, PrefixedDigest
from aios_ledger.core.log.archive_file import (
    ARCHIVE_INVALID,
    ArchiveContents,
    ArchivedTask,
    chain_ends,
)
from aios_ledger.core.log.archived import TASKS_RESTORED, ArchivedChainEnd
from aios_ledger.core.log.export import ROWS_KEPT_FORMAT, parse_export_event
from aios_ledger.core.log.idempotency import IdempotencyRow, RecordedAnswerRow
from aios_ledger.core.log.plan import (
    Decision,
    replay_or_conflict,
    request_digest,
    sealed_plan,
    stored_answer,
)
from aios_ledger.core.log.records import EventRow, SealRow, sealed_rows
from aios_ledger.core.log.rows import (
    AGENT_SCAN_CHARGES,
    AUXILIARY_RUNS,
    GOVERNED_BINDINGS,
    INITIAL_PROJECTIONS,
    RECORDED_ANSWERS,
    RUN_EVENTS,
    RUNS,
    SOURCE_CAPTURE_RECOVERIES,
    TASK_PROPOSALS,
    TASK_SPEND,
    TASKS,
    RowImage,
)
from aios_ledger.core.log.tables import SealedTable, SealedTables
from aios_ledger.core.log.tail import EventAppend, LogTail
from aios_ledger.core.statements import SqlWrite, Statement
from aios_ledger.core.structuring import Structured
from aios_ledger.core.timestamps import Timestamp, require_timestamp

RESTORE_OPERATION = "restore_archive"
ARCHIVE_MISMATCH = "ARCHIVE_MISMATCH"
ARCHIVE_ALREADY_RESTORED = "ARCHIVE_ALREADY_RESTORED"
ARCHIVE_ROWS_NOT_KEPT = "ARCHIVE_ROWS_NOT_KEPT"
RESTORE_TASK_EXISTS = "RESTORE_TASK_EXISTS"
RESTORE_SEQ_TAKEN = "RESTORE_SEQ_TAKEN"
RESTORE_ROW_EXISTS = "RESTORE_ROW_EXISTS"

# Each state table an archive keeps rows of, and the statement that first wrote its rows (and
# puts them back); rows go back in this order, the task's row first (the others reference it).
RESTORED_TABLES: Mapping[str, Statement] = {
    TASKS: Statement.TASKS_INSERT,
    RECORDED_ANSWERS: Statement.TASK_IDEMPOTENCY_INSERT,
    # Its governed bindings (format 3: a format 2 archive deleted them without keeping them).
    GOVERNED_BINDINGS: Statement.INSERT_BINDING,
    INITIAL_PROJECTIONS: Statement.INSERT_INITIAL_PROJECTION,
    SOURCE_CAPTURE_RECOVERIES: Statement.INSERT_SOURCE_CAPTURE_RECOVERY,
    # An attempt run (`TASK@N`), with the count and last write of the events it held (the
    # columns a run's seal does not cover, derived from its events), then those events and
    # the reviews of it.
    RUNS: Statement.RESTORE_RUN,
    RUN_EVENTS: Statement.INSERT_RUN_EVENT,
    AUXILIARY_RUNS: Statement.RESTORE_AUXILIARY_RUN,
    # Its proposals (their bundle files the shell puts back), refused scans' charges, spend.
    TASK_PROPOSALS: Statement.TASK_PROPOSAL_INSERT,
    AGENT_SCAN_CHARGES: Statement.AGENT_SCAN_CHARGE_INSERT,
    TASK_SPEND: Statement.TASK_SPEND_INSERT,
}
# The columns of a restored run that its archived row does not hold: derived from its events.
_RUN_DERIVED = frozenset(("event_count", "updated_at"))
# What a row found taken is refused as: (table, what is taken) -> code.
_TAKEN_CODES: Mapping[tuple[str, str], str] = {
    (TASKS, "key"): RESTORE_TASK_EXISTS,
    (TASKS, "seq"): RESTORE_SEQ_TAKEN,
}
_TAKEN_ORDER = (RESTORE_TASK_EXISTS, RESTORE_SEQ_TAKEN, RESTORE_ROW_EXISTS)


@attrs.frozen
class RestoreRequest(Structured):
    """Restore the archive file whose bytes hash to `archive_sha256` (the shell hashed it),
    idempotent by `idempotency_key` when one is given."""

    WHAT = "archive restore"

    archive_sha256: PrefixedDigest
    idempotency_key: Identifier | None = None


@attrs.frozen
class RowToRestore:
    """A row an archive puts back: its table, its key and (for a task) its creation sequence,
    which the shell looks up before the decision (`restore_row_taken`)."""

    table: str
    key: str
    seq: int | None = None


@attrs.frozen
class RestoreState:
    """What the shell read under the write lock: the TASKS_ARCHIVED event that recorded the
    file's digest (None: none did) and its chains, the listings it still holds, the rows to
    restore that are taken now (`(table, key, 'key' or 'seq')`), and the recorded answer."""

    archive_event_id: int | None
    recorded: Mapping[str, ArchivedChainEnd]
    listed: Mapping[str, ArchivedChainEnd]
    taken: frozenset[tuple[str, str, str]]
    prior: IdempotencyRow | None
    tail: LogTail


class RestoreAnswer(TypedDict):
    restored: int
    events: int
    archive_sha256: str
    archive_event_id: int
    restore_event_id: int
    task_ids: list[str]


# An archived event as the file holds it: its row, its seal and the row images its seal covers.
RestoredEvent = tuple[EventRow, SealRow, Sequence[RowImage]]


def rows_to_restore(contents: ArchiveContents, tables: SealedTables) -> tuple[RowToRestore, ...]:
    """Every row the archive would put back, for the shell to look up."""
    found: list[RowToRestore] = []
    for task in contents.tasks.values():
        if task.row is not None:
            seq = task.row.get("seq")
            found.append(RowToRestore(TASKS, task.task_id, seq if type(seq) is int else None))
        for table, rows in task.rows.items():
            for row in rows:
                key = row.get(tables[table].key) if table in tables else None
                if isinstance(key, str):
                    found.append(RowToRestore(table, key))
    return tuple(found)


def decide_restore(
    state: RestoreState,
    request: RestoreRequest,
    contents: ArchiveContents,
    *,
    tables: SealedTables,
    now: Timestamp,
    actor: Actor,
) -> Decision[RestoreAnswer]:
    """The inserts, the listing deletes and the sealed TASKS_RESTORED event, or a refusal."""
    require_timestamp(now)
    digest = request_digest(RESTORE_OPERATION, request.archive_sha256, request.public())
    replay = replay_or_conflict(state.prior, digest, RestoreAnswer)
    if replay is not None:
        return replay
    archive_event_id = state.archive_event_id
    if archive_event_id is None:
        raise LedgerError(
            ARCHIVE_MISMATCH,
            f"no sealed TASKS_ARCHIVED event recorded the digest {request.archive_sha256}: the "
            "file was changed since it was archived, or is not an archive of this ledger",
        )
    if contents.archive_format < ROWS_KEPT_FORMAT:
        raise LedgerError(
            ARCHIVE_ROWS_NOT_KEPT,
            f"the archive is of format {contents.archive_format}, which holds its rows' digests "
            "alone: its tasks cannot be put back (`archive show` still reads their events)",
        )
    tasks = tuple(contents.tasks.values())
    events = {task.task_id: _events_of(task) for task in tasks}
    _check_recorded(state, archive_event_id, contents)
    _check_untaken(state.taken)
    writes = [write for task in tasks for write in _task_writes(task, events[task.task_id], tables)]
    restore_event_id = state.tail.next_event_id
    chains = [
        {
            "task_id": task.task_id,
            "last_event_id": events[task.task_id][-1][0].event_id,
            "last_seal": events[task.task_id][-1][1].seal,
        }
        for task in tasks
    ]
    event_count = sum(len(found) for found in events.values())
    payload: JsonObject = {
        "archive_sha256": request.archive_sha256,
        "archive_event_id": archive_event_id,
        "tasks": len(tasks),
        "events": event_count,
        "chains": chains,  # type: ignore[dict-item]
    }
    answer: RestoreAnswer = {
        "restored": len(tasks),
        "events": event_count,
        "archive_sha256": request.archive_sha256,
        "archive_event_id": archive_event_id,
        "restore_event_id": restore_event_id,
        "task_ids": [task.task_id for task in tasks],
    }
    event = EventAppend(None, None, TASKS_RESTORED, payload, now.text, actor=actor)
    if request.idempotency_key is not None:
        recorded = RecordedAnswerRow(
            idempotency_key=request.idempotency_key,
            operation=RESTORE_OPERATION,
            subject=request.archive_sha256,
            request_sha256=digest,
            response_json=stored_answer(answer),
            created_at=now.text,
        )
        writes.append(SqlWrite(Statement.TASK_IDEMPOTENCY_INSERT, recorded._asdict()))
        event = attrs.evolve(event, rows=(recorded.image(),))
    return sealed_plan(writes, [event], answer, tail=state.tail)


def _events_of(task: ArchivedTask) -> tuple[RestoredEvent, ...]:
    """The task's events as the file holds them, each sealed; its row is required."""
    if task.row is None:
        raise LedgerError(ARCHIVE_INVALID, f"the archive holds no row of task {task.task_id!r}")
    found: list[RestoredEvent] = []
    for line in task.events:
        try:
            event, seal, rows = parse_export_event(line)
        except LedgerError as refused:
            raise LedgerError(ARCHIVE_INVALID, refused.detail) from None
        if seal is None:
            raise LedgerError(
                ARCHIVE_INVALID, f"event {event.event_id} of the archive holds no seal"
            )
        found.append((event, seal, rows))
    if not found:
        raise LedgerError(ARCHIVE_INVALID, f"the archive holds no event of task {task.task_id!r}")
    return tuple(found)


def _check_recorded(state: RestoreState, archive_event_id: int, contents: ArchiveContents) -> None:
    """The file's chains are those the archive event recorded, and each is still listed."""
    ends = chain_ends(contents)
    if ends != dict(state.recorded):
        raise LedgerError(
            ARCHIVE_MISMATCH,
            f"the file's chains are not those TASKS_ARCHIVED event {archive_event_id} recorded",
        )
    if not state.listed:
        raise LedgerError(
            ARCHIVE_ALREADY_RESTORED,
            f"the tasks archive event {archive_event_id} removed were restored already",
        )
    if dict(state.listed) != ends:
        raise LedgerError(
            ARCHIVE_MISMATCH,
            f"the events listed under archive event {archive_event_id} are not those it "
            "recorded: `aios-ledger verify` says more",
        )


def _check_untaken(taken: frozenset[tuple[str, str, str]]) -> None:
    """Refused by the first taken row, a task's id before its sequence before any other row
    (a task created again under an archived id took its recorded answer's key too)."""
    ranked = sorted(
        (_TAKEN_ORDER.index(_TAKEN_CODES.get((table, what), RESTORE_ROW_EXISTS)), table, key, what)
        for table, key, what in taken
    )
    for _, table, key, what in ranked:
        code = _TAKEN_CODES.get((table, what), RESTORE_ROW_EXISTS)
        noun = "creation sequence" if what == "seq" else "key"
        raise LedgerError(
            code,
            f"{table} {key[:200]!r}: its {noun} is taken by a row written since it was "
            "archived; nothing was restored",
        )


def _task_writes(
    task: ArchivedTask, events: tuple[RestoredEvent, ...], tables: SealedTables
) -> list[SqlWrite]:
    """The task's row, its events with their seals, its other rows, then its listings' deletes
    (which the trigger lets go once their events are back)."""
    assert task.row is not None  # _events_of required it
    writes = [_row_write(tables[TASKS], tables[TASKS].with_later_defaults(task.row))]
    for event, seal, rows in events:
        writes.append(event.insert())
        writes.append(seal.insert())
        writes.extend(row.insert() for row in sealed_rows(event.event_id, rows))
    for table in RESTORED_TABLES:
        for row in task.rows.get(table, ()) if table != TASKS else ():
            writes.append(_row_write(tables[table], _run_row(row, task) if table == RUNS else row))
    unknown = sorted(set(task.rows) - set(RESTORED_TABLES))
    if unknown:
        raise LedgerError(ARCHIVE_INVALID, f"the archive holds rows of {unknown[0]!r}, not kept")
    writes.append(SqlWrite(Statement.DELETE_RESTORED_LISTINGS, {"task_id": task.task_id}))
    return writes


def _run_row(row: Mapping[str, Any], task: ArchivedTask) -> Mapping[str, Any]:
    """An attempt run with the count of its archived events and the time of its last."""
    run_id = row.get("run_id")
    events = [event for event in task.rows.get(RUN_EVENTS, ()) if event.get("run_id") == run_id]
    last = max(events, key=lambda event: event.get("seq") or 0) if events else row
    if _RUN_DERIVED & set(row):
        raise LedgerError(ARCHIVE_INVALID, "a row of runs holds columns its seal does not cover")
    return {**row, "event_count": len(events), "updated_at": last.get("created_at")}


def _row_write(table: SealedTable, row: Mapping[str, Any]) -> SqlWrite:
    """The insert that puts `row` back: exactly its statement's columns (a two-column key's
    joined text is not one), each a value a plan writes."""
    statement = RESTORED_TABLES[table.name]
    if table.key_name is not None:
        row = {name: value for name, value in row.items() if name != table.key_name}
    if set(row) != statement.parameters:
        raise LedgerError(
            ARCHIVE_INVALID, f"a row of {table.name} does not hold its table's columns"
        )
    for name, value in row.items():
        if not (value is None or type(value) in (str, int, float)):
            raise LedgerError(ARCHIVE_INVALID, f"a row of {table.name}: {name} is no stored value")
    return SqlWrite(statement, dict(row))
