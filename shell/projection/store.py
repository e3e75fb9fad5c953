"""`InitialExecutionProjectionStore`: the projection and its recovery over a ledger database."""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any, cast

from aios_ledger.core import (
    Decision,
    EventRow,
    IdempotencyRow,
    InitialExecutionProjectionError,
    LedgerError,
    LogTail,
    Replay,
    TaskRow,
    chain_of,
)
from aios_ledger.core.projection import (
    InitialExecutionProjectionRequest,
    ProjectionAnswer,
    ProjectionCommand,
    ProjectionState,
    SourceCaptureProjectionRecoveryRequest,
    decide_projection,
    prepare_projection,
)
from aios_ledger.core.projection.decisions import (
    as_projection_error,
    decide_projection_refusal,
    projection_expectations,
    projection_operation,
)
from aios_ledger.core.projection.pin import (
    PinCommand,
    PinnedProjection,
    PinRead,
    pin_projection,
    prepare_pin,
)
from aios_ledger.core.projection.records import BindingRow
from aios_ledger.core.tasks.refusals import refusal_key
from aios_ledger.shell.actors import current_actor
from aios_ledger.shell.clock import Clock, configured_authorization, read_clock, system_clock
from aios_ledger.shell.contracts import SOURCE_CAPTURE_RESULT, result_contract
from aios_ledger.shell.db.apply import PlanExecutor
from aios_ledger.shell.db.connection import (
    Database,
    fetch_all,
    fetch_record,
    stream_records,
)
from aios_ledger.shell.db.run import Connection
from aios_ledger.shell.db.tail import read_log_tail

Resolver = Callable[[str, str, str, str, Any], Any]
ProjectionRequest = InitialExecutionProjectionRequest | SourceCaptureProjectionRecoveryRequest

_LEDGER_LOOKUP = {
    InitialExecutionProjectionRequest: "get_initial_projection",
    SourceCaptureProjectionRecoveryRequest: "get_source_capture_recovery",
}


class InitialExecutionProjectionStore:
    """Projects the first runtime envelope onto a task, once, under the owner's authorization.

    `resolver(task_id, job_id, capability, adapter, runtime_input)` returns the envelope outside
    the write lock, so the decision re-checks everything under it. Without `authorization_id`,
    the environment's is read at each call.
    """

    def __init__(
        self,
        path: str | os.PathLike[str] | None,
        resolver: Resolver,
        *,
        database: Database | None = None,
        clock: Clock | None = None,
        vfs: str | None = None,
        migrate: bool = True,
        authorization_id: str | None = None,
    ) -> None:
        # Over a `database` the caller keeps and closes, `path` is unused.
        self._owns_db = database is None
        if database is None:
            database = as_projection_error(lambda: Database(path, vfs=vfs, migrate=migrate))
        self._db = database
        self._resolver = resolver
        self._clock = clock or system_clock
        self._authorization_id = authorization_id

    def close(self) -> None:
        if self._owns_db:
            self._db.close()

    def project(self, task_id: str, request: InitialExecutionProjectionRequest) -> ProjectionAnswer:
        return cast(
            ProjectionAnswer, self._run(task_id, request, InitialExecutionProjectionRequest)
        )

    def project_from_source_capture(
        self, task_id: str, request: SourceCaptureProjectionRecoveryRequest
    ) -> ProjectionAnswer:
        kind = SourceCaptureProjectionRecoveryRequest
        return cast(ProjectionAnswer, self._run(task_id, request, kind))

    def preview(self, task_id: str, request: ProjectionRequest) -> dict[str, Any]:
        """What `project` or `project_from_source_capture` would write, writing nothing: the
        envelope, its digest, and the refusal the decision would make."""
        if not isinstance(request, tuple(_LEDGER_LOOKUP)):
            raise InitialExecutionProjectionError("FIELDS_INVALID", "request must be a projection")
        return cast(dict[str, Any], self._run(task_id, request, type(request), preview=True))

    def pin(
        self,
        task_id: str,
        *,
        adapter: str,
        job_id: str | None = None,
        reason: str | None = None,
        idempotency_key: str | None = None,
    ) -> PinnedProjection:
        """The initial projection request pinned to the task and its binding as they stand now,
        and what it authorizes; `project` refuses it if either changed in between."""
        if not isinstance(task_id, str) or not task_id:
            raise InitialExecutionProjectionError("FIELDS_INVALID", "task_id must be a string")
        command = PinCommand(
            adapter=adapter,
            authorization_id=self._authorization(),
            job_id=job_id,
            reason=reason,
            idempotency_key=idempotency_key,
        )

        def read(conn: Connection) -> PinRead:
            task = fetch_record(conn, "get_task", {"task_id": task_id}, TaskRow)
            bindings = stream_records(conn, "bindings_of_task", {"task_id": task_id}, BindingRow)
            return PinRead(task_id=task_id, task=task, bindings=tuple(bindings))

        seen: PinRead = as_projection_error(lambda: self._db.read(read))
        call = prepare_pin(seen, command)
        envelope = self._resolver(
            call.task_id, call.job_id, call.capability, call.adapter, call.runtime_input
        )
        return pin_projection(seen, command, call, envelope)

    def _authorization(self) -> str | None:
        chosen = self._authorization_id
        return chosen if chosen is not None else configured_authorization()

    def _run(
        self,
        task_id: object,
        request: object,
        kind: type[ProjectionRequest],
        *,
        preview: bool = False,
    ) -> Any:
        if not isinstance(task_id, str) or not task_id:
            raise InitialExecutionProjectionError("FIELDS_INVALID", "task_id must be a string")
        if not isinstance(request, kind):
            raise InitialExecutionProjectionError(
                "FIELDS_INVALID", f"request must be a {kind.__name__}"
            )
        authorization = self._authorization()
        lookup = _LEDGER_LOOKUP[kind]
        command = ProjectionCommand(task_id=task_id, request=request)

        def read_state(conn: Connection, tail: LogTail) -> ProjectionState:
            events = fetch_all(conn, "log_export_task", {"task_id": task_id})
            key = refusal_key(projection_operation(request), request.idempotency_key)
            return ProjectionState(
                task=fetch_record(conn, "get_task", {"task_id": task_id}, TaskRow),
                events=tuple(EventRow.from_row(event) for event in events),
                prior=fetch_record(
                    conn, lookup, {"idempotency_key": request.idempotency_key}, IdempotencyRow
                ),
                tail=tail,
                refused=fetch_record(
                    conn, "task_idempotency_get", {"idempotency_key": key}, IdempotencyRow
                ),
            )

        def read(conn: Connection) -> ProjectionState:
            return read_state(conn, read_log_tail(conn, [chain_of(task_id)]))

        actor = current_actor()

        def recorded(refused: LedgerError) -> LedgerError:
            """Record a well-formed projection's refusal, unless previewed; answers the error to
            raise: `refused`, or the refusal its key kept."""
            if preview:
                return refused

            def record(conn: Connection) -> LedgerError:
                plans = PlanExecutor(conn, error=InitialExecutionProjectionError)
                state = read_state(conn, plans.tail(chain_of(task_id)))
                now = read_clock(self._clock)
                decision = decide_projection_refusal(state, command, refused, now=now, actor=actor)
                if decision is None:
                    return refused
                answer = plans.apply(decision)
                if not answer["idempotent"]:
                    return refused
                return InitialExecutionProjectionError(answer["code"], answer["message"])

            error: LedgerError = as_projection_error(lambda: self._db.write(record))
            return error

        seen = as_projection_error(lambda: self._db.read(read))
        try:
            prepared = prepare_projection(seen, command, authorization_id=authorization)
        except LedgerError as refused:
            raise recorded(refused) from None
        if isinstance(prepared, Replay):
            return {"preview": True, "replay": prepared.response} if preview else prepared.response
        envelope = self._resolver(
            prepared.task_id,
            prepared.job_id,
            prepared.capability,
            prepared.adapter,
            prepared.runtime_input,
        )
        contract = result_contract(SOURCE_CAPTURE_RESULT)

        def decide(conn: Connection, plans: PlanExecutor) -> Decision[ProjectionAnswer]:
            return decide_projection(
                read_state(conn, plans.tail(chain_of(task_id))),
                command,
                now=read_clock(self._clock),
                envelope=envelope,
                authorization_id=authorization,
                source_capture_contract=contract,
                actor=actor,
            )

        # The decision's refusals are recorded, a storage failure applying its plan is not.
        decided: list[LedgerError] = []

        def write(conn: Connection) -> ProjectionAnswer:
            plans = PlanExecutor(conn, error=InitialExecutionProjectionError)
            try:
                decision = decide(conn, plans)
            except LedgerError as refused:
                decided.append(refused)
                raise
            return plans.apply(decision)

        if preview:
            digest = envelope.get("execution_digest") if isinstance(envelope, dict) else None
            expected = None
            if isinstance(request, InitialExecutionProjectionRequest) and seen.task is not None:
                expected = projection_expectations(
                    seen.task, prepared.job_id, digest if isinstance(digest, str) else None
                )
            refusal = None
            try:
                as_projection_error(
                    lambda: self._db.read(lambda conn: decide(conn, PlanExecutor(conn)))
                )
            except InitialExecutionProjectionError as refused:
                refusal = {"code": refused.code, "detail": refused.detail}
            return {
                "preview": True,
                "execution_digest": digest,
                "envelope": envelope,
                "would_project": refusal is None,
                "refusal": refusal,
                # What a request that pins the task and envelope as they stand now names.
                "expected": expected,
            }
        try:
            answer: ProjectionAnswer = as_projection_error(lambda: self._db.write(write))
        except InitialExecutionProjectionError as refused:
            if not decided or decided[-1].code != refused.code:
                raise
            raise recorded(refused) from None
        return answer
