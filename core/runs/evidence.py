"""Runs, their events, and the bounded evidence snapshot an auxiliary run reads, pinned by a digest
of only what it holds so that a reread reproduces it."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Annotated, Any, cast

import attrs
from aios_ledger.core.actors import VIA_CONSOLE, VIA_HTTP, VIA_MCP, Actor
from aios_ledger.core.digests import canonical_json, digest_bytes
from aios_ledger.core.errors import LedgerError
from aios_ledger.core.jsonvalue import JsonObject, check_json, encode_checked
from aios_ledger.core.kinds import Between, Identifier, RouteIdentifier, Text
from aios_ledger.core.log.plan import Decision, Replay, WritePlan, sealed_plan
from aios_ledger.core.log.tail import EventAppend, LogTail
from aios_ledger.core.runs.answers import RunAnswer, RunEventAnswer
from aios_ledger.core.runs.records import RunEventRow, RunRow
from aios_ledger.core.statements import SqlParam, SqlWrite, Statement
from aios_ledger.core.structuring import Structured, check_built, unstructure
from aios_ledger.core.tasks.attempts import (
    RunIdentity,
    evidence_prompt,
    evidence_run,
    evidence_session,
    evidence_task,
    is_reserved_run,
    is_reserved_session,
    refuse_reserved,
)
from aios_ledger.core.tasks.records import TaskRow, require_task
from aios_ledger.core.tasks.requests import LeaseToken, lease_token_sha256
from aios_ledger.core.tasks.transitions import TaskStatus
from aios_ledger.core.timestamps import Timestamp, require_timestamp

EVIDENCE_SNAPSHOT_SCHEMA_V1 = "aios.evidence.snapshot.v1"
EVIDENCE_DOMAIN = "evidence"
RUN_CREATED = "RUN_CREATED"
RUN_EVENT_APPENDED = "RUN_EVENT_APPENDED"
DEFAULT_MAX_EVENTS = 256
DEFAULT_MAX_BYTES = 256 * 1024
MAX_EVENTS_LIMIT = 10_000
MAX_BYTES_LIMIT = 4 * 1024 * 1024
MAX_PROMPT_CHARS = 64 * 1024
MAX_EVENT_PAYLOAD_BYTES = 1024 * 1024
MAX_EVENTS_PAGE = MAX_EVENTS_LIMIT + 1


@attrs.frozen
class ExecutionTarget(Structured):
    """Which run of which session an execution (and its evidence) is about."""

    WHAT = "target"

    session_id: Annotated[str, Identifier]
    run_id: Annotated[str, Identifier]


@attrs.frozen
class EvidenceReadRequest(Structured):
    """Read at most `max_events` and `max_bytes`, keeping a long run's last `tail_events`."""

    WHAT = "evidence request"

    target: ExecutionTarget
    max_events: Annotated[int, Between(1, MAX_EVENTS_LIMIT)] = DEFAULT_MAX_EVENTS
    max_bytes: Annotated[int, Between(1, MAX_BYTES_LIMIT)] = DEFAULT_MAX_BYTES
    tail_events: Annotated[int, Between(0, MAX_EVENTS_LIMIT)] = 0

    @property
    def tail_limit(self) -> int:
        return min(self.tail_events, self.max_events)

    def validate(self) -> None:
        """For a request built directly: its fields as `from_mapping` would check them."""
        check_built(self, what="evidence request")


@attrs.frozen
class EvidenceSnapshot:
    """A bounded slice of a run's evidence and the digest that pins it."""

    target: ExecutionTarget
    run: RunRow
    events: tuple[RunEventRow, ...]
    truncated: bool
    max_events: int
    max_bytes: int
    snapshot_digest: str
    schema: str = EVIDENCE_SNAPSHOT_SCHEMA_V1
    tail_events: int = 0

    def body(self) -> JsonObject:
        return {
            "schema": self.schema,
            "target": self.target.public(),
            "run": self.run.evidence_view(),
            "events": [event.public() for event in self.events],
            "truncated": self.truncated,
            "limits": self._limits(),
        }

    def _limits(self) -> JsonObject:
        limits: JsonObject = {"max_events": self.max_events, "max_bytes": self.max_bytes}
        if self.tail_events:  # absent when zero: every head-only snapshot keeps its digest
            limits["tail_events"] = self.tail_events
        return limits

    def computed_digest(self) -> str:
        return evidence_digest(self.body())

    def public(self) -> JsonObject:
        return {**self.body(), "snapshot_digest": self.snapshot_digest}


def evidence_digest(body: JsonObject) -> str:
    return digest_bytes(EVIDENCE_DOMAIN, canonical_json(body).encode("ascii"))


def build_evidence_snapshot(
    request: EvidenceReadRequest,
    run: RunRow | None,
    events: Sequence[RunEventRow],
    tail: Sequence[RunEventRow] = (),
) -> EvidenceSnapshot:
    """The snapshot of `run`; the shell reads one row more, so that a cut is marked."""
    request.validate()
    target = request.target
    if run is None or run.run_id != target.run_id:
        raise LedgerError("RUN_NOT_FOUND", f"no run {target.run_id!r}")
    if run.session_id != target.session_id:
        raise LedgerError(
            "TARGET_MISMATCH",
            f"run {target.run_id!r} does not belong to session {target.session_id!r}",
        )
    by_seq = {event.seq: event for event in (*events, *tail)}
    ordered = [by_seq[seq] for seq in sorted(by_seq)]
    kept, truncated = _first_that_fit(ordered, request.max_events, request.max_bytes)
    if truncated and request.tail_limit:
        kept = _head_and_tail(ordered, request)
    snapshot = EvidenceSnapshot(
        target=target,
        run=run,
        events=tuple(kept),
        truncated=truncated,
        max_events=request.max_events,
        max_bytes=request.max_bytes,
        snapshot_digest="",
        tail_events=request.tail_events,
    )
    return attrs.evolve(snapshot, snapshot_digest=snapshot.computed_digest())


def _size(event: RunEventRow) -> int:
    return len(canonical_json(event.public()).encode("ascii"))


def _first_that_fit(
    events: Sequence[RunEventRow], max_events: int, max_bytes: int
) -> tuple[list[RunEventRow], bool]:
    """The longest prefix of `events` within both limits, and whether anything was left out."""
    kept: list[RunEventRow] = []
    used = 0
    for event in events:
        size = _size(event)
        if len(kept) == max_events or used + size > max_bytes:
            return kept, True
        kept.append(event)
        used += size
    return kept, False


def _head_and_tail(
    events: Sequence[RunEventRow], request: EvidenceReadRequest
) -> list[RunEventRow]:
    # The newest events that fit the bytes, then the oldest that fit what they leave.
    newest_first = events[-request.tail_limit :][::-1]
    tail, _ = _first_that_fit(newest_first, request.tail_limit, request.max_bytes)
    tail.reverse()
    used = sum(_size(event) for event in tail)
    before = [event for event in events if not tail or event.seq < tail[0].seq]
    head, _ = _first_that_fit(before, request.max_events - len(tail), request.max_bytes - used)
    return [*head, *tail]


# --- decisions over runs -------------------------------------------------------------------


@attrs.frozen
class RunCreateRequest(Structured):
    WHAT = "run"

    session_id: Identifier
    prompt: Annotated[str, Text(max_length=MAX_PROMPT_CHARS)]
    run_id: RouteIdentifier


@attrs.frozen
class RunEventAppendRequest(Structured):
    """One event for a run; the payload is any JSON value, checked (with its own codes) when the
    event is decided. An attempt's evidence run takes events only under that attempt's lease:
    `lease_token` is the claim's."""

    WHAT = "run event"

    run_id: Identifier
    kind: Identifier
    payload: Any
    lease_token: LeaseToken | None = attrs.field(default=None, repr=False)


@attrs.frozen
class AttemptRunRequest(Structured):
    """Which attempt's evidence run: a task and an attempt number (from 1)."""

    task_id: Identifier
    attempt: Annotated[int, Between(1, 2**31 - 1)]


@attrs.frozen
class RunReadRequest(Structured):
    run_id: Identifier


@attrs.frozen
class RunEventsRequest(Structured):
    """A run's first `limit` events after `after`; a longer page is refused, never shortened."""

    run_id: Identifier
    limit: Annotated[int, Between(1, MAX_EVENTS_PAGE)] = MAX_EVENTS_PAGE
    after: Annotated[int, Between(0, 2**62)] = 0


@attrs.frozen
class RunCreateState:
    """What creating a run reads: the run of the requested id, if any, and the log's tail."""

    existing: RunRow | None
    tail: LogTail


@attrs.frozen
class RunState:
    """The run, an evidence run's task, and the log's tail."""

    run: RunRow | None
    task: TaskRow | None = None
    tail: LogTail = attrs.field(kw_only=True)


@attrs.frozen
class AttemptRunState:
    """The task, the attempt's run if any, and the log's tail."""

    task: TaskRow | None
    existing: RunRow | None
    tail: LogTail


def decide_create_run(
    state: RunCreateState, request: RunCreateRequest, *, now: Timestamp, actor: Actor
) -> Decision[RunAnswer]:
    """A new run, or the same again; an attempt's run is its claim's (RUN_ID_RESERVED)."""
    require_timestamp(now)
    refuse_reserved(request.session_id, request.run_id)
    return _create_run(state.existing, request, state.tail, now, actor)


def decide_create_attempt_run(
    state: AttemptRunState, request: AttemptRunRequest, *, now: Timestamp, actor: Actor
) -> Decision[RunAnswer]:
    """The evidence run of an attempt claimed before claims created runs."""
    require_timestamp(now)
    task_id, attempt = request.task_id, request.attempt
    task = require_task(task_id, state.task)
    if not 1 <= attempt <= task.attempt:
        raise LedgerError(
            "RUN_NOT_FOUND",
            f"task {task_id!r} has had {task.attempt} attempts: no run for attempt {attempt}",
        )
    run = RunCreateRequest.from_mapping(
        {
            "session_id": evidence_session(task_id),
            "prompt": evidence_prompt(attempt),
            "run_id": evidence_run(task_id, attempt),
        }
    )
    return _create_run(state.existing, run, state.tail, now, actor)


def _create_run(
    existing: RunRow | None, request: RunCreateRequest, tail: LogTail, now: Timestamp, actor: Actor
) -> Decision[RunAnswer]:
    if existing is not None:
        if existing.session_id != request.session_id or existing.prompt != request.prompt:
            raise LedgerError(
                "RUN_CONFLICT", f"run {existing.run_id!r} exists with another session or prompt"
            )
        return Replay(_run_answer(existing, idempotent=True))
    row = {**unstructure(request), "created_at": now.text}
    run = RunRow(
        run_id=request.run_id,
        session_id=request.session_id,
        prompt=request.prompt,
        event_count=0,
        created_at=now.text,
        updated_at=now.text,
    )
    created = EventAppend(
        task_id=None,
        agent_id=None,
        event_type=RUN_CREATED,
        payload={"run_id": request.run_id, "session_id": request.session_id},
        created_at=now.text,
        rows=(RunIdentity(run.run_id, run.session_id, run.prompt, run.created_at).image(),),
        actor=actor,
    )
    return sealed_plan(
        (SqlWrite(Statement.INSERT_RUN, row),),
        (created,),
        _run_answer(run, idempotent=False),
        tail=tail,
    )


def _run_answer(run: RunRow, *, idempotent: bool) -> RunAnswer:
    return cast(RunAnswer, {**attrs.asdict(run), "idempotent": idempotent})


def decide_append_run_event(
    state: RunState, request: RunEventAppendRequest, *, now: Timestamp, actor: Actor
) -> WritePlan[RunEventAnswer]:
    """A run's next event, owned as this transaction's rows say, so no claim moves meanwhile."""
    require_timestamp(now)
    run = state.run
    if run is None:
        raise LedgerError("RUN_NOT_FOUND", f"no run {request.run_id!r}")
    if actor.via in _TOKEN_VIAS and not _owns(run, state.task, actor.name):
        raise LedgerError("NOT_RUN_OWNER", f"run {run.run_id!r} is another agent's")
    holder = None
    if is_reserved_session(run.session_id) or is_reserved_run(run.run_id):
        holder = _require_attempt_holder(run, state.task, request.lease_token, now)
    payload_json = encode_checked(check_json(request.payload, what="payload"))
    if len(payload_json) > MAX_EVENT_PAYLOAD_BYTES:
        raise LedgerError("PAYLOAD_TOO_LARGE", f"payload is over {MAX_EVENT_PAYLOAD_BYTES} bytes")
    row = RunEventRow(
        run_id=run.run_id,
        seq=run.event_count + 1,
        kind=request.kind,
        payload_json=payload_json,
        created_at=now.text,
    )
    event = cast(RunEventAnswer, attrs.asdict(row))
    bump = SqlWrite(
        Statement.BUMP_RUN_EVENT_COUNT,
        {"run_id": run.run_id, "expected_revision": run.event_count, "updated_at": now.text},
    )
    appended = EventAppend(
        task_id=None,
        agent_id=holder,
        event_type=RUN_EVENT_APPENDED,
        payload={"run_id": row.run_id, "seq": row.seq, "kind": row.kind},
        created_at=now.text,
        rows=(row.image(),),
        actor=actor,
    )
    return sealed_plan(
        # The answer is the row: its values are the statement's parameters.
        (bump, SqlWrite(Statement.INSERT_RUN_EVENT, cast(Mapping[str, SqlParam], event))),
        (appended,),
        event,
        tail=state.tail,
    )


# Where a token names the caller, an agent appends only to runs it owns; elsewhere, to any run.
_TOKEN_VIAS = frozenset({VIA_HTTP, VIA_MCP, VIA_CONSOLE})


def _in_progress(run: RunRow, task: TaskRow | None) -> TaskRow | None:
    """`task`, when `run` is the evidence run of its attempt in progress."""
    current = (
        task is not None
        and evidence_task(run.session_id) == task.task_id
        and task.status == TaskStatus.CLAIMED
        and run.run_id == evidence_run(task.task_id, task.attempt)
    )
    return task if current else None


def _owns(run: RunRow, task: TaskRow | None, agent: str) -> bool:
    """Whether `agent` owns `run`: its session's, or the evidence run it holds now."""
    if not (is_reserved_session(run.session_id) or is_reserved_run(run.run_id)):
        return run.session_id == agent
    held = _in_progress(run, task)
    return held is not None and held.claimed_by == agent


def _require_attempt_holder(
    run: RunRow, task: TaskRow | None, lease_token: str | None, now: Timestamp
) -> str | None:
    """The holder of the attempt whose evidence run `run` is, under its live lease."""
    task = _in_progress(run, task)
    if task is None:
        raise LedgerError(
            "NOT_RUN_OWNER",
            f"run {run.run_id!r} is not the evidence run of an attempt in progress: only the "
            "holder of a task's current attempt appends to its run",
        )
    if lease_token is None or task.lease_token_hash != lease_token_sha256(lease_token):
        raise LedgerError(
            "LEASE_INVALID",
            f"appending to run {run.run_id!r} takes the lease_token of task "
            f"{task.task_id!r}'s current claim",
        )
    expires = task.lease_expires_at
    if (
        expires is None
        or Timestamp.parse(expires, field="lease_expires_at").epoch_ms <= now.epoch_ms
    ):
        raise LedgerError(
            "LEASE_EXPIRED", f"the lease of task {task.task_id!r} expired at {expires}"
        )
    return task.claimed_by
