"""`TaskLedger`: the task lifecycle and its reads over a ledger database.

Every write is one transaction: read the rows with named SQL, let the core decide, apply its
plan; a refused call raises a `LedgerError` and leaves the database as it was.
"""

from __future__ import annotations

import functools
import os
import random
import secrets
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from typing import Any, TypeVar, cast

import attrs
from aios_ledger.core import (
    ClaimAnswer,
    ClaimBatchRequest,
    ClaimRequest,
    EventRow,
    EventView,
    ExpireAnswer,
    ExpireRequest,
    ExpiryState,
    HistoryEntry,
    IdempotencyRow,
    LedgerError,
    SubmitAnswer,
    SubmitRequest,
    TaskListRequest,
    TaskReadRequest,
    TaskRow,
    TaskState,
    TaskSummary,
    TaskView,
    Timestamp,
    VerifyAnswer,
    VerifyRequest,
    chain_of,
)
from aios_ledger.core.actors import Actor
from aios_ledger.core.batches import each_item, structure_batch
from aios_ledger.core.jsonvalue import JsonValue, encode_checked
from aios_ledger.core.log.seals import ChainTip
from aios_ledger.core.structuring import check_built
from aios_ledger.core.tasks import (
    RESULT_CONTRACTS,
    refuse_ungranted,
    task_history,
)
from aios_ledger.core.tasks.answers import TaskDetail, event_view
from aios_ledger.core.tasks.listing import TaskPageRequest
from aios_ledger.core.tasks.operations import decide_task, operation_of
from aios_ledger.core.tasks.records import require_task
from aios_ledger.core.tasks.requests import TaskRequest
from aios_ledger.core.tasks.transitions import Lease, Scope, StateRead, TaskTransition
from aios_ledger.core.work import IdleReason, idle_reason
from aios_ledger.shell.actors import current_actor
from aios_ledger.shell.clock import Clock, read_clock, system_clock
from aios_ledger.shell.contracts import result_contract
from aios_ledger.shell.db.apply import PlanExecutor
from aios_ledger.shell.db.connection import (
    Database,
    Row,
    fetch_all,
    fetch_record,
    stream_records,
)
from aios_ledger.shell.db.read_records import READ_RECORDS
from aios_ledger.shell.db.run import (
    Connection,
    fetch_record_lists_together,
    fetch_records_together,
)
from aios_ledger.shell.db.statements import statements
from aios_ledger.shell.tasks.holders import task_holders, task_views
from aios_ledger.shell.tasks.listing import read_task_page
from aios_ledger.shell.tasks.surface import TaskSurface, listed, new_lease_token, offered
from aios_ledger.shell.tracing import record_writes, write_started

# Passed leases one claim takes over, so that it stays short; the claims after it take the rest.
TAKEOVER_BATCH = 32
TASK_ID_BYTES = 16
# Distinct capability sets an idle worker's reason reads (a queue holds a few).
IDLE_GROUPS = 200


T = TypeVar("T")
A = TypeVar("A")


def new_task_id() -> str:
    return "task-" + secrets.token_hex(TASK_ID_BYTES)


def _task(conn: Connection, task_id: str) -> TaskRow | None:
    return fetch_record(conn, "get_task", {"task_id": task_id}, TaskRow)


class TaskLedger(TaskSurface):
    """Agents take tasks under leases and hand results back; nothing they do breaks the rules.

    `synchronous`, `vfs` and `migrate` are passed to `Database`; `database=` runs over an open
    one the caller keeps and closes. `jitter` draws a retry backoff's spread in [0, 1).
    A lease token is shown once and only its sha256 stored, so an idempotent claim brings its
    own token: a replay with the same key and token gives back the same claim.
    """

    def __init__(
        self,
        path: str | os.PathLike[str] | None = None,
        *,
        database: Database | None = None,
        clock: Clock | None = None,
        synchronous: str = "FULL",
        vfs: str | None = None,
        migrate: bool = True,
        jitter: Callable[[], float] | None = None,
    ) -> None:
        # The API server shares one Database between its stores: it closes it, not the ledger.
        self._owns_db = database is None
        self._db = (
            database
            if database is not None
            else Database(path, synchronous=synchronous, vfs=vfs, migrate=migrate)
        )
        self._clock: Clock = clock or system_clock
        # Spread, not secrecy: `random` is enough to keep failed tasks from returning together.
        self._jitter: Callable[[], float] = jitter or random.random

    @property
    def database(self) -> Database:
        return self._db

    def close(self) -> None:
        if self._owns_db:
            self._db.close()

    def __enter__(self) -> TaskLedger:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _now(self) -> Timestamp:
        return read_clock(self._clock)

    def _write(self, work: Callable[[Connection], T], *, urgent: bool = False) -> T:
        """A write locks the rows it decides on and appends only to their chains, so writers of
        different tasks run side by side on PostgreSQL; group commit takes `urgent` ones first."""
        return self._db.write(work, row_locked=True, urgent=urgent)

    # -- writes ---------------------------------------------------------------------------

    def apply(self, request: TaskRequest[A], *, grant: Collection[str] | None = None) -> A:
        """The write `request` asks for, in one transaction, answered as its keyword method
        answers; `grant` bounds what a claim may offer."""
        _checked(request)
        return self._apply(request, grant=grant)

    def apply_all(self, requests: Iterable[TaskRequest[A]]) -> list[A]:
        """Many writes on one task each, in one transaction: all or none, a refusal's detail
        starting with `item N:`."""
        checked = structure_batch(listed(requests), _checked)
        return cast(list[A], self._apply_all(checked))

    def _apply(self, request: TaskRequest[A], *, grant: Collection[str] | None = None) -> A:
        started = write_started()
        answer: A = self._apply_one(request, grant=grant)
        if started is not None:  # tracing is on
            record_writes(
                operation_of(request).name,
                _written_tasks(answer),
                started=started,
                db_system=self._db.engine,
            )
        return answer

    def claim(
        self,
        *,
        agent_id: str,
        capabilities: Sequence[str],
        lease_seconds: int,
        task_id: str | None = None,
        idempotency_key: str | None = None,
        lease_token: str | None = None,
        grant: Collection[str] | None = None,
    ) -> ClaimAnswer | None:
        """Take the next eligible task (or `task_id`) under a lease, passed leases taken over
        first so that a fleet needs no sweeper; None: nothing to take. An offer beyond `grant`
        is `CAPABILITY_NOT_GRANTED`."""
        held = {"task_id": task_id, "idempotency_key": idempotency_key, "lease_token": lease_token}
        request = offered(ClaimRequest, agent_id, capabilities, lease_seconds, **held)
        return self._apply(request, grant=grant)

    def claim_many(
        self,
        *,
        agent_id: str,
        capabilities: Sequence[str],
        lease_seconds: int,
        limit: int,
        grant: Collection[str] | None = None,
    ) -> list[ClaimAnswer]:
        """Take up to `limit` eligible tasks in one transaction, each under its own lease. Not
        idempotent: a repeat after a lost answer takes other tasks, and the lost leases lapse.
        An offer beyond `grant` is `CAPABILITY_NOT_GRANTED`."""
        request = offered(ClaimBatchRequest, agent_id, capabilities, lease_seconds, limit=limit)
        return self._apply(request, grant=grant)

    def _apply_one(self, request: TaskRequest[A], *, grant: Collection[str] | None) -> Any:
        """A write's operation scope says what it reads: one task, the queue or passed leases."""
        row = operation_of(request)
        # Read here, in the caller's context: the write may run on another thread.
        actor = current_actor()
        if row.scope is Scope.QUEUE:
            claim = cast(ClaimRequest | ClaimBatchRequest, request)
            return self._claim(claim, _ceiling(grant), actor)
        if row.scope is Scope.LEASES:
            expire = cast(ExpireRequest, request)
            return self._write(
                lambda conn: _expire_step(PlanExecutor(conn), expire, self._now(), actor)
            )
        generated = _generated_id(row, request)
        created = self._now() if generated else None
        return self._write(
            lambda conn: self._step(PlanExecutor(conn), request, generated, created, actor),
            # A renewal is answered before its lease passes, however many writes are queued.
            urgent=row.lease is Lease.EXTEND,
        )

    def _apply_all(self, requests: Sequence[TaskRequest[A]]) -> list[A]:
        started = write_started()
        answers = self._apply_batch(requests)
        if started is not None:  # tracing is on
            for request, answer in zip(requests, answers, strict=True):
                record_writes(
                    operation_of(request).name,
                    [answer],
                    started=started,
                    db_system=self._db.engine,
                )
        return answers

    def _apply_batch(self, requests: Sequence[TaskRequest[A]]) -> list[A]:
        for request in requests:
            if operation_of(request).scope is not Scope.TASK:
                raise LedgerError(
                    "FIELDS_INVALID", "a batch holds writes on one task each: no claim or expiry"
                )
        # A created task's id is generated before the transaction, and its time read once.
        generated = [_generated_id(operation_of(request), request) for request in requests]
        created = self._now() if any(generated) else None

        reads = [
            _item_reads(operation_of(request), request, item)
            for request, item in zip(requests, generated, strict=True)
        ]
        actor = current_actor()

        def write(conn: Connection) -> list[A]:
            plans = PlanExecutor(conn)
            found = _read_ahead(plans, reads)
            return each_item(
                list(range(len(requests))),
                lambda n: self._step(plans, requests[n], generated[n], created, actor, found[n]),
            )

        return self._write(write)

    def _step(
        self,
        plans: PlanExecutor,
        request: Any,
        generated: Mapping[str, Any],
        created: Timestamp | None,
        actor: Actor,
        found: Sequence[Any] | None = None,
    ) -> Any:
        """One write on one task inside the caller's transaction; `found`: its reads, when a
        batch read them ahead."""
        row = operation_of(request)
        reads = _item_reads(row, request, generated)
        if found is None:
            # The one event its plan appends: the engine may prepare its id with the reads.
            found = fetch_records_together(plans.conn, reads.reads(), appending=1)
        state = reads.state(plans, found)
        # Any write but a create reads its time once the task is locked (see `_claim`).
        now = created if generated and created is not None else self._now()
        supplied: dict[str, Callable[[], Any]] = {
            "jitter": self._jitter,
            "contracts": _result_contracts,
        }
        inputs = {
            name: generated[name] if name in generated else supplied[name]()
            for name in row.shell_inputs
        }
        decision = decide_task(state, request, now=now, actor=actor, **inputs)
        assert decision is not None  # only a claim or an expiry finds nothing to do
        return plans.apply(decision)

    def _claim(
        self,
        request: ClaimRequest | ClaimBatchRequest,
        ceiling: frozenset[str] | None,
        actor: Actor,
    ) -> Any:
        """A claim takes over passed leases first, then the named task or the candidates, each
        row locked as it is read (SKIP LOCKED on PostgreSQL: claimers never wait on each other)."""
        batch = request if isinstance(request, ClaimBatchRequest) else None
        claim = batch.claim() if batch is not None else cast(ClaimRequest, request)
        count = 1 if batch is None else batch.limit
        if batch is None:
            tokens: tuple[str, ...] = (claim.lease_token or new_lease_token(),)
        else:
            tokens = tuple(new_lease_token() for _ in range(count))

        def write(conn: Connection) -> Any:
            refuse_ungranted(claim.capabilities, ceiling)  # before any read or takeover
            plans = PlanExecutor(conn)
            now = self._now()
            key = None if batch is not None else claim.idempotency_key
            # One round trip: a replay ignores the rows it locked and lets them go at its commit.
            reads: list[Read] = [
                ("tasks_expired_leases", {"now": now.text, "limit": TAKEOVER_BATCH}, TaskRow),
                (
                    ("get_task_for_update", {"task_id": claim.task_id}, TaskRow)
                    if claim.task_id is not None
                    else _candidates(claim, now, count)
                ),
            ]
            if key is not None:
                reads.append(("task_idempotency_get", {"idempotency_key": key}, IdempotencyRow))
            found = fetch_record_lists_together(conn, reads)
            prior = found[2][0] if key is not None and found[2] else None
            task: TaskRow | None = None
            passed: tuple[TaskRow, ...] = ()
            candidates: tuple[TaskRow, ...] = ()
            if prior is None:
                passed = tuple(found[0])
                if claim.task_id is not None:
                    task = found[1][0] if found[1] else None
                else:
                    candidates = tuple(found[1])
                # Read once the tasks are locked, so that times never go back along a chain.
                now = self._now()
            read = (*passed, *([] if task is None else [task]), *candidates)
            chains = dict.fromkeys(chain_of(row.task_id) for row in read)
            # A takeover and a claim append one event each: their ids come with the tips.
            state = TaskState(
                task=task,
                tail=plans.tail(*chains, appending=len(read)),
                prior=prior,
                candidates=candidates,
                passed=passed,
            )
            decision = decide_task(
                state,
                request,
                now=now,
                actor=actor,
                lease_token=tokens[0],
                lease_tokens=tokens,
                grant=ceiling,
            )
            if decision is None:
                return None if batch is None else []
            return plans.apply(decision)

        return self._write(write)

    def submit_results(self, items: Iterable[Mapping[str, Any]]) -> list[SubmitAnswer]:
        """Many `submit_result` calls in one transaction, all or none."""
        return self._apply_all(structure_batch(listed(items), SubmitRequest.from_mapping))

    def verify(
        self,
        task_id: str,
        *,
        decision: str,
        reason: str,
        idempotency_key: str,
        expected_result_digest: str | None = None,
        reviewer: str | None = None,
    ) -> VerifyAnswer:
        """Judge a SUBMITTED result: SUCCEEDED, NEEDS_REWORK or FAILED. `reviewer` may not be
        the agent that submitted it (`SELF_REVIEW`); None names nobody (the local command line)."""
        return self._apply(
            VerifyRequest.from_mapping(
                {
                    "task_id": task_id,
                    "decision": decision,
                    "reason": reason,
                    "idempotency_key": idempotency_key,
                    "expected_result_digest": expected_result_digest,
                    "agent_id": reviewer,
                }
            )
        )

    def verify_results(
        self, items: Iterable[Mapping[str, Any]], *, reviewer: str | None = None
    ) -> list[VerifyAnswer]:
        """Many `verify` calls in one transaction, all or none, each by `reviewer`."""
        return self._apply_all(
            structure_batch(
                listed(items),
                lambda item: VerifyRequest.from_mapping(_acting(item, reviewer)),
            )
        )

    def expire_leases(self) -> ExpireAnswer:
        """Requeue (or fail) every task whose lease passed, one transaction per batch."""
        request = ExpireRequest()
        expired: list[TaskSummary] = []
        while True:
            batch: ExpireAnswer = self._apply(request)
            expired.extend(batch["expired"])
            if batch["count"] < request.limit:
                return {"expired": expired, "count": len(expired)}

    # -- reads ----------------------------------------------------------------------------

    def idle_reason(
        self, capabilities: Sequence[str], *, grant: Collection[str] | None = None
    ) -> IdleReason:
        """Why a claimer offering `capabilities` finds nothing to claim now; tasks needing a
        capability beyond `grant` are told apart from those it could take by offering more."""
        params = {"now": self._now().text, "limit": IDLE_GROUPS}
        groups = self._db.read(lambda conn: fetch_all(conn, "idle_queue_groups", params))
        return idle_reason(groups, capabilities, _ceiling(grant))

    def get(self, task_id: str) -> TaskDetail:
        request = TaskReadRequest.from_mapping({"task_id": task_id})

        def read(conn: Connection) -> TaskDetail:
            task = require_task(request.task_id, _task(conn, request.task_id))
            (view,) = task_views(conn, [task])
            return {**view, "holders": task_holders(conn, task.task_id)}

        return self._db.read(read)

    def events(self, task_id: str) -> list[EventView]:
        request = TaskReadRequest.from_mapping({"task_id": task_id})
        params = {"task_id": request.task_id}

        def read(conn: Connection) -> list[Row]:
            rows = fetch_all(conn, "log_export_task", params)
            if not rows:
                require_task(request.task_id, _task(conn, request.task_id))
            return rows

        return [event_view(EventRow.from_row(row)) for row in self._db.read(read)]

    def history(self, task_id: str) -> list[HistoryEntry]:
        return task_history(self.events(task_id))

    def list_tasks(
        self, status: str | None = None, *, limit: int = 100, agent: str | None = None
    ) -> list[TaskView]:
        """Tasks of one status in claim order, or all oldest first; with `agent`, those it held
        in any attempt, newest first, as `GET /v1/tasks?agent=` lists them."""
        if agent is not None:
            given = {"status": status, "agent": agent, "limit": limit}
            page = TaskPageRequest.from_mapping(
                {name: value for name, value in given.items() if value is not None}
            )
            # The first page alone: its next cursor, signed with a key of this call, is unused.
            return read_task_page(self._db, page, secrets.token_bytes(32))["tasks"]
        request = TaskListRequest.from_mapping({"status": status, "limit": limit})
        statement = "tasks_list_all" if request.status is None else "tasks_list_by_status"
        params = {"status": request.status, "limit": request.limit}
        return self._db.read(
            lambda conn: task_views(
                conn, [TaskRow.from_row(row) for row in fetch_all(conn, statement, params)]
            )
        )


def _written_tasks(answer: object) -> list[Any]:
    """The tasks a write's answer is about, for its tracing spans."""
    if answer is None:
        return []
    if isinstance(answer, list):
        return answer
    if isinstance(answer, dict) and isinstance(answer.get("expired"), list):
        return list(answer["expired"])
    return [answer]


def _acting(item: object, agent_id: str | None) -> object:
    """A request mapping with its acting agent (None: as it is)."""
    if agent_id is None or not isinstance(item, Mapping):
        return item
    return {**item, "agent_id": agent_id}


def _checked(request: object) -> TaskRequest[Any]:
    """A request record, checked as `from_mapping` would check one a caller built itself."""
    check_built(request, what=operation_of(request).name)
    checked = cast(TaskRequest[Any], request)
    checked.check()
    return checked


def _generated_id(row: TaskTransition, request: Any) -> dict[str, Any]:
    """A created task's id, drawn before the transaction as its decision's `task_id` input."""
    if "task_id" in row.shell_inputs:
        return {"task_id": request.task.task_id or new_task_id()}
    return {}


def _ceiling(grant: Collection[str] | None) -> frozenset[str] | None:
    """A caller's grant as the core holds claims to it (None: no ceiling)."""
    if grant is None:
        return None
    names = listed(grant)
    if not isinstance(names, list) or not all(isinstance(name, str) for name in names):
        raise LedgerError("FIELDS_INVALID", "grant: must be a list of capability names")
    return frozenset(names)


def _candidates(
    request: ClaimRequest, now: Timestamp, count: int
) -> tuple[str, dict[str, object], type[TaskRow]]:
    """The read of the first `count` tasks this claimer may take now, in claim order."""
    names: list[JsonValue] = [str(name) for name in sorted(request.capabilities)]
    params = {"now": now.text, "limit": count, "offered_json": encode_checked(names)}
    return ("tasks_claim_candidates", params, TaskRow)


def _expire_step(
    plans: PlanExecutor, request: ExpireRequest, now: Timestamp, actor: Actor
) -> ExpireAnswer:
    """Requeue (or fail) up to `request.limit` CLAIMED tasks whose leases have passed."""
    params = {"now": now.text, "limit": request.limit}
    rows = tuple(stream_records(plans.conn, "tasks_expired_leases", params, TaskRow))
    nothing: ExpireAnswer = {"expired": [], "count": 0}
    if not rows:
        return nothing
    tail = plans.tail(*(chain_of(task.task_id) for task in rows))
    decision = decide_task(ExpiryState(tasks=rows, tail=tail), request, now=now, actor=actor)
    return nothing if decision is None else cast(ExpireAnswer, plans.apply(decision))


Read = tuple[str, dict[str, object], "type[Any] | None"]


@attrs.frozen
class _ItemReads:
    """What one write on one task reads before its decision, read together in one round trip
    on PostgreSQL: the task, its chain's tip, the answer for `key`, the operation's own reads."""

    task_id: str
    key: str | None
    creating: bool = False
    extra: tuple[StateRead, ...] = ()

    def reads(self) -> list[Read]:
        # A create's sequence first, as bench/transitions.py reads it; drawing it locks nothing.
        found: list[Read] = [("tasks_next_seq", {}, None)] if self.creating else []
        found += [
            ("get_task_for_update", {"task_id": self.task_id}, TaskRow),
            ("chain_tip", {"chain": chain_of(self.task_id)}, ChainTip),
        ]
        if self.key is not None:
            found.append(("task_idempotency_get", {"idempotency_key": self.key}, IdempotencyRow))
        extra: list[Read] = [
            (read.statement, dict(read.params), _returns(read.statement)) for read in self.extra
        ]
        return [*found, *extra]

    def state(self, plans: PlanExecutor, found: Sequence[Any]) -> TaskState:
        """The state the reads found, the operation's own reads in the fields they name."""
        chain = chain_of(self.task_id)
        next_seq = int(found[0]) if self.creating else None
        own = found[1:] if self.creating else found
        plans.know_tip(chain, own[1])
        prior = own[2] if self.key is not None else None
        extra = own[len(own) - len(self.extra) :]
        return TaskState(
            task=own[0],
            tail=plans.tail(chain),
            prior=prior,
            next_seq=next_seq,
            **{read.into: value for read, value in zip(self.extra, extra, strict=True)},
        )


@functools.cache
def _returns(statement: str) -> type[Any] | None:
    """The record a named read declares (`-- returns:`); None: its first column's value."""
    declared = statements()[statement].returns
    return None if declared is None else READ_RECORDS[declared]


def _item_reads(row: TaskTransition, request: Any, generated: Mapping[str, Any]) -> _ItemReads:
    creating = "task_id" in generated
    return _ItemReads(
        generated["task_id"] if creating else request.task_id,
        request.idempotency_key if row.keyed else None,
        creating=creating,
        extra=row.reads(request),
    )


def _read_ahead(plans: PlanExecutor, items: Sequence[_ItemReads]) -> list[list[Any] | None]:
    """Every item's reads at once, where the engine gains by it and no two items share a task
    or a key; else None for each, read item by item."""
    by_item: list[list[Any] | None] = [None] * len(items)
    tasks = [item.task_id for item in items]
    keys = [item.key for item in items if item.key is not None]
    if len(set(tasks)) < len(tasks) or len(set(keys)) < len(keys):
        return by_item
    reads = [item.reads() for item in items]
    try:
        lists = plans.conn.fetch_ahead(
            [read for own in reads for read in own], appending=len(items)
        )
    except LedgerError:
        return by_item  # a parameter refused before anything was sent: the item's step says which
    if lists is None:
        return by_item
    found = [rows[0] if rows else None for rows in lists]
    for number, own in enumerate(reads):
        by_item[number] = found[: len(own)]
        found = found[len(own) :]
    return by_item


@functools.cache
def _result_contracts() -> Mapping[str, Mapping[str, object]]:
    return {name: result_contract(name) for name in RESULT_CONTRACTS.values()}
