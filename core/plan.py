"""What a decision returns: a replay of a first answer, or a plan of guarded writes.

The shell applies a `WritePlan` verbatim inside one `BEGIN IMMEDIATE` transaction: every
`SqlWrite` with `guarded=True` must change exactly one row (the compare-and-swap), then the
events are appended and sealed. Nothing in a plan is decided by the shell.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TypeAlias

import attrs
from aios_ledger.core.digests import canonical_json, sha256_of_canonical
from aios_ledger.core.errors import LedgerError
from aios_ledger.core.jsonvalue import JsonObject, JsonValue, encode_checked, loads_object
from aios_ledger.core.records import IdempotencyRow

SqlParam: TypeAlias = str | int | float | bytes | None


@attrs.frozen
class SqlWrite:
    statement: str
    params: Mapping[str, SqlParam]
    guarded: bool = False


@attrs.frozen
class EventAppend:
    task_id: str | None
    agent_id: str | None
    event_type: str
    payload: JsonObject
    created_at: str

    def payload_json(self) -> str:
        """Checked, then encoded: payloads come from every part of the core (tasks, runs,
        auxiliary runs, projections), and a key that is not text must stay a refusal rather
        than be turned into text by the encoder."""
        return canonical_json(self.payload)


@attrs.frozen
class WritePlan:
    writes: tuple[SqlWrite, ...]
    events: tuple[EventAppend, ...]
    response: JsonObject


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
