"""`TaskLedger`: the task lifecycle over a ledger database (create, claim, heartbeat, release,
submit, verify, cancel, retry, expire) and its reads.

Every write is one `BEGIN IMMEDIATE` transaction: read the rows with named SQL (the task, any
first answer, the log's tail at the task's chain), let the core decide, apply the plan (one
guarded compare-and-swap, the idempotency row, one sealed event per task).
A refused call raises a `LedgerError` and leaves the database as it was.
"""

from __future__ import annotations

import contextlib
import functools
import os
import random
import secrets
from collections.abc import Callable, Collection, Generator, Iterable, Mapping, Sequence
from typing import Any, TypeVar

import attrs
from aios_ledger.core import (
    CancelAnswer,
    CancelRequest,
    ClaimAnswer,
    ClaimBatchRequest,
    ClaimRequest,
    CreateAnswer,
    EventRow,
    EventView,
    ExpireAnswer,
    ExpireRequest,
    ExpiryState,
    HeartbeatAnswer,
    HeartbeatRequest,
    HistoryEntry,
    IdempotencyRow,
    LedgerError,
    RetryAnswer,
    RetryRequest,
    SubmitAnswer,
    SubmitRequest,
    TaskCreateCommand,
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
    decide_cancel,
    decide_claim,
    decide_create,
    decide_expire,
    decide_heartbeat,
    decide_retry,
    decide_submit,
    decide_verify,
)
from aios_ledger.core.batches import each_item, structure_batch
from aios_ledger.core.jsonvalue import JsonValue, encode_checked
from aios_ledger.core.log.seals import ChainTip
from aios_ledger.core.tasks import (
    RESULT_CONTRACTS,
    RESULT_SUBMITTED,
    first_claimable,
    refuse_ungranted,
    task_history,
)
from aios_ledger.core.tasks.answers import ReleaseAnswer, event_view, task_view
from aios_ledger.core.tasks.decisions import decide_release
from aios_ledger.core.tasks.requests import ReleaseRequest
from aios_ledger.core.work import IdleReason, idle_reason
from aios_ledger.shell.clock import Clock, read_clock, system_clock
from aios_ledger.shell.contracts import result_contract
from aios_ledger.shell.db.apply import PlanExecutor
from aios_ledger.shell.db.connection import (
    Database,
    Row,
    fetch_all,
    fetch_record,
    fetch_value,
    stream_records,
)
from aios_ledger.shell.db.run import Connection, fetch_records_together
from aios_ledger.shell.git.proposals import proposal_row

# How many passed leases one claim takes over before it claims: a claim stays short, and the
# claims after it take over the rest.
TAKEOVER_BATCH = 32
TASK_ID_BYTES = 16
LEASE_TOKEN_BYTES = 32
# Distinct capability sets an idle worker's reason reads (a queue holds a few).
IDLE_GROUPS = 200


T = TypeVar("T")


def new_task_id() -> str:
    return "task-" + secrets.token_hex(TASK_ID_BYTES)


def new_lease_token() -> str:
    return secrets.token_urlsafe(LEASE_TOKEN_BYTES)


_CreateEntry = tuple[TaskCreateCommand, str]  # the command and the task id it creates


def _task(conn: Connection, task_id: str) -> TaskRow | None:
    return fetch_record(conn, "get_task", {"task_id": task_id}, TaskRow)


def _locked_task(conn: Connection, task_id: str) -> TaskRow | None:
    """The task a write decides on, under its row lock (every write here is row-locked: see
    `_write`): read before its chain's tip, which only the holder of the row extends."""
    return fetch_record(conn, "get_task_for_update", {"task_id": task_id}, TaskRow)


def _prior(conn: Connection, key: str | None) -> IdempotencyRow | None:
    if key is None:
        return None
    return fetch_record(conn, "task_idempotency_get", {"idempotency_key": key}, IdempotencyRow)


class TaskLedger:
    """Agents take tasks under leases and hand results back; nothing they do breaks the rules.

    `clock` returns an aware datetime (default: the system clock), read as a `Timestamp`;
    timestamps are stored with whole seconds. `synchronous` is the SQLite synchronous level of
    the connection, FULL (the default: a commit is on disk when the call returns) or NORMAL (in
    WAL mode, a power cut may lose the last commits, never corrupt the file). `vfs` names a
    registered apsw VFS to open the database through (the fault-injection tests use one; the
    default is SQLite's). `migrate`: as for `Database` (False leaves the schema to the DBA and
    refuses a database that is behind with `SCHEMA_TOO_OLD`). `jitter` draws the spread of a
    retry's backoff, a float in [0, 1) (default: `random.random`; tests pin it).

    `database=`: run over an open `Database` instead of opening `path` (the caller keeps it
    and closes it; `close()` leaves it open).

    Lease tokens: a claim answers with a `lease_token` that is shown once; the database keeps
    only its sha256. Without an idempotency key the ledger draws the token with `secrets`
    (unless the claimer passes `lease_token=`). An idempotent claim (`idempotency_key=`) must
    bring its own `lease_token` (16-256 characters of `[A-Za-z0-9._~+/=-]`, e.g.
    `secrets.token_urlsafe(32)`): the key is bound to the token's sha256, so a replay with the
    same key and token gives back the same claim (token included, from the caller), a replay
    with another token is `IDEMPOTENCY_CONFLICT`, and nothing usable is ever stored. A claim
    that finds nothing to take answers None and records nothing, so the key stays free.
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
        # Over a Database someone else opened (the API server shares one between its stores),
        # the ledger does not close it.
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

    def _write(self, work: Callable[[Connection], T]) -> T:
        """Every write of a task's lifecycle locks the rows it decides on (`_locked_task`, the
        claim's and the takeover's SKIP LOCKED batches) and appends only to those tasks'
        chains, so writers of different tasks run side by side on PostgreSQL."""
        return self._db.write(work, row_locked=True)

    # -- writes ---------------------------------------------------------------------------

    def create_task(self, mapping: Mapping[str, Any], *, idempotency_key: str) -> CreateAnswer:
        """Enqueue one task (`TASK_CREATED`); `task_id` is generated when absent."""
        command = TaskCreateCommand.from_mapping(
            {"task": mapping, "idempotency_key": idempotency_key}
        )
        entry = _with_task_id(command)
        now = self._now()
        return self._write(lambda conn: _create_step(PlanExecutor(conn), entry, now))

    def create_tasks(self, items: Iterable[tuple[Mapping[str, Any], str]]) -> list[CreateAnswer]:
        """Enqueue 1 to MAX_BATCH tasks, each with its own idempotency key, in one transaction:
        all of them are written (or replayed) or, when one is refused, none: the error is that
        item's, its detail starts with `item N:`."""
        commands = structure_batch(
            _listed(items), TaskCreateCommand.from_pair, shape="(task mapping, key) pairs"
        )
        prepared = [_with_task_id(command) for command in commands]
        now = self._now()

        def write(conn: Connection) -> list[CreateAnswer]:
            plans = PlanExecutor(conn)
            return each_item(prepared, lambda entry: _create_step(plans, entry, now))

        return self._write(write)

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
        """Take the next eligible task (or `task_id`) under a lease (`TASK_CLAIMED`); None when
        there is nothing this claimer may take. Order: larger priority, older, smaller id;
        eligible: QUEUED, every required capability offered, deadline not passed, `not_before`
        reached, attempts left. First, in the same transaction, the claim takes over leases
        that have passed, as `expire_leases` does (so a fleet needs no sweeper). The answer
        holds the task's fields, `lease_token`, `lease_expires_at`, `attempt`, `revision`, and
        `envelope` / `runtime_input` (the execution envelope and its runtime input when the
        task has one, else None). A named task that cannot be claimed is
        refused with the reason (`INVALID_TRANSITION`, `CAPABILITY_MISSING`, `DEADLINE_PASSED`,
        `ATTEMPTS_EXHAUSTED`, `TASK_NOT_DUE`, `TASK_NOT_FOUND`). `grant`: the capabilities this
        claimer may offer (the HTTP API passes its token's); an offer beyond it is refused
        `CAPABILITY_NOT_GRANTED`, whatever there is to claim. None: no ceiling."""
        request = ClaimRequest.from_mapping(
            {
                "agent_id": agent_id,
                "capabilities": _listed(capabilities),
                "lease_seconds": lease_seconds,
                "task_id": task_id,
                "idempotency_key": idempotency_key,
                "lease_token": lease_token,
            }
        )
        token = request.lease_token or new_lease_token()
        ceiling = _ceiling(grant)

        def write(conn: Connection) -> ClaimAnswer | None:
            refuse_ungranted(request.capabilities, ceiling)  # before any read or takeover
            now = self._now()
            prior = _prior(conn, request.idempotency_key)
            task = None
            plans = PlanExecutor(conn)
            if prior is None:
                _take_over_passed_leases(plans, now)
                task = self._claim_target(conn, request, now)
                # The claim's time is read once its task is locked. Beside other writers
                # (PostgreSQL) the task may have been released or taken over after `now` was
                # read, and its events' times must not go back along its chain; the core
                # checks the task again at that time.
                now = self._now()
                if task is not None and request.task_id is None:
                    task = next(iter(first_claimable([task], request.capabilities, now, 1)), None)
            state = TaskState(task=task, tail=plans.tail(*_chains(task)), prior=prior)
            decision = decide_claim(state, request, now=now, lease_token=token, grant=ceiling)
            return None if decision is None else plans.apply(decision)

        return self._write(write)

    def claim_many(
        self,
        *,
        agent_id: str,
        capabilities: Sequence[str],
        lease_seconds: int,
        limit: int,
        grant: Collection[str] | None = None,
    ) -> list[ClaimAnswer]:
        """Take up to `limit` (1 to MAX_CLAIM_BATCH) eligible tasks in one transaction, in claim
        order, each under its own lease with its own `TASK_CLAIMED` event: what `claim` would
        answer, `limit` times over, for a worker with that many free slots. An empty list when
        there is nothing to take. Each answer holds its own `lease_token`, drawn here. Like a
        `claim` without a key it is not idempotent: a call repeated after a lost answer takes
        other tasks, and the leases it cannot use lapse (`expire_leases` requeues them).
        `grant` bounds the offer as in `claim`."""
        batch = ClaimBatchRequest.from_mapping(
            {
                "agent_id": agent_id,
                "capabilities": _listed(capabilities),
                "lease_seconds": lease_seconds,
                "limit": limit,
            }
        )
        request = batch.claim()
        ceiling = _ceiling(grant)

        def write(conn: Connection) -> list[ClaimAnswer]:
            refuse_ungranted(request.capabilities, ceiling)  # before any read or takeover
            now = self._now()
            plans = PlanExecutor(conn)
            _take_over_passed_leases(plans, now)
            locked = _claimable(conn, request, now, batch.limit)
            now = self._now()  # once the tasks are locked, as in `claim`
            answers = []
            for task in first_claimable(locked, request.capabilities, now, batch.limit):
                state = TaskState(task=task, tail=plans.tail(chain_of(task.task_id)))
                decision = decide_claim(
                    state, request, now=now, lease_token=new_lease_token(), grant=ceiling
                )
                assert decision is not None  # a task was given
                answers.append(plans.apply(decision))
            return answers

        return self._write(write)

    @staticmethod
    def _claim_target(conn: Connection, request: ClaimRequest, now: Timestamp) -> TaskRow | None:
        if request.task_id is not None:
            return _locked_task(conn, request.task_id)
        chosen = _claimable(conn, request, now, 1)
        return chosen[0] if chosen else None

    def heartbeat(self, task_id: str, *, lease_token: str, lease_seconds: int) -> HeartbeatAnswer:
        """Extend the lease (`TASK_HEARTBEAT`): `lease_expires_at` becomes now + lease_seconds."""
        request = HeartbeatRequest.from_mapping(
            {"task_id": task_id, "lease_token": lease_token, "lease_seconds": lease_seconds}
        )

        def write(conn: Connection) -> HeartbeatAnswer:
            plans = PlanExecutor(conn)
            task = _locked_task(conn, request.task_id)
            state = TaskState(task=task, tail=plans.tail(chain_of(request.task_id)))
            return plans.apply(decide_heartbeat(state, request, now=self._now()))

        return self._write(write)

    def release(self, task_id: str, *, lease_token: str, reason: str) -> ReleaseAnswer:
        """Give the lease back before it ends (`TASK_RELEASED`, with the reason and the
        attempt): the task is QUEUED again at once, or FAILED when that was its last attempt,
        since the released attempt stays counted. A stale holder is fenced as for heartbeat."""
        request = ReleaseRequest.from_mapping(
            {"task_id": task_id, "lease_token": lease_token, "reason": reason}
        )

        def write(conn: Connection) -> ReleaseAnswer:
            plans = PlanExecutor(conn)
            task = _locked_task(conn, request.task_id)
            state = TaskState(task=task, tail=plans.tail(chain_of(request.task_id)))
            return plans.apply(decide_release(state, request, now=self._now()))

        return self._write(write)

    def submit_result(
        self, task_id: str, *, lease_token: str, result: Any, idempotency_key: str
    ) -> SubmitAnswer:
        """Hand the result back (`RESULT_SUBMITTED`): status SUBMITTED, lease released."""
        request = SubmitRequest.from_mapping(
            {
                "task_id": task_id,
                "lease_token": lease_token,
                "result": result,
                "idempotency_key": idempotency_key,
            }
        )
        return self._write(lambda conn: self._submit_step(PlanExecutor(conn), request))

    def submit_results(self, items: Iterable[Mapping[str, Any]]) -> list[SubmitAnswer]:
        """Many `submit_result` calls in one transaction, in order; each item is
        {task_id, lease_token, result, idempotency_key}. All are written (or replayed) or, when
        one is refused, none: the error is that item's, its detail starts with `item N:`."""
        requests = structure_batch(_listed(items), SubmitRequest.from_mapping)

        def write(conn: Connection) -> list[SubmitAnswer]:
            plans = PlanExecutor(conn)
            return each_item(requests, lambda request: self._submit_step(plans, request))

        return self._write(write)

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
        """Judge a SUBMITTED result (`TASK_VERIFIED`): SUCCEEDED, NEEDS_REWORK (back to QUEUED,
        or FAILED when attempts are used up) or FAILED. `reviewer`: who judges (the HTTP API
        passes its token's name); the agent that submitted the result may not (`SELF_REVIEW`).
        None: a caller that names nobody (the local command line)."""
        request = VerifyRequest.from_mapping(
            {
                "task_id": task_id,
                "decision": decision,
                "reason": reason,
                "idempotency_key": idempotency_key,
                "expected_result_digest": expected_result_digest,
            }
        )
        return self._write(
            lambda conn: self._verify_step(PlanExecutor(conn), request, _named(reviewer))
        )

    def verify_results(
        self, items: Iterable[Mapping[str, Any]], *, reviewer: str | None = None
    ) -> list[VerifyAnswer]:
        """Many `verify` calls in one transaction, in order; each item is {task_id, decision,
        reason, idempotency_key, expected_result_digest?}. All or none, as `submit_results`;
        `reviewer` as in `verify`, for every item."""
        requests = structure_batch(_listed(items), VerifyRequest.from_mapping)
        judge = _named(reviewer)

        def write(conn: Connection) -> list[VerifyAnswer]:
            plans = PlanExecutor(conn)
            return each_item(requests, lambda request: self._verify_step(plans, request, judge))

        return self._write(write)

    def cancel(self, task_id: str, *, reason: str, idempotency_key: str) -> CancelAnswer:
        """Cancel a task in any non-terminal state (`TASK_CANCELLED`); its lease is released."""
        request = CancelRequest.from_mapping(
            {"task_id": task_id, "reason": reason, "idempotency_key": idempotency_key}
        )

        def write(conn: Connection) -> CancelAnswer:
            plans = PlanExecutor(conn)
            state = _keyed_state(plans, request.task_id, request.idempotency_key)
            return plans.apply(decide_cancel(state, request, now=self._now()))

        return self._write(write)

    def retry(
        self, task_id: str, *, reason: str, idempotency_key: str, extra_attempts: int = 1
    ) -> RetryAnswer:
        """Send a FAILED or CANCELLED task back to QUEUED (`TASK_REQUEUED`, with the reason), its
        `max_attempts` raised by `extra_attempts` (1 to 100); another status is
        `INVALID_TRANSITION`."""
        request = RetryRequest.from_mapping(
            {
                "task_id": task_id,
                "reason": reason,
                "idempotency_key": idempotency_key,
                "extra_attempts": extra_attempts,
            }
        )

        def write(conn: Connection) -> RetryAnswer:
            plans = PlanExecutor(conn)
            state = _keyed_state(plans, request.task_id, request.idempotency_key)
            return plans.apply(decide_retry(state, request, now=self._now()))

        return self._write(write)

    def _submit_step(self, plans: PlanExecutor, request: SubmitRequest) -> SubmitAnswer:
        state = _keyed_state(plans, request.task_id, request.idempotency_key)
        task = state.task
        decision = decide_submit(
            state,
            request,
            now=self._now(),  # read once the task is locked: see `claim`
            contracts=_result_contracts(),
            jitter=self._jitter(),
            # What the attempt proposed to a governed repository (issue 19), if it did.
            proposal=None if task is None else proposal_row(plans.conn, task.task_id, task.attempt),
        )
        return plans.apply(decision)

    def _verify_step(
        self, plans: PlanExecutor, request: VerifyRequest, reviewer: str | None
    ) -> VerifyAnswer:
        state = _keyed_state(plans, request.task_id, request.idempotency_key)
        if reviewer is not None:
            author = fetch_value(
                plans.conn,
                "task_result_author",
                {"task_id": request.task_id, "event_type": RESULT_SUBMITTED},
            )
            state = attrs.evolve(state, result_author=author)
        decision = decide_verify(
            state, request, now=self._now(), jitter=self._jitter(), reviewer=reviewer
        )
        return plans.apply(decision)

    def expire_leases(self) -> ExpireAnswer:
        """Every CLAIMED task whose lease passed goes back to QUEUED, or FAILED when its
        attempts are used up (`TASK_LEASE_EXPIRED` each); in batches, one transaction each."""
        request = ExpireRequest()
        expired: list[TaskSummary] = []
        while True:

            def write(conn: Connection) -> list[TaskSummary]:
                return _expire_step(PlanExecutor(conn), request, self._now())

            batch = self._write(write)
            expired.extend(batch)
            if len(batch) < request.limit:
                return {"expired": expired, "count": len(expired)}

    # -- reads ----------------------------------------------------------------------------

    def idle_reason(
        self, capabilities: Sequence[str], *, grant: Collection[str] | None = None
    ) -> IdleReason:
        """Why a claimer offering `capabilities` finds nothing to claim now (see the core's
        `idle_reason`); `grant` as in `claim` (the HTTP API passes its token's): the tasks that
        need a capability beyond it are told apart from those the claimer could take by
        offering more."""
        params = {"now": self._now().text, "limit": IDLE_GROUPS}
        groups = self._db.read(lambda conn: fetch_all(conn, "idle_queue_groups", params))
        return idle_reason(groups, capabilities, _ceiling(grant))

    def get(self, task_id: str) -> TaskView:
        """One task with its JSON columns parsed; `TASK_NOT_FOUND` when there is none."""
        request = TaskReadRequest.from_mapping({"task_id": task_id})
        task = self._db.read(lambda conn: _task(conn, request.task_id))
        if task is None:
            raise LedgerError("TASK_NOT_FOUND", f"no task {request.task_id!r}")
        return task_view(task)

    def events(self, task_id: str) -> list[EventView]:
        """A task's events in order, payloads parsed; `TASK_NOT_FOUND` when there is no such
        task (an empty list would read as a task without history)."""
        request = TaskReadRequest.from_mapping({"task_id": task_id})
        params = {"task_id": request.task_id}

        def read(conn: Connection) -> list[Row] | None:
            rows = fetch_all(conn, "events_for_task", params)
            if not rows and _task(conn, request.task_id) is None:
                return None
            return rows

        rows = self._db.read(read)
        if rows is None:
            raise LedgerError("TASK_NOT_FOUND", f"no task {request.task_id!r}")
        return [event_view(EventRow.from_row(row)) for row in rows]

    def history(self, task_id: str) -> list[HistoryEntry]:
        """A task's timeline from its sealed events: time, event, agent, attempt, decision,
        reason and the state it led to; `TASK_NOT_FOUND` when there is no such task."""
        return task_history(self.events(task_id))

    def list_tasks(self, status: str | None = None, *, limit: int = 100) -> list[TaskView]:
        """Tasks of one status in claim order, or all tasks oldest first; at most `limit`
        (1 to MAX_LIST: a limit out of range is refused, not clamped)."""
        request = TaskListRequest.from_mapping({"status": status, "limit": limit})
        if request.status is None:
            params: dict[str, object] = {"limit": request.limit}
            statement = "tasks_list_all"
        else:
            params = {"status": request.status, "limit": request.limit}
            statement = "tasks_list_by_status"
        rows = self._db.read(lambda conn: fetch_all(conn, statement, params))
        return [task_view(TaskRow.from_row(row)) for row in rows]


def _named(reviewer: object) -> str | None:
    """A reviewer's name as the core compares it with a result's author."""
    if reviewer is not None and not isinstance(reviewer, str):
        raise LedgerError("FIELDS_INVALID", "reviewer: must be a name")
    return reviewer


def _ceiling(grant: Collection[str] | None) -> frozenset[str] | None:
    """A caller's grant as the core holds claims to it (None: no ceiling)."""
    if grant is None:
        return None
    names = _listed(grant)
    if not isinstance(names, list) or not all(isinstance(name, str) for name in names):
        raise LedgerError("FIELDS_INVALID", "grant: must be a list of capability names")
    return frozenset(names)


def _claimable(
    conn: Connection, request: ClaimRequest, now: Timestamp, count: int
) -> list[TaskRow]:
    """Up to `count` tasks this claimer may take now, in claim order, as the core chooses them
    from the candidates; the usual single claim reads one row, and every cursor is closed
    before anything is written. The engine says how many candidates a page holds
    (`Connection.claim_page_size`): PostgreSQL's are filtered by capability too and locked
    (SKIP LOCKED) as they are read, so it reads as many as it takes, where a larger page would
    lock tasks other claimers could take meanwhile."""
    page = conn.claim_page_size(count)
    names: list[JsonValue] = [str(name) for name in sorted(request.capabilities)]
    offered = encode_checked(names)
    pages = _candidates(conn, now, page, offered)
    with contextlib.closing(pages):
        return first_claimable(pages, request.capabilities, now, count)


def _candidates(
    conn: Connection, now: Timestamp, page: int, offered_json: str
) -> Generator[TaskRow, None, None]:
    """QUEUED tasks in claim order, read a page at a time while the reader asks for more."""
    offset = 0
    while True:
        seen = 0
        rows = stream_records(
            conn,
            conn.claim_statement,
            {"now": now.text, "limit": page, "offset": offset, "offered_json": offered_json},
            TaskRow,
        )
        with contextlib.closing(rows):
            for row in rows:
                seen += 1
                yield row
        if seen < page:
            return
        offset += page


def _chains(task: TaskRow | None) -> tuple[str, ...]:
    return () if task is None else (chain_of(task.task_id),)


def _with_task_id(command: TaskCreateCommand) -> _CreateEntry:
    return command, command.task.task_id or new_task_id()


def _create_step(plans: PlanExecutor, entry: _CreateEntry, now: Timestamp) -> CreateAnswer:
    command, task_id = entry
    next_seq = int(fetch_value(plans.conn, "tasks_next_seq"))
    state = _keyed_state(plans, task_id, command.idempotency_key, next_seq=next_seq)
    return plans.apply(decide_create(state, command, now=now, task_id=task_id))


def _expire_step(plans: PlanExecutor, request: ExpireRequest, now: Timestamp) -> list[TaskSummary]:
    """Requeue (or fail) up to `request.limit` CLAIMED tasks whose leases have passed."""
    params = {"now": now.text, "limit": request.limit}
    rows = tuple(stream_records(plans.conn, "tasks_expired_leases", params, TaskRow))
    if not rows:
        return []
    tail = plans.tail(*(chain_of(task.task_id) for task in rows))
    decision = decide_expire(ExpiryState(tasks=rows, tail=tail), request, now=now)
    return [] if decision is None else plans.apply(decision)["expired"]


def _take_over_passed_leases(plans: PlanExecutor, now: Timestamp) -> None:
    _expire_step(plans, ExpireRequest(limit=TAKEOVER_BATCH), now)


def _keyed_state(
    plans: PlanExecutor, task_id: str, key: str, *, next_seq: int | None = None
) -> TaskState:
    """The task (locked first), the log's tail at its chain, and the first answer for `key`:
    read together, one round trip on PostgreSQL."""
    chain = chain_of(task_id)
    task, tip, prior = fetch_records_together(
        plans.conn,
        [
            ("get_task_for_update", {"task_id": task_id}, TaskRow),
            ("chain_tip", {"chain": chain}, ChainTip),
            ("task_idempotency_get", {"idempotency_key": key}, IdempotencyRow),
        ],
    )
    plans.know_tip(chain, tip)
    return TaskState(task=task, tail=plans.tail(chain), prior=prior, next_seq=next_seq)


@functools.cache
def _result_contracts() -> Mapping[str, Mapping[str, object]]:
    return {name: result_contract(name) for name in RESULT_CONTRACTS.values()}


def _listed(value: object) -> object:
    """A Python sequence or iterator (a tuple, a generator) as the JSON array the core's strict
    checks read; text and mappings stay as they are, for the core to refuse."""
    if isinstance(value, list | str | bytes | Mapping):
        return value
    try:
        return list(value)  # type: ignore[call-overload]
    except TypeError:
        return value
