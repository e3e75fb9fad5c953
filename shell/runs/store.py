"""`RunStore` and `RunEvidenceReader`: runs, their events, and evidence snapshots of them."""

from __future__ import annotations

import os
import uuid
from collections.abc import Callable
from typing import Any, TypeVar

from aios_ledger.core import Decision, LedgerError, LogTail, TaskRow
from aios_ledger.core.log import LEDGER_CHAIN
from aios_ledger.core.runs import (
    EvidenceReadRequest,
    EvidenceSnapshot,
    RunCreateRequest,
    RunCreateState,
    RunEventAppendRequest,
    RunEventRow,
    RunEventsRequest,
    RunReadRequest,
    RunRow,
    RunState,
    build_evidence_snapshot,
    decide_append_run_event,
    decide_create_run,
)
from aios_ledger.core.runs.evidence import (
    MAX_EVENTS_PAGE,
    AttemptRunRequest,
    AttemptRunState,
    decide_create_attempt_run,
)
from aios_ledger.core.tasks.attempts import evidence_run, evidence_task
from aios_ledger.shell.actors import current_actor
from aios_ledger.shell.clock import Clock, read_clock, system_clock
from aios_ledger.shell.db.apply import PlanExecutor
from aios_ledger.shell.db.connection import Database, fetch_record, stream_records
from aios_ledger.shell.db.run import Connection

S = TypeVar("S")


def new_run_id() -> str:
    return "run-" + uuid.uuid4().hex


def _get_run(conn: Connection, run_id: str) -> RunRow | None:
    return fetch_record(conn, "get_run", {"run_id": run_id}, RunRow)


def _get_task(conn: Connection, task_id: str) -> TaskRow | None:
    return fetch_record(conn, "get_task", {"task_id": task_id}, TaskRow)


def _events(conn: Connection, run_id: str, limit: int, after: int = 0) -> tuple[RunEventRow, ...]:
    read = {"run_id": run_id, "after_seq": after, "limit": limit}
    return tuple(stream_records(conn, "run_events_page", read, RunEventRow))


def _last_events(conn: Connection, run_id: str, limit: int) -> tuple[RunEventRow, ...]:
    read = {"run_id": run_id, "limit": limit}
    return tuple(stream_records(conn, "run_events_tail", read, RunEventRow))


class RunStore:
    """Runs of sessions and their append-only events. `path=None`: an in-memory database."""

    def __init__(
        self,
        path: str | os.PathLike[str] | None = None,
        *,
        clock: Clock | None = None,
        database: Database | None = None,
        vfs: str | None = None,
        migrate: bool = True,
    ) -> None:
        self.database = (
            database if database is not None else Database(path, vfs=vfs, migrate=migrate)
        )
        self._clock = clock or system_clock

    def close(self) -> None:
        self.database.close()

    def __enter__(self) -> RunStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _decide(
        self,
        read_state: Callable[[Connection, LogTail], S],
        decide: Callable[..., Decision[Any]],
        request: object,
    ) -> Any:
        """`decide` on the state read in one write transaction, its plan applied there."""
        now, actor = read_clock(self._clock), current_actor()

        def write(conn: Connection) -> Any:
            plans = PlanExecutor(conn)
            state = read_state(conn, plans.tail(LEDGER_CHAIN))
            return plans.apply(decide(state, request, now=now, actor=actor))

        return self.database.write(write)

    def create_run(self, session_id: str, prompt: str, run_id: str | None = None) -> RunRow:
        """A new run; the same `run_id` with the same session and prompt returns it again."""
        request = RunCreateRequest.from_mapping(
            {
                "session_id": session_id,
                "prompt": prompt,
                "run_id": new_run_id() if run_id is None else run_id,
            }
        )

        def state(conn: Connection, tail: LogTail) -> RunCreateState:
            return RunCreateState(_get_run(conn, request.run_id), tail)

        return RunRow.from_row(self._decide(state, decide_create_run, request))

    def create_attempt_run(self, task_id: str, attempt: int) -> RunRow:
        """The evidence run of an attempt claimed before claims created one."""
        request = AttemptRunRequest.from_mapping({"task_id": task_id, "attempt": attempt})

        def state(conn: Connection, tail: LogTail) -> AttemptRunState:
            run = _get_run(conn, evidence_run(request.task_id, request.attempt))
            return AttemptRunState(_get_task(conn, request.task_id), run, tail)

        return RunRow.from_row(self._decide(state, decide_create_attempt_run, request))

    def append_event(
        self, run_id: str, kind: str, payload: Any = None, *, lease_token: str | None = None
    ) -> RunEventRow:
        """Append one event to a run, sealed on the ledger chain; an attempt's evidence run takes
        events only under its claim's `lease_token`."""
        request = RunEventAppendRequest.from_mapping(
            {"run_id": run_id, "kind": kind, "payload": payload, "lease_token": lease_token}
        )

        def state(conn: Connection, tail: LogTail) -> RunState:
            run = _get_run(conn, request.run_id)
            task_id = None if run is None else evidence_task(run.session_id)
            return RunState(run, None if task_id is None else _get_task(conn, task_id), tail=tail)

        return RunEventRow.from_row(self._decide(state, decide_append_run_event, request))

    def get_run(self, run_id: str) -> RunRow:
        request = RunReadRequest.from_mapping({"run_id": run_id})
        run = self.database.read(lambda conn: _get_run(conn, request.run_id))
        if run is None:
            raise LedgerError("RUN_NOT_FOUND", f"no run {request.run_id!r}")
        return run

    def run_events(
        self, run_id: str, *, limit: int = MAX_EVENTS_PAGE, after: int = 0
    ) -> tuple[RunEventRow, ...]:
        """The run's first `limit` events after the one numbered `after` (0: from the first)."""
        request = RunEventsRequest.from_mapping({"run_id": run_id, "limit": limit, "after": after})
        self.get_run(request.run_id)
        return self.database.read(
            lambda conn: _events(conn, request.run_id, request.limit, request.after)
        )

    def last_run_events(self, run_id: str, *, limit: int) -> tuple[RunEventRow, ...]:
        request = RunEventsRequest.from_mapping({"run_id": run_id, "limit": limit})
        self.get_run(request.run_id)
        newest = self.database.read(lambda conn: _last_events(conn, request.run_id, request.limit))
        return newest[::-1]


class RunEvidenceReader:
    """Reads bounded, digest-pinned evidence snapshots of runs, in one read transaction."""

    def __init__(self, runs: RunStore) -> None:
        self._runs = runs

    def read(self, request: EvidenceReadRequest) -> EvidenceSnapshot:
        if not isinstance(request, EvidenceReadRequest):
            raise LedgerError("FIELDS_INVALID", "request must be an EvidenceReadRequest")
        request.validate()
        target = request.target

        def read(conn: Connection) -> EvidenceSnapshot:
            run = _get_run(conn, target.run_id)
            if run is None:
                return build_evidence_snapshot(request, run, ())
            events = _events(conn, target.run_id, request.max_events + 1)
            keeps_tail = request.tail_limit and len(events) > request.max_events
            tail = _last_events(conn, target.run_id, request.tail_limit) if keeps_tail else ()
            return build_evidence_snapshot(request, run, events, tail)

        return self._runs.database.read(read)
