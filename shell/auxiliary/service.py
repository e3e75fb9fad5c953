"""`AuxiliaryRunService`: isolated sub-agent runs on asyncio, every state change a guarded write.

Each move of a run is a decision of the core, and its waiters' event is set only after the
terminal row is written, so no waiter can miss the end. Each service owns its runs under an
owner tag (`host:pid:token`), and opening one fails as `INTERRUPTED` every unfinished run whose
owner on this host is gone.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import socket
import time
import uuid
import weakref
from collections import OrderedDict
from collections.abc import Callable
from functools import partial
from typing import Any, Protocol, TypeVar

import attrs
from aios_ledger.core import AuxiliaryRunError, LedgerError, Timestamp
from aios_ledger.core.auxiliary import (
    AuxiliaryRowState,
    AuxiliaryRunListRequest,
    AuxiliaryRunOutput,
    AuxiliaryRunRow,
    AuxiliaryRunSnapshot,
    AuxiliaryRunSpec,
    AuxiliaryRunState,
    AuxiliaryStopRequest,
    AuxiliaryTransitionRequest,
    CheckedSpawn,
    RecoverInterruptedRequest,
    SpawnAnswer,
    UnfinishedRunsState,
    check_output,
    check_spawn,
    decide_recover_interrupted,
    decide_spawn,
    decide_stop,
    decide_transition,
)
from aios_ledger.core.auxiliary.records import failure_of, state_after
from aios_ledger.core.jsonvalue import loads_document
from aios_ledger.core.log import LEDGER_CHAIN
from aios_ledger.core.log.plan import Decision
from aios_ledger.core.runs import EvidenceSnapshot
from aios_ledger.core.structuring import unstructure
from aios_ledger.shell.actors import current_actor
from aios_ledger.shell.db.apply import PlanExecutor
from aios_ledger.shell.db.connection import (
    Database,
    Params,
    fetch_all,
    fetch_record,
    stream_records,
)
from aios_ledger.shell.db.run import Connection

ClockMs = Callable[[], int]
R = TypeVar("R")
POLL_SECONDS = 0.05
CANCEL_GRACE_SECONDS = 1.0
FINISHED_CACHE = 1024

_LIVE_OWNERS: set[str] = set()


def system_clock_ms() -> int:
    return time.time_ns() // 1_000_000


class CancellationToken:
    """Cooperative cancellation, used from the event loop's thread: `cancel()` wakes every
    `await cancelled()` and every child."""

    def __init__(self) -> None:
        self._cancelled = False
        self._event: asyncio.Event | None = None
        self._children: weakref.WeakSet[CancellationToken] = weakref.WeakSet()

    def cancel(self) -> None:
        if self._cancelled:
            return
        self._cancelled = True
        if self._event is not None:
            self._event.set()
        for child in list(self._children):
            child.cancel()

    @property
    def is_cancelled(self) -> bool:
        return self._cancelled

    async def cancelled(self) -> None:
        if self._cancelled:
            return
        if self._event is None:
            self._event = asyncio.Event()
        await self._event.wait()

    def child(self) -> CancellationToken:
        """A token cancelled with this one (and cancellable on its own)."""
        token = CancellationToken()
        if self._cancelled:
            token.cancel()
        else:
            self._children.add(token)
        return token


@attrs.frozen
class AuxiliaryRunContext:
    """What an executor gets: the spec, the pinned evidence, and its cancellation token."""

    spec: AuxiliaryRunSpec
    evidence: EvidenceSnapshot
    cancellation: CancellationToken


class AuxiliaryExecutor(Protocol):
    async def execute(self, context: AuxiliaryRunContext) -> Any: ...


class _Entry:
    """An auxiliary run this service drives: its token, its task, and the terminal signal."""

    def __init__(self, aux_id: str, token: CancellationToken) -> None:
        self.aux_id = aux_id
        self.token = token
        self.done = asyncio.Event()
        self.final: AuxiliaryRunRow | LedgerError | None = None
        self.task: asyncio.Task[None] | None = None


@attrs.frozen(eq=False)
class AuxiliaryRunHandle:
    """A spawned auxiliary run: `await wait()` for its output, `await snapshot()` for its row."""

    _service: AuxiliaryRunService = attrs.field(repr=False)
    id: str

    async def wait(self) -> AuxiliaryRunOutput:
        """The output, or the run's terminal `AuxiliaryRunError`; returns at once once it ended."""
        row = await self._service._terminal_row(self.id)
        outcome = row.outcome()
        if isinstance(outcome, AuxiliaryRunOutput):
            return outcome
        if isinstance(outcome, AuxiliaryRunError):
            raise outcome
        raise AuxiliaryRunError("EXECUTOR", f"auxiliary run {self.id} did not end")

    async def snapshot(self) -> AuxiliaryRunSnapshot:
        return await self._service.get(self.id)

    async def cancel(self) -> None:
        await self._service.cancel(self.id)


def owner_is_dead(owner: str) -> bool:
    """Whether the process that owned a run is certainly gone (never guessed for other hosts)."""
    parts = owner.rsplit(":", 2)
    if len(parts) != 3 or not parts[1].isdigit():
        return True
    host, pid_text, _ = parts
    if host != socket.gethostname():
        return False
    pid = int(pid_text)
    if pid == os.getpid():
        return owner not in _LIVE_OWNERS
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except OSError:
        return False
    return False


def _read_row(conn: Connection, aux_id: str) -> AuxiliaryRunRow | None:
    return fetch_record(conn, "get_auxiliary_run", {"aux_id": aux_id}, AuxiliaryRunRow)


def _read_rows(conn: Connection, name: str, params: Params | None) -> list[AuxiliaryRunRow]:
    return list(stream_records(conn, name, params, AuxiliaryRunRow))


def read_auxiliary_run(db: Database, aux_id: str) -> AuxiliaryRunRow:
    if not isinstance(aux_id, str):
        raise AuxiliaryRunError.invalid_field("aux_id", "must be a string")
    row = db.read(lambda conn: _read_row(conn, aux_id))
    if row is None:
        raise AuxiliaryRunError("RUN_NOT_FOUND", f"no auxiliary run {aux_id!r}")
    return row


def auxiliary_run_events(db: Database, aux_id: str) -> list[dict[str, Any]]:
    """The run's transitions in order, from the sealed ledger chain."""
    rows = db.read(lambda conn: fetch_all(conn, "auxiliary_run_events", {"aux_id": aux_id}))
    return [
        {
            "event_id": row["event_id"],
            "event_type": row["event_type"],
            "payload": loads_document(row["payload_json"], what="event payload"),
            "created_at": row["created_at"],
            "chain": row["chain"],
            "chain_seq": row["chain_seq"],
        }
        for row in rows
    ]


def list_auxiliary_runs(
    db: Database,
    *,
    state: str | None = None,
    session_id: str | None = None,
    run_id: str | None = None,
    limit: int = 100,
) -> list[AuxiliaryRunRow]:
    """Auxiliary runs, oldest first, at most `limit` (1 to 1000: a limit out of range is
    refused, not clamped)."""
    request = AuxiliaryRunListRequest.from_mapping(
        {"state": state, "session_id": session_id, "run_id": run_id, "limit": limit}
    )
    params = unstructure(request)  # exactly the statement's parameters
    return db.read(lambda conn: _read_rows(conn, "list_auxiliary_runs", params))


class AuxiliaryRunStore(Protocol):
    """Where a service keeps its runs: the ledger (`DatabaseAuxiliaryRuns`) or the HTTP API
    (`RemoteAuxiliaryRuns`, for `review --api`)."""

    def recover(self, owner_is_dead: Callable[[str], bool]) -> tuple[str, ...]: ...

    def spawn(
        self, checked: CheckedSpawn, evidence: EvidenceSnapshot, owner: str
    ) -> SpawnAnswer: ...

    def move(self, request: AuxiliaryTransitionRequest) -> AuxiliaryRunRow: ...

    def stop(self, request: AuxiliaryStopRequest) -> None: ...

    def read(self, aux_id: str) -> AuxiliaryRunRow: ...

    def close(self) -> None: ...


class DatabaseAuxiliaryRuns:
    """The runs in a ledger Database; `owned`: the store closes the Database."""

    def __init__(self, db: Database, clock_ms: ClockMs | None = None, *, owned: bool = False):
        self.db = db
        self._clock_ms = clock_ms or system_clock_ms
        self._owned = owned

    def _now(self) -> Timestamp:
        return Timestamp.from_epoch_ms(self._clock_ms())

    def close(self) -> None:
        if self._owned:
            self.db.close()

    def recover(self, owner_is_dead: Callable[[str], bool]) -> tuple[str, ...]:
        actor = current_actor()

        def write(conn: Connection) -> list[str]:
            plans = PlanExecutor(conn, error=AuxiliaryRunError)
            rows = tuple(_read_rows(conn, "unfinished_auxiliary_runs", None))
            dead = frozenset(row.owner for row in rows if owner_is_dead(row.owner))
            plan = decide_recover_interrupted(
                UnfinishedRunsState(rows, plans.tail(LEDGER_CHAIN)),
                RecoverInterruptedRequest(dead_owners=dead),
                now=self._now(),
                actor=actor,
            )
            response = plans.apply(plan)
            recovered = response["recovered"]
            return [str(item) for item in recovered] if isinstance(recovered, list) else []

        return tuple(self.db.write(write))

    def _decide(self, aux_id: str, decide: Callable[..., Decision[R] | None]) -> R | None:
        """`decide` on the run's row and the log's tail, its plan applied, in one transaction."""
        now, actor = self._now(), current_actor()

        def write(conn: Connection) -> R | None:
            plans = PlanExecutor(conn, error=AuxiliaryRunError)
            state = AuxiliaryRowState(_read_row(conn, aux_id), plans.tail(LEDGER_CHAIN))
            decision = decide(state, now=now, actor=actor)
            return None if decision is None else plans.apply(decision)

        return self.db.write(write)

    def spawn(self, checked: CheckedSpawn, evidence: EvidenceSnapshot, owner: str) -> SpawnAnswer:
        answer = self._decide(checked.spec.id, partial(decide_spawn, request=checked, owner=owner))
        assert answer is not None  # decide_spawn always decides
        return answer

    def move(self, request: AuxiliaryTransitionRequest) -> AuxiliaryRunRow:
        """The answer is the row as the plan wrote it, so settling the run needs no read."""
        row = self._decide(request.aux_id, partial(decide_transition, request=request))
        assert row is not None  # decide_transition always decides
        return row

    def stop(self, request: AuxiliaryStopRequest) -> None:
        self._decide(request.aux_id, partial(decide_stop, request=request))

    def read(self, aux_id: str) -> AuxiliaryRunRow:
        return read_auxiliary_run(self.db, aux_id)


class AuxiliaryRunService:
    """Runs auxiliary executors over pinned evidence; `path=None`: an in-memory database."""

    def __init__(
        self,
        executor: AuxiliaryExecutor,
        path: str | os.PathLike[str] | None = None,
        *,
        clock_ms: ClockMs | None = None,
        poll_seconds: float = POLL_SECONDS,
        synchronous: str = "FULL",
        vfs: str | None = None,
        migrate: bool = True,
        store: AuxiliaryRunStore | None = None,
    ) -> None:
        self._executor = executor
        self._clock_ms = clock_ms or system_clock_ms
        self._poll_seconds = poll_seconds
        self._entries: dict[str, _Entry] = {}
        self._finished: OrderedDict[str, _Entry] = OrderedDict()
        if store is None:
            db = Database(path, synchronous=synchronous, vfs=vfs, migrate=migrate)
            store = DatabaseAuxiliaryRuns(db, self._clock_ms, owned=True)
        self._store = store
        # A driver's error that slips past the Database's translation is kept quiet too.
        self._quiet: tuple[type[Exception], ...] = (LedgerError,)
        if isinstance(store, DatabaseAuxiliaryRuns):
            self._quiet = (LedgerError, store.db.driver_error)
        self.owner = f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:16]}"
        _LIVE_OWNERS.add(self.owner)
        self.recovered: tuple[str, ...] = self._store.recover(owner_is_dead)

    @property
    def _db(self) -> Database:
        """The Database of a service that keeps its runs in one, for tests and tools."""
        if not isinstance(self._store, DatabaseAuxiliaryRuns):
            raise AttributeError("this service keeps its runs behind the API")
        return self._store.db

    def close(self) -> None:
        """Close at once, leaving runs in flight unfinished as if the process had died, for the
        next service to fail as `INTERRUPTED`; `aclose()` records them CANCELLED instead."""
        _LIVE_OWNERS.discard(self.owner)
        for entry in list(self._entries.values()):
            entry.token.cancel()
        self._store.close()

    async def aclose(self) -> None:
        """Cancel the runs still in flight, let them record CANCELLED, then close."""
        for entry in list(self._entries.values()):
            entry.token.cancel()
        tasks = [entry.task for entry in self._entries.values() if entry.task is not None]
        if tasks:
            await asyncio.wait(tasks)
        self.close()

    async def __aenter__(self) -> AuxiliaryRunService:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def spawn(
        self,
        spec: AuxiliaryRunSpec,
        evidence: EvidenceSnapshot,
        parent: CancellationToken | None = None,
    ) -> AuxiliaryRunHandle:
        if parent is not None and not isinstance(parent, CancellationToken):
            raise AuxiliaryRunError.invalid_field("parent", "must be a CancellationToken or None")
        checked = check_spawn(spec, evidence)
        aux_id = checked.spec.id
        answer = self._store.spawn(checked, evidence, self.owner)
        if answer.get("idempotent", False):
            return AuxiliaryRunHandle(self, aux_id)
        token = parent.child() if parent is not None else CancellationToken()
        entry = _Entry(aux_id, token)
        self._entries[aux_id] = entry
        entry.task = asyncio.create_task(self._drive(entry, spec, evidence))
        return AuxiliaryRunHandle(self, aux_id)

    async def get(self, aux_id: str) -> AuxiliaryRunSnapshot:
        return self._store.read(aux_id).snapshot()

    async def handle(self, aux_id: str) -> AuxiliaryRunHandle:
        self._store.read(aux_id)
        return AuxiliaryRunHandle(self, aux_id)

    async def cancel(self, aux_id: str) -> None:
        """Ask a run this service drives to stop (it ends CANCELLED unless it already ended)."""
        entry = self._entries.get(aux_id)
        if entry is None:
            self._store.read(aux_id)
            return
        entry.token.cancel()

    def _move(
        self,
        aux_id: str,
        target: AuxiliaryRunState,
        *,
        output: AuxiliaryRunOutput | None = None,
        error: AuxiliaryRunError | None = None,
    ) -> AuxiliaryRunRow:
        request = AuxiliaryTransitionRequest(aux_id, target, output=output, error=error)
        return self._store.move(request)

    async def _drive(
        self, entry: _Entry, spec: AuxiliaryRunSpec, evidence: EvidenceSnapshot
    ) -> None:
        aux_id = entry.aux_id
        try:
            if entry.token.is_cancelled:
                self._move(
                    aux_id,
                    AuxiliaryRunState.CANCELLED,
                    error=AuxiliaryRunError("CANCELLED", "cancelled before it started"),
                )
                return
            self._move(aux_id, AuxiliaryRunState.RUNNING)
            outcome = await self._execute(entry, spec, evidence)
            if isinstance(outcome, AuxiliaryRunOutput):
                entry.final = self._move(aux_id, AuxiliaryRunState.COMPLETED, output=outcome)
            else:
                entry.final = self._move(aux_id, state_after(outcome), error=outcome)
        except asyncio.CancelledError:
            # The loop is shutting down: record it.
            entry.token.cancel()
            with contextlib.suppress(*self._quiet):
                stopped = AuxiliaryRunError("CANCELLED", "the service stopped the run")
                self._store.stop(AuxiliaryStopRequest(aux_id, stopped))
            raise
        except LedgerError as refused:
            # The database, read below, says how the run ended.
            entry.final = refused
        finally:
            self._settle(entry)

    def _settle(self, entry: _Entry) -> None:
        final = entry.final
        if not (isinstance(final, AuxiliaryRunRow) and final.run_state.is_terminal):
            with contextlib.suppress(*self._quiet):
                row = self._store.read(entry.aux_id)
                if row.run_state.is_terminal:
                    entry.final = row
        if entry.final is None:
            entry.final = AuxiliaryRunError(
                "EXECUTOR", f"auxiliary run {entry.aux_id} stopped without a terminal state"
            )
        # No await between signal and retire: a later waiter finds the entry among the finished.
        entry.done.set()
        entry.task = None
        self._entries.pop(entry.aux_id, None)
        self._finished[entry.aux_id] = entry
        while len(self._finished) > FINISHED_CACHE:
            self._finished.popitem(last=False)

    async def _execute(
        self, entry: _Entry, spec: AuxiliaryRunSpec, evidence: EvidenceSnapshot
    ) -> AuxiliaryRunOutput | AuxiliaryRunError:
        context = AuxiliaryRunContext(spec=spec, evidence=evidence, cancellation=entry.token)
        work: asyncio.Future[Any] = asyncio.ensure_future(self._executor.execute(context))
        stop: asyncio.Future[None] = asyncio.ensure_future(entry.token.cancelled())
        timeout = None if spec.timeout_ms is None else spec.timeout_ms / 1000
        try:
            done, _ = await asyncio.wait(
                {work, stop}, timeout=timeout, return_when=asyncio.FIRST_COMPLETED
            )
        except asyncio.CancelledError:
            work.cancel()
            raise
        finally:
            stop.cancel()
        if work in done:
            return _settle_work(spec, work)
        entry.token.cancel()
        work.cancel()
        await asyncio.wait({work}, timeout=CANCEL_GRACE_SECONDS)
        if stop in done:
            return AuxiliaryRunError("CANCELLED", "the parent cancelled the run")
        return AuxiliaryRunError(
            "TIMEOUT", f"the executor did not finish within {spec.timeout_ms} ms"
        )

    async def _terminal_row(self, aux_id: str) -> AuxiliaryRunRow:
        entry = self._entries.get(aux_id) or self._finished.get(aux_id)
        if entry is not None:
            await entry.done.wait()
            final = entry.final
            if isinstance(final, AuxiliaryRunRow):
                return final
            with contextlib.suppress(LedgerError):
                row = self._store.read(aux_id)
                if row.run_state.is_terminal:
                    return row
            if isinstance(final, LedgerError):
                raise AuxiliaryRunError(final.code, final.detail)
            raise AuxiliaryRunError("EXECUTOR", f"auxiliary run {aux_id} did not end")
        # A run this service does not drive: poll.
        while True:
            row = self._store.read(aux_id)
            if row.run_state.is_terminal:
                return row
            await asyncio.sleep(self._poll_seconds)


def _settle_work(
    spec: AuxiliaryRunSpec, work: asyncio.Future[Any]
) -> AuxiliaryRunOutput | AuxiliaryRunError:
    if work.cancelled():
        return AuxiliaryRunError("CANCELLED", "the executor was cancelled")
    failure = work.exception()
    if failure is not None:
        return failure_of(failure)
    try:
        return check_output(spec, work.result())
    except AuxiliaryRunError as refused:
        return refused
