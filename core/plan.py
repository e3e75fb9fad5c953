"""What a decision returns: a replay of a first answer, or a complete plan of writes.

A `WritePlan` holds everything the shell writes, decided: the row writes (each naming a
registered statement, see `core.statements`), then the events with their ids, chain positions
and seals (see `core.log.tail`). The shell executes `statements()` in order inside one
`BEGIN IMMEDIATE` transaction and checks that every guarded write changed exactly one row (the
compare-and-swap); nothing in a plan is decided by the shell.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TypeAlias

import attrs
from aios_ledger.core.digests import sha256_of_canonical
from aios_ledger.core.errors import LedgerError
from aios_ledger.core.jsonvalue import JsonObject, JsonValue, encode_checked, loads_object
from aios_ledger.core.log.tail import AppendedEvent, EventAppend, LogTail
from aios_ledger.core.statements import SqlWrite
from aios_ledger.core.tasks.records import IdempotencyRow


@attrs.frozen
class WritePlan:
    """The writes, the sealed events and the answer; `tail` is the log's tail after the
    events (None for a plan that read none and appends none)."""

    writes: tuple[SqlWrite, ...]
    events: tuple[AppendedEvent, ...]
    response: JsonObject
    tail: LogTail | None

    def statements(self) -> list[SqlWrite]:
        """Every statement, in the order the shell executes them: writes, then each event's
        row and seal."""
        statements = list(self.writes)
        for event in self.events:
            statements.extend(event.writes())
        return statements


def sealed_plan(
    writes: Sequence[SqlWrite],
    events: Sequence[EventAppend],
    response: JsonObject,
    *,
    tail: LogTail,
) -> WritePlan:
    """The plan of `writes` and `events` sealed onto `tail`."""
    appended, after = tail.append(events)
    return WritePlan(writes=tuple(writes), events=appended, response=response, tail=after)


@attrs.frozen
class Replay:
    response: JsonObject


Decision: TypeAlias = WritePlan | Replay


def request_digest(operation: str, subject: str | None, request: JsonValue) -> str:
    """What an idempotency key is bound to: the operation, its subject and the exact request.

    `request` is the `public()` form of a request record, every part of which its field checks
    passed (`from_mapping`), so it is encoded without being walked again; the digest is the
    same `sha256_hex` of the same document."""
    document = {"operation": operation, "subject": subject, "request": request}
    return sha256_of_canonical(encode_checked(document))


def replay_or_conflict(
    prior: IdempotencyRow | None,
    digest: str,
    *,
    error: type[LedgerError] = LedgerError,
) -> Replay | None:
    """Stripe's rule: same key and request replays the first answer; a different request is
    a conflict. Checked before anything else, since the subject has moved on since."""
    if prior is None:
        return None
    if prior.request_sha256 != digest:
        raise error(
            "IDEMPOTENCY_CONFLICT",
            f"key {prior.idempotency_key!r} was first used for a different request",
        )
    response = loads_object(prior.response_json, what="stored response")
    return Replay({**response, "idempotent": True})


def first_answer(response: JsonObject) -> JsonObject:
    return {**response, "idempotent": False}
