"""Pull requests after a governed write, purely: a sealed `PULL_REQUEST_OPENED` for the write's
key answers every later ask; a forge's refusal is sealed as `PULL_REQUEST_FAILED`, the write
standing, until the same write is asked again."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Annotated, Any

import attrs
from aios_ledger.core.actors import Actor
from aios_ledger.core.errors import LedgerError
from aios_ledger.core.git.forges import FAILURE_CODES, FORGES, MAX_MESSAGE
from aios_ledger.core.git.records import GovernedWriteRow
from aios_ledger.core.jsonvalue import JsonObject
from aios_ledger.core.kinds import Between, OneOf, Text
from aios_ledger.core.log.plan import Decision, Replay, sealed_plan
from aios_ledger.core.log.tail import EventAppend, LogTail
from aios_ledger.core.structuring import structure
from aios_ledger.core.timestamps import Timestamp, require_timestamp

PULL_REQUEST_OPENED = "PULL_REQUEST_OPENED"
PULL_REQUEST_FAILED = "PULL_REQUEST_FAILED"


@attrs.frozen
class ForgeAnswer:
    """What the forge answered for a write's request: the request opened or found (`adopted`),
    or why not (`code` one of `FAILURE_CODES`, the HTTP `status` when one came back)."""

    idempotency_key: Annotated[str, Text(max_length=200)]
    forge: Annotated[str, OneOf(FORGES)]
    project: Annotated[str, Text(max_length=300)]
    head: Annotated[str, Text(max_length=300)]
    base: Annotated[str, Text(max_length=300)]
    url: Annotated[str, Text(max_length=2000)] | None = None
    number: Annotated[int, Between(1, 2**53)] | None = None
    adopted: bool = False
    code: Annotated[str, OneOf(FAILURE_CODES)] | None = None
    status: Annotated[int, Between(100, 599)] | None = None
    message: Annotated[str, Text(max_length=MAX_MESSAGE)] | None = None

    @classmethod
    def from_mapping(cls, raw: object) -> ForgeAnswer:
        answer = structure(raw, cls, what="forge answer")
        if (answer.code is None) == (answer.url is None or answer.number is None):
            raise LedgerError("FIELDS_INVALID", "a forge answer is a request or a failure")
        return answer


@attrs.frozen
class PullRequestState:
    """The write whose request is recorded, the payload of the last pull-request event its key
    has, and the task chain's tail."""

    write: GovernedWriteRow | None
    recorded: JsonObject | None
    tail: LogTail


def recorded_pull_request(
    events: Sequence[Mapping[str, Any]], idempotency_key: str
) -> JsonObject | None:
    """The last pull-request event's payload for the write, with its type as `state`."""
    found: JsonObject | None = None
    for event in events:
        kind = event.get("event_type") or event.get("type")
        payload = event.get("payload")
        if (
            kind in (PULL_REQUEST_OPENED, PULL_REQUEST_FAILED)
            and isinstance(payload, dict)
            and payload.get("idempotency_key") == idempotency_key
        ):
            found = {**payload, "state": "OPENED" if kind == PULL_REQUEST_OPENED else "FAILED"}
    return found


def retry_command(task_id: str, idempotency_key: str) -> str:
    return (
        f"aios-ledger write {task_id} --json FILE  (FILE holding"
        f' {{"idempotency_key": "{idempotency_key}"}}: the same write again)'
    )


def opened_answer(recorded: JsonObject | None) -> JsonObject | None:
    """A request already recorded OPENED answers itself: no forge is asked again."""
    if recorded is not None and recorded.get("state") == "OPENED":
        return {**recorded, "idempotent": True}
    return None


def decide_pull_request(
    state: PullRequestState, answer: ForgeAnswer, *, now: Timestamp, actor: Actor
) -> Decision[JsonObject]:
    """Seal what the forge answered for a landed write; a request already opened answers
    itself."""
    require_timestamp(now)
    write = state.write
    if write is None or write.idempotency_key != answer.idempotency_key:
        raise LedgerError("WRITE_NOT_FOUND", f"no governed write {answer.idempotency_key!r}")
    if write.state != "APPLIED":
        raise LedgerError(
            "WRITE_NOT_APPLIED",
            f"write {write.idempotency_key!r} is {write.state}: nothing to propose",
        )
    opened = opened_answer(state.recorded)
    if opened is not None:
        return Replay(opened)
    payload: JsonObject = {
        "idempotency_key": write.idempotency_key,
        "repository": write.repository,
        "forge": answer.forge,
        "project": answer.project,
        "head": answer.head,
        "base": answer.base,
    }
    if answer.code is None:
        payload.update(url=answer.url, number=answer.number, adopted=answer.adopted)
        kind, state_name = PULL_REQUEST_OPENED, "OPENED"
    else:
        payload.update(
            code=answer.code,
            status=answer.status,
            message=answer.message,
            retry=retry_command(write.task_id, write.idempotency_key),
        )
        kind, state_name = PULL_REQUEST_FAILED, "FAILED"
    event = EventAppend(
        task_id=write.task_id,
        agent_id=None,
        event_type=kind,
        payload=payload,
        created_at=now.text,
        actor=actor,
    )
    response: JsonObject = {**payload, "state": state_name, "idempotent": False}
    return sealed_plan((), (event,), response, tail=state.tail)
