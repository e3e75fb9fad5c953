"""Archiving finished tasks without breaking the proof: their events are listed in
`archived_events`, their rows deleted, and one sealed ledger-level `TASKS_ARCHIVED` event records
the archive file's digest and each removed chain's end, which `core.log.archived` checks.
"""

from __future__ import annotations

from typing import TypedDict

import attrs
from aios_ledger.core.actors import Actor
from aios_ledger.core.errors import LedgerError
from aios_ledger.core.jsonvalue import JsonObject
from aios_ledger.core.log.archived import (
    ARCHIVE_FORMAT_FIELD,
    TASKS_ARCHIVED,
    LedgerSealedRow,
    ledger_rows_record,
)
from aios_ledger.core.log.export import ARCHIVE_FORMAT
from aios_ledger.core.log.plan import WritePlan, sealed_plan
from aios_ledger.core.log.tail import EventAppend, LogTail
from aios_ledger.core.statements import SqlParam, SqlWrite, Statement
from aios_ledger.core.timestamps import Timestamp, require_timestamp

FINISHED_STATUSES = frozenset(("SUCCEEDED", "FAILED", "CANCELLED"))
ARCHIVE_DIGEST_PREFIX = "sha256:"

# Each task's rows, deleted in this order (children before the rows they reference); the task
# row itself goes last, guarded by the revision the decision read.
_TASK_DELETES = (
    Statement.DELETE_ARCHIVED_SEALED_ROWS,
    Statement.DELETE_ARCHIVED_SEALS,
    Statement.DELETE_ARCHIVED_EVENTS,
    Statement.DELETE_ARCHIVED_IDEMPOTENCY,
    Statement.DELETE_ARCHIVED_PROJECTIONS,
    Statement.DELETE_ARCHIVED_RECOVERIES,
    Statement.DELETE_ARCHIVED_BINDINGS,
    # Its attempt runs with their events and reviews, which TASKS_ARCHIVED records.
    Statement.DELETE_ARCHIVED_RUN_EVENTS,
    Statement.DELETE_ARCHIVED_AUXILIARY_RUNS,
    Statement.DELETE_ARCHIVED_RUNS,
    # Its proposals (a task with a governed write stays), scan charges and spend.
    Statement.DELETE_ARCHIVED_PROPOSALS,
    Statement.DELETE_ARCHIVED_SCAN_CHARGES,
    Statement.DELETE_ARCHIVED_SPEND,
)


@attrs.frozen
class ArchiveCandidate:
    """A task as archiving reads it; `last_seal` is None for a chain with no sealed event."""

    task_id: str
    status: str
    revision: int
    updated_at: str
    events: int
    last_event_id: int | None
    last_seal: str | None
    ledger_rows: tuple[LedgerSealedRow, ...] = ()


@attrs.frozen
class ArchiveRequest:
    """Archive the finished tasks last written before `finished_before`."""

    finished_before: Timestamp

    @classmethod
    def parse(cls, finished_before: object) -> ArchiveRequest:
        return cls(Timestamp.parse(finished_before, field="finished_before"))


@attrs.frozen
class ArchiveState:
    """The candidates and the ledger chain's tail, which the TASKS_ARCHIVED event extends."""

    candidates: tuple[ArchiveCandidate, ...]
    tail: LogTail


class ArchiveAnswer(TypedDict):
    archived: int
    events: int
    finished_before: str
    archive_sha256: str
    archive_event_id: int
    task_ids: list[str]


def select_archive(
    candidates: tuple[ArchiveCandidate, ...], request: ArchiveRequest
) -> tuple[ArchiveCandidate, ...]:
    """The finished candidates last written before the cut-off, with a sealed chain (one never
    sealed cannot be proven, so it stays)."""
    return tuple(
        candidate
        for candidate in candidates
        if candidate.status in FINISHED_STATUSES
        and Timestamp.parse(candidate.updated_at, field="updated_at") < request.finished_before
        and candidate.last_seal is not None
    )


def decide_archive(
    state: ArchiveState,
    request: ArchiveRequest,
    *,
    now: Timestamp,
    actor: Actor,
    archive_digest: str,
) -> WritePlan[ArchiveAnswer]:
    """The listings, the deletes and the sealed TASKS_ARCHIVED event recording `archive_digest`."""
    require_timestamp(now)
    if not archive_digest.startswith(ARCHIVE_DIGEST_PREFIX):
        raise LedgerError("ARCHIVE_DIGEST_INVALID", "the archive digest is not a sha256 digest")
    chosen = select_archive(state.candidates, request)
    if not chosen:
        raise LedgerError("NOTHING_TO_ARCHIVE", "no finished task was last written before it")
    archive_event_id = state.tail.next_event_id
    writes: list[SqlWrite] = []
    for candidate in chosen:
        task: dict[str, SqlParam] = {"task_id": candidate.task_id}
        listing: dict[str, SqlParam] = {**task, "archive_event_id": archive_event_id}
        writes.append(SqlWrite(Statement.LIST_ARCHIVED_EVENTS, listing))
        writes.extend(SqlWrite(statement, task) for statement in _TASK_DELETES)
        guarded: dict[str, SqlParam] = {**task, "expected_revision": candidate.revision}
        writes.append(SqlWrite(Statement.DELETE_ARCHIVED_TASK, guarded))
    events = sum(candidate.events for candidate in chosen)
    payload: JsonObject = {
        "archive_sha256": archive_digest,
        ARCHIVE_FORMAT_FIELD: ARCHIVE_FORMAT,
        "finished_before": request.finished_before.text,
        "tasks": len(chosen),
        "events": events,
        "chains": [_chain_record(candidate) for candidate in chosen],
    }
    event = EventAppend(None, None, TASKS_ARCHIVED, payload, now.text, actor=actor)
    answer: ArchiveAnswer = {
        "archived": len(chosen),
        "events": events,
        "finished_before": request.finished_before.text,
        "archive_sha256": archive_digest,
        "archive_event_id": archive_event_id,
        "task_ids": [candidate.task_id for candidate in chosen],
    }
    return sealed_plan(writes, [event], answer, tail=state.tail)


def _chain_record(candidate: ArchiveCandidate) -> JsonObject:
    """What the TASKS_ARCHIVED event records of one chain: its end and its ledger-sealed rows."""
    record: JsonObject = {
        "task_id": candidate.task_id,
        "last_event_id": candidate.last_event_id,
        "last_seal": candidate.last_seal,
    }
    if candidate.ledger_rows:
        record["ledger_rows"] = ledger_rows_record(candidate.ledger_rows)
    return record
