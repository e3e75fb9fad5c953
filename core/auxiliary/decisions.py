"""The pure decisions of an auxiliary run service: spawn, each transition, recovery, each a
revision-guarded `WritePlan` or a `Replay`."""

from __future__ import annotations

import attrs
from aios_ledger.core.actors import Actor
from aios_ledger.core.auxiliary.answers import RecoveryAnswer, SpawnAnswer
from aios_ledger.core.auxiliary.records import AuxiliaryRunOutput, AuxiliaryRunRow, CheckedSpawn
from aios_ledger.core.auxiliary.states import (
    AUXILIARY_RUN_SPAWNED,
    INITIAL_STATE,
    AuxiliaryRunState,
    transition_event,
)
from aios_ledger.core.digests import canonical_json
from aios_ledger.core.errors import AuxiliaryRunError
from aios_ledger.core.jsonvalue import JsonObject
from aios_ledger.core.log.plan import Decision, Replay, WritePlan, sealed_plan
from aios_ledger.core.log.tail import EventAppend, LogTail
from aios_ledger.core.statements import SqlWrite, Statement
from aios_ledger.core.timestamps import Timestamp, require_timestamp


@attrs.frozen
class AuxiliaryRowState:
    """What a decision on one auxiliary run reads: its row (None: none) and the log's tail."""

    row: AuxiliaryRunRow | None
    tail: LogTail


@attrs.frozen
class UnfinishedRunsState:
    """What recovery reads: the unfinished runs, and the log's tail at the ledger chain."""

    rows: tuple[AuxiliaryRunRow, ...]
    tail: LogTail


@attrs.frozen
class AuxiliaryTransitionRequest:
    """Move run `aux_id` to `target`, with its output or its error."""

    aux_id: str
    target: AuxiliaryRunState
    output: AuxiliaryRunOutput | None = None
    error: AuxiliaryRunError | None = None


@attrs.frozen
class AuxiliaryStopRequest:
    """End run `aux_id` CANCELLED with `error`, unless it has ended already."""

    aux_id: str
    error: AuxiliaryRunError


@attrs.frozen
class RecoverInterruptedRequest:
    """Fail every unfinished run owned by one of `dead_owners` (processes known to be gone)."""

    dead_owners: frozenset[str]


def decide_spawn(
    state: AuxiliaryRowState, request: CheckedSpawn, *, now: Timestamp, actor: Actor, owner: str
) -> Decision[SpawnAnswer]:
    """Store a new run PENDING, or replay an identical spec; another spec is SPEC_CONFLICT."""
    require_timestamp(now)
    if not isinstance(request, CheckedSpawn):
        raise AuxiliaryRunError.invalid_field("spawn", "must be what check_spawn answered")
    spec, spec_digest = request.spec, request.spec_digest
    existing = state.row
    if existing is not None:
        if existing.spec_digest != spec_digest:
            raise AuxiliaryRunError(
                "SPEC_CONFLICT", f"auxiliary run {spec.id!r} exists with another spec"
            )
        replayed = SpawnAnswer(id=existing.aux_id, state=existing.state, spec_digest=spec_digest)
        replayed["idempotent"] = True
        return Replay(replayed)
    answer: SpawnAnswer = {"id": spec.id, "state": str(INITIAL_STATE), "spec_digest": spec_digest}
    target = spec.frame.target
    # The row as the insert writes it (revision 1, updated when created, no outcome yet).
    row = AuxiliaryRunRow(
        aux_id=spec.id,
        session_id=target.session_id,
        run_id=target.run_id,
        parent_json=request.parent_text,
        kind=spec.kind,
        mode=str(spec.mode),
        state=str(INITIAL_STATE),
        spec_json=request.spec_text,
        spec_digest=spec_digest,
        evidence_digest=spec.evidence_digest,
        owner=owner,
        revision=1,
        created_at_ms=now.epoch_ms,
        updated_at_ms=now.epoch_ms,
        output_json=None,
        output_digest=None,
        error_code=None,
        error=None,
    )
    row.snapshot().validate()
    return sealed_plan(
        (_row_write(Statement.INSERT_AUXILIARY_RUN, row),),
        (
            EventAppend(
                task_id=None,
                agent_id=None,
                event_type=AUXILIARY_RUN_SPAWNED,
                payload={
                    "aux_id": spec.id,
                    "kind": spec.kind,
                    "target": target.public(),
                    "spec_digest": spec_digest,
                    "evidence_digest": spec.evidence_digest,
                    "state": str(INITIAL_STATE),
                },
                created_at=now.text,
                rows=(row.image(),),
                actor=actor,
            ),
        ),
        answer,
        tail=state.tail,
    )


def decide_transition(
    state: AuxiliaryRowState, request: AuxiliaryTransitionRequest, *, now: Timestamp, actor: Actor
) -> WritePlan[AuxiliaryRunRow]:
    """Move a run along the table, a CAS on its revision; answers the row as written."""
    require_timestamp(now)
    row = state.row
    if row is None:
        raise AuxiliaryRunError("RUN_NOT_FOUND", f"no auxiliary run {request.aux_id!r}")
    write, event, after = _transition(
        row, request.target, now=now, output=request.output, error=request.error, actor=actor
    )
    return sealed_plan((write,), (event,), after, tail=state.tail)


def decide_stop(
    state: AuxiliaryRowState, request: AuxiliaryStopRequest, *, now: Timestamp, actor: Actor
) -> WritePlan[AuxiliaryRunRow] | None:
    """End an unfinished run CANCELLED; None for a run that has ended, which stays as it ended."""
    require_timestamp(now)
    row = state.row
    if row is not None and row.run_state.is_terminal:
        return None
    cancel = AuxiliaryTransitionRequest(
        aux_id=request.aux_id, target=AuxiliaryRunState.CANCELLED, error=request.error
    )
    return decide_transition(state, cancel, now=now, actor=actor)


def decide_recover_interrupted(
    state: UnfinishedRunsState, request: RecoverInterruptedRequest, *, now: Timestamp, actor: Actor
) -> WritePlan[RecoveryAnswer]:
    """Fail, as INTERRUPTED, every unfinished run whose owning process is gone."""
    require_timestamp(now)
    writes: list[SqlWrite] = []
    events: list[EventAppend] = []
    recovered: list[str] = []
    for row in state.rows:
        if row.run_state.is_terminal or row.owner not in request.dead_owners:
            continue
        error = AuxiliaryRunError(
            "INTERRUPTED", f"the process that ran it ({row.owner}) stopped while it was {row.state}"
        )
        write, event, _ = _transition(
            row, AuxiliaryRunState.FAILED, now=now, output=None, error=error, actor=actor
        )
        writes.append(write)
        events.append(event)
        recovered.append(row.aux_id)
    answer: RecoveryAnswer = {"recovered": recovered}
    return sealed_plan(writes, events, answer, tail=state.tail)


def _transition(
    row: AuxiliaryRunRow,
    target: AuxiliaryRunState,
    *,
    now: Timestamp,
    actor: Actor,
    output: AuxiliaryRunOutput | None,
    error: AuxiliaryRunError | None,
) -> tuple[SqlWrite, EventAppend, AuxiliaryRunRow]:
    source = row.run_state
    event_type = transition_event(source, target)
    # A run never moves back in time, even when the clock does.
    updated = now if now.epoch_ms >= row.updated_at_ms else Timestamp(row.updated_at_ms)
    updated_at_ms = updated.epoch_ms
    after = attrs.evolve(
        row,
        state=str(target),
        revision=row.revision + 1,
        updated_at_ms=updated_at_ms,
        output_json=None if output is None else canonical_json(output.value),
        output_digest=None if output is None else output.digest,
        error_code=None if error is None else error.code,
        error=None if error is None else str(error),
    )
    after.snapshot().validate()
    payload: JsonObject = {"aux_id": row.aux_id, "from": str(source), "to": str(target)}
    if output is not None:
        payload["output_digest"] = output.digest
    if error is not None:
        payload["error_code"] = error.code
    write = _row_write(Statement.TRANSITION_AUXILIARY_RUN, after, expected_revision=row.revision)
    event = EventAppend(
        task_id=None,
        agent_id=None,
        event_type=event_type,
        payload=payload,
        created_at=updated.text,
        rows=(after.image(),),
        actor=actor,
    )
    return write, event, after


def _row_write(statement: Statement, row: AuxiliaryRunRow, **more: object) -> SqlWrite:
    """`statement` with the row's columns it names (and `more`, its guard)."""
    columns = {**attrs.asdict(row), **more}
    return SqlWrite(statement, {name: columns[name] for name in statement.parameters})
