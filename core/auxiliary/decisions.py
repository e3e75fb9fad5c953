"""The pure decisions an auxiliary run service applies: spawn, each transition, recovery.

Every decision reads an `AuxiliaryRunRow` and the log's tail at the ledger chain (what the shell
read inside `BEGIN IMMEDIATE`) and returns a `WritePlan` whose UPDATE is guarded on the row's
revision, with its sealed event, or a `Replay` (spawning an identical spec again), or raises an
`AuxiliaryRunError`.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import UTC, datetime

import attrs
from aios_ledger.core.auxiliary.records import (
    AUXILIARY_SNAPSHOT_SCHEMA_V1,
    AuxiliaryRunOutput,
    AuxiliaryRunRow,
    AuxiliaryRunSnapshot,
    CheckedSpawn,
)
from aios_ledger.core.auxiliary.states import (
    AUXILIARY_RUN_SPAWNED,
    INITIAL_STATE,
    AuxiliaryRunError,
    AuxiliaryRunState,
    transition_event,
)
from aios_ledger.core.digests import canonical_json
from aios_ledger.core.jsonvalue import JsonObject, JsonValue
from aios_ledger.core.log.tail import EventAppend, LogTail
from aios_ledger.core.plan import Replay, WritePlan, sealed_plan
from aios_ledger.core.statements import SqlWrite, Statement
from aios_ledger.core.timestamps import format_timestamp


def timestamp_of_ms(milliseconds: int) -> str:
    return format_timestamp(datetime.fromtimestamp(milliseconds / 1000, UTC))


def decide_spawn(
    existing: AuxiliaryRunRow | None,
    checked: CheckedSpawn,
    *,
    owner: str,
    now_ms: int,
    tail: LogTail,
) -> Replay | WritePlan:
    """Store a new run PENDING, or replay an identical spec; another spec is SPEC_CONFLICT.
    `checked` is what `check_spawn` answered for the spec and its evidence."""
    if not isinstance(checked, CheckedSpawn):
        raise AuxiliaryRunError.invalid_field("spawn", "must be what check_spawn answered")
    spec, spec_digest = checked.spec, checked.spec_digest
    if existing is not None:
        if existing.spec_digest != spec_digest:
            raise AuxiliaryRunError(
                "SPEC_CONFLICT", f"auxiliary run {spec.id!r} exists with another spec"
            )
        return Replay(
            {
                "id": existing.aux_id,
                "state": existing.state,
                "spec_digest": spec_digest,
                "idempotent": True,
            }
        )
    snapshot = AuxiliaryRunSnapshot(
        schema=AUXILIARY_SNAPSHOT_SCHEMA_V1,
        id=spec.id,
        parent=spec.frame,
        mode=spec.mode,
        state=INITIAL_STATE,
        spec_digest=spec_digest,
        created_at_ms=now_ms,
        updated_at_ms=now_ms,
    )
    snapshot.validate()
    target = spec.frame.target
    return sealed_plan(
        (
            SqlWrite(
                Statement.INSERT_AUXILIARY_RUN,
                {
                    "aux_id": spec.id,
                    "session_id": target.session_id,
                    "run_id": target.run_id,
                    "parent_json": checked.parent_text,
                    "kind": spec.kind,
                    "mode": str(spec.mode),
                    "state": str(INITIAL_STATE),
                    "spec_json": checked.spec_text,
                    "spec_digest": spec_digest,
                    "evidence_digest": spec.evidence_digest,
                    "owner": owner,
                    "created_at_ms": now_ms,
                },
            ),
        ),
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
                created_at=timestamp_of_ms(now_ms),
            ),
        ),
        {"id": spec.id, "state": str(INITIAL_STATE), "spec_digest": spec_digest},
        tail=tail,
    )


def decide_transition(
    row: AuxiliaryRunRow | None,
    target: AuxiliaryRunState,
    *,
    now_ms: int,
    tail: LogTail,
    output: AuxiliaryRunOutput | None = None,
    error: AuxiliaryRunError | None = None,
    aux_id: str = "",
) -> WritePlan:
    """Move a run along the table; the UPDATE is a CAS on its revision. The answer is the run's
    row as written (`AuxiliaryRunRow` fields)."""
    if row is None:
        raise AuxiliaryRunError("RUN_NOT_FOUND", f"no auxiliary run {aux_id!r}")
    write, event, after = _transition(row, target, now_ms=now_ms, output=output, error=error)
    return sealed_plan((write,), (event,), attrs.asdict(after), tail=tail)


def decide_stop(
    row: AuxiliaryRunRow | None,
    *,
    now_ms: int,
    error: AuxiliaryRunError,
    tail: LogTail,
    aux_id: str = "",
) -> WritePlan | None:
    """End an unfinished run CANCELLED with `error`; None for a run that has already ended,
    which stays as it ended."""
    if row is not None and row.run_state.is_terminal:
        return None
    return decide_transition(
        row, AuxiliaryRunState.CANCELLED, now_ms=now_ms, error=error, tail=tail, aux_id=aux_id
    )


def decide_recover_interrupted(
    rows: Iterable[AuxiliaryRunRow],
    *,
    dead_owners: frozenset[str],
    now_ms: int,
    tail: LogTail,
) -> WritePlan:
    """Fail, as INTERRUPTED, every unfinished run whose owning process is gone."""
    writes: list[SqlWrite] = []
    events: list[EventAppend] = []
    recovered: list[JsonValue] = []
    for row in rows:
        if row.run_state.is_terminal or row.owner not in dead_owners:
            continue
        error = AuxiliaryRunError(
            "INTERRUPTED", f"the process that ran it ({row.owner}) stopped while it was {row.state}"
        )
        write, event, _ = _transition(
            row, AuxiliaryRunState.FAILED, now_ms=now_ms, output=None, error=error
        )
        writes.append(write)
        events.append(event)
        recovered.append(row.aux_id)
    return sealed_plan(writes, events, {"recovered": recovered}, tail=tail)


def _transition(
    row: AuxiliaryRunRow,
    target: AuxiliaryRunState,
    *,
    now_ms: int,
    output: AuxiliaryRunOutput | None,
    error: AuxiliaryRunError | None,
) -> tuple[SqlWrite, EventAppend, AuxiliaryRunRow]:
    """The guarded write, the event and the row after, of one move along the table."""
    source = row.run_state
    event_type = transition_event(source, target)
    updated_at_ms = max(now_ms, row.updated_at_ms)
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
    write = SqlWrite(
        Statement.TRANSITION_AUXILIARY_RUN,
        {
            "aux_id": row.aux_id,
            "expected_revision": row.revision,
            "state": after.state,
            "updated_at_ms": after.updated_at_ms,
            "output_json": after.output_json,
            "output_digest": after.output_digest,
            "error_code": after.error_code,
            "error": after.error,
        },
    )
    event = EventAppend(
        task_id=None,
        agent_id=None,
        event_type=event_type,
        payload=payload,
        created_at=timestamp_of_ms(updated_at_ms),
    )
    return write, event, after
