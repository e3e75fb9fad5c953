"""Refused attempts are part of the record: a well-formed governed write or projection refused by a
check is a sealed event; a malformed one leaves no trace, so no one can fill the log with noise."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, Final, TypedDict

import attrs
from aios_ledger.core.actors import Actor
from aios_ledger.core.errors import LedgerError
from aios_ledger.core.jsonvalue import JsonObject, loads_object
from aios_ledger.core.log.idempotency import IdempotencyRow, RecordedAnswerRow
from aios_ledger.core.log.plan import Decision, Replay, sealed_plan, stored_answer
from aios_ledger.core.log.tail import EventAppend, LogTail
from aios_ledger.core.statements import SqlWrite, Statement
from aios_ledger.core.tasks.records import TaskRow
from aios_ledger.core.timestamps import Timestamp, require_timestamp

GOVERNED_WRITE_REFUSED: Final = "GOVERNED_WRITE_REFUSED"
PROJECTION_REFUSED: Final = "TASK_INITIAL_EXECUTION_PROJECTION_REFUSED"
# The events of refused attempts; none changes its task, so the chain's checks pass over them.
REFUSAL_EVENTS: Final = frozenset({GOVERNED_WRITE_REFUSED, PROJECTION_REFUSED})


def refusal_key(operation: str, idempotency_key: str) -> str:
    return f"{operation} {idempotency_key}"


@attrs.frozen
class RefusedAttempt:
    """A well-formed attempt refused by one of its checks, and what it attempted."""

    operation: str
    event_type: str
    task_id: str
    idempotency_key: str
    request_sha256: str
    code: str
    message: str
    attempted: JsonObject

    def __attrs_post_init__(self) -> None:
        if self.event_type not in REFUSAL_EVENTS:
            raise ValueError(f"{self.event_type!r} does not record a refusal")


@attrs.frozen
class RefusalState:
    """The task, the refusal under the key, whether the key answered else, the tail."""

    task: TaskRow | None
    prior: IdempotencyRow | None
    answered: bool
    tail: LogTail


class RefusalAnswer(TypedDict):
    code: str
    message: str
    idempotent: bool


def replay_refusal(
    prior: IdempotencyRow | None, digest: str, *, error: type[LedgerError] = LedgerError
) -> None:
    """A refusal under a key replays before any check, since what was refused might pass now."""
    if prior is None:
        return
    answer = _stored_refusal(prior, digest, error)
    raise error(answer["code"], answer["message"])


def _stored_refusal(prior: IdempotencyRow, digest: str, error: type[LedgerError]) -> RefusalAnswer:
    if prior.request_sha256 != digest:
        key = prior.idempotency_key.partition(" ")[2] or prior.idempotency_key
        raise error("IDEMPOTENCY_CONFLICT", f"key {key!r} was first used for a different request")
    stored = loads_object(prior.response_json, what="stored refusal")
    code, message = stored.get("code"), stored.get("message")
    if not isinstance(code, str) or not isinstance(message, str):
        raise error("IDEMPOTENCY_ROW_CORRUPT", f"{prior.idempotency_key}: not a refusal")
    return {"code": code, "message": message, "idempotent": True}


def decide_refusal(
    state: RefusalState,
    attempt: RefusedAttempt,
    *,
    now: Timestamp,
    actor: Actor,
    error: type[LedgerError] = LedgerError,
) -> Decision[RefusalAnswer] | None:
    """Record a refused attempt under its key with a sealed event."""
    require_timestamp(now)
    if state.task is None or state.task.task_id != attempt.task_id or state.answered:
        return None
    if state.prior is not None:
        return Replay(_stored_refusal(state.prior, attempt.request_sha256, error))
    answer: RefusalAnswer = {"code": attempt.code, "message": attempt.message, "idempotent": False}
    recorded = RecordedAnswerRow(
        idempotency_key=refusal_key(attempt.operation, attempt.idempotency_key),
        operation=attempt.operation,
        subject=attempt.task_id,
        request_sha256=attempt.request_sha256,
        response_json=stored_answer(answer),
        created_at=now.text,
    )
    event = EventAppend(
        task_id=attempt.task_id,
        agent_id=None,
        event_type=attempt.event_type,
        payload={
            **attempt.attempted,
            "code": attempt.code,
            "message": attempt.message,
            "idempotency_key": attempt.idempotency_key,
        },
        created_at=now.text,
        rows=(recorded.image(),),
        actor=actor,
    )
    insert = SqlWrite(Statement.TASK_IDEMPOTENCY_INSERT, recorded._asdict())
    return sealed_plan((insert,), (event,), answer, tail=state.tail)


class RefusalEntry(TypedDict):
    """A refused attempt as the console, `why` and the API show it."""

    event_id: int
    event: str
    at: str
    code: str
    message: str
    idempotency_key: str | None
    actor: JsonObject | None
    attempted: JsonObject


def refusal_entries(events: Iterable[Mapping[str, Any]]) -> list[RefusalEntry]:
    """The refused attempts among a task's events, in order."""
    entries: list[RefusalEntry] = []
    for event in events:
        payload = event.get("payload")
        if event.get("event_type") not in REFUSAL_EVENTS or not isinstance(payload, dict):
            continue
        key = payload.get("idempotency_key")
        entries.append(
            {
                "event_id": int(event["event_id"]),
                "event": str(event["event_type"]),
                "at": str(event["created_at"]),
                "code": str(payload.get("code")),
                "message": str(payload.get("message")),
                "idempotency_key": key if isinstance(key, str) else None,
                "actor": event.get("actor"),
                "attempted": {
                    name: value
                    for name, value in payload.items()
                    if name not in ("code", "message", "idempotency_key")
                },
            }
        )
    return entries
