"""What a decision returns: a replay of a recorded answer, or a complete plan of writes, which the
shell executes in one transaction without deciding anything itself.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Generic, TypeAlias, TypeVar, cast

import attrs
from aios_ledger.core.digests import sha256_of_canonical
from aios_ledger.core.errors import LedgerError
from aios_ledger.core.jsonvalue import JsonObject, JsonValue, encode_checked, loads_object
from aios_ledger.core.log.idempotency import IdempotencyRow
from aios_ledger.core.log.tail import AppendedEvent, EventAppend, LogTail
from aios_ledger.core.statements import SqlWrite

# A decision's answer: a TypedDict of its domain's `answers` (a plain dict at run time), or the
# row it wrote.
R = TypeVar("R")


@attrs.frozen
class WritePlan(Generic[R]):
    """The writes, the sealed events and the answer; `tail` is the log's tail after the
    events (None for a plan that read none and appends none)."""

    writes: tuple[SqlWrite, ...]
    events: tuple[AppendedEvent, ...]
    response: R
    tail: LogTail | None

    def numbered(self, event_ids: Sequence[int]) -> WritePlan[R]:
        """The plan with its events at `event_ids`, for a store that hands ids out after the
        decision: their seals cover everything but the id."""
        if len(event_ids) != len(self.events):
            raise ValueError(f"{len(self.events)} events, {len(event_ids)} ids")
        events = tuple(
            event.numbered(event_id) for event, event_id in zip(self.events, event_ids, strict=True)
        )
        return attrs.evolve(self, events=events)

    def statements(self) -> list[SqlWrite]:
        """Every statement in the order the shell executes them: writes, then the events."""
        statements = list(self.writes)
        for event in self.events:
            statements.extend(event.writes())
        return statements


def sealed_plan(
    writes: Sequence[SqlWrite],
    events: Sequence[EventAppend],
    response: R,
    *,
    tail: LogTail,
) -> WritePlan[R]:
    """The plan of `writes` and `events` sealed onto `tail`."""
    appended, after = tail.append(events)
    return WritePlan(writes=tuple(writes), events=appended, response=response, tail=after)


@attrs.frozen
class Replay(Generic[R]):
    """The answer recorded for an idempotency key, given again (`idempotent: true`)."""

    response: R


# What a decision returns: `Decision[CreateAnswer]` is a plan or a replay answering that shape.
Decision: TypeAlias = WritePlan[R] | Replay[R]


def request_digest(operation: str, subject: str | None, request: JsonValue) -> str:
    """What an idempotency key is bound to: the operation, its subject and the exact request
    (a checked record's `public()` form, so it is encoded without being walked again)."""
    document = {"operation": operation, "subject": subject, "request": request}
    return sha256_of_canonical(encode_checked(document))


def replay_or_conflict(
    prior: IdempotencyRow | None,
    digest: str,
    shape: type[R],
    *,
    error: type[LedgerError] = LedgerError,
) -> Replay[R] | None:
    """Stripe's rule: same key and request replays the recorded answer; a different request is
    a conflict. Checked before anything else, since the subject has moved on since."""
    if prior is None:
        return None
    if prior.request_sha256 != digest:
        raise error(
            "IDEMPOTENCY_CONFLICT",
            f"key {prior.idempotency_key!r} was first used for a different request",
        )
    response = loads_object(prior.response_json, what="stored response")
    return Replay(cast(R, {**response, "idempotent": True}))


def stored_answer(answer: Mapping[str, object]) -> str:
    """The canonical JSON of an answer as the idempotency ledger records it: never whether it
    is a replay, nor a lease token (shown once; the ledger keeps only its sha256)."""
    kept = dict(answer)
    kept.pop("idempotent", None)
    kept.pop("lease_token", None)
    return encode_checked(cast(JsonObject, kept))
