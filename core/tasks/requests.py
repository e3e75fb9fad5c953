"""Strict request records of the task lifecycle, structured from untrusted mappings.

Each record has a field table for `structure` (unknown or missing fields, wrong types, huge or
malformed values are all `FIELDS_INVALID`), a `from_mapping` constructor and `public()`, the
canonical form its idempotency key is bound to. Lease tokens never appear in `public()`: only
their sha256 does, which is also all the database ever keeps.
"""

from __future__ import annotations

import hashlib
import re
from typing import Any

import attrs
from aios_ledger.core.errors import LedgerError
from aios_ledger.core.fields import (
    FieldRefused,
    identifier,
    integer,
    nullable,
    one_of,
    sha256_field,
    structure,
    text,
)
from aios_ledger.core.jsonvalue import JsonObject, JsonValue, check_json
from aios_ledger.core.tasks.transitions import VERIFY_DECISIONS
from aios_ledger.core.timestamps import normalise_timestamp

MAX_GOAL = 4096
MAX_INSTRUCTIONS = 65536
MAX_REASON = 1000
MAX_CAPABILITIES = 64
MAX_OFFERED_CAPABILITIES = 256
MAX_PRIORITY = 1_000_000
MAX_ATTEMPTS = 1000
MAX_LEASE_SECONDS = 7 * 24 * 3600
DEFAULT_PRIORITY = 0
DEFAULT_MAX_ATTEMPTS = 3
LEASE_TOKEN = re.compile(r"^[A-Za-z0-9._~+/=-]{16,256}$")
RESERVED_METADATA = ("execution",)


def lease_token_sha256(token: str) -> str:
    """What the database keeps of a lease token: its sha256, hex."""
    return hashlib.sha256(token.encode("utf-8")).hexdigest()


def _json_value(kind: type, name: str) -> Any:
    def check(value: object) -> Any:
        if not isinstance(value, kind):
            raise FieldRefused(f"must be a JSON {name}, got {type(value).__name__}")
        try:
            return check_json(value, what=name)
        except LedgerError as refused:
            raise FieldRefused(str(refused)) from None

    return check


def _capabilities(*, limit: int) -> Any:
    item = identifier()

    def check(value: object) -> list[str]:
        if not isinstance(value, list):
            raise FieldRefused(f"must be a list of capability names, got {type(value).__name__}")
        if len(value) > limit:
            raise FieldRefused(f"holds more than {limit} capabilities")
        names = [item(entry) for entry in value]
        return sorted(set(names))

    return check


def _timestamp(value: object) -> str:
    if not isinstance(value, str):
        raise FieldRefused(f"must be an RFC 3339 string, got {type(value).__name__}")
    try:
        return normalise_timestamp(value, field="deadline")
    except LedgerError as refused:
        raise FieldRefused(refused.detail) from None


def _lease_token(value: object) -> str:
    if not isinstance(value, str) or not LEASE_TOKEN.fullmatch(value):
        raise FieldRefused("must be 16-256 characters of [A-Za-z0-9._~+/=-]")
    return value


def _metadata(value: object) -> JsonObject:
    checked: JsonObject = _json_value(dict, "object")(value)
    reserved = [key for key in RESERVED_METADATA if key in checked]
    if reserved:
        raise FieldRefused(
            f"{reserved} are reserved: an execution envelope is only set by the governed projection"
        )
    return checked


_CREATE_CHECKS = {
    "task_id": identifier(),
    "goal": text(max_length=MAX_GOAL),
    "instructions": text(max_length=MAX_INSTRUCTIONS),
    "success_criteria": _json_value(list, "array"),
    "required_capabilities": _capabilities(limit=MAX_CAPABILITIES),
    "constraints": _json_value(dict, "object"),
    "metadata": _metadata,
    "deadline": nullable(_timestamp),
    "priority": integer(minimum=-MAX_PRIORITY, maximum=MAX_PRIORITY),
    "max_attempts": integer(minimum=1, maximum=MAX_ATTEMPTS),
}
_CREATE_OPTIONAL = frozenset(set(_CREATE_CHECKS) - {"goal", "instructions"})


@attrs.frozen
class TaskCreateRequest:
    """A new task; every field but `goal` and `instructions` has a default."""

    task_id: str | None
    goal: str
    instructions: str
    success_criteria: list[JsonValue]
    required_capabilities: list[str]
    constraints: JsonObject
    metadata: JsonObject
    deadline: str | None
    priority: int
    max_attempts: int

    @classmethod
    def from_mapping(cls, raw: object) -> TaskCreateRequest:
        values = structure(raw, _CREATE_CHECKS, what="task", optional=_CREATE_OPTIONAL)
        defaults: dict[str, Any] = {
            "success_criteria": [],
            "required_capabilities": [],
            "constraints": {},
            "metadata": {},
            "priority": DEFAULT_PRIORITY,
            "max_attempts": DEFAULT_MAX_ATTEMPTS,
        }
        for name, default in defaults.items():
            if values[name] is None:
                values[name] = default
        return cls(**values)

    def public(self) -> JsonObject:
        return {
            "task_id": self.task_id,
            "goal": self.goal,
            "instructions": self.instructions,
            "success_criteria": self.success_criteria,
            "required_capabilities": list[JsonValue](self.required_capabilities),
            "constraints": self.constraints,
            "metadata": self.metadata,
            "deadline": self.deadline,
            "priority": self.priority,
            "max_attempts": self.max_attempts,
        }


_CLAIM_CHECKS = {
    "agent_id": identifier(),
    "capabilities": _capabilities(limit=MAX_OFFERED_CAPABILITIES),
    "lease_seconds": integer(minimum=1, maximum=MAX_LEASE_SECONDS),
    "task_id": nullable(identifier()),
    "idempotency_key": nullable(identifier()),
    "lease_token": nullable(_lease_token),
}


@attrs.frozen
class ClaimRequest:
    """A claim. An idempotent claim (with a key) needs the claimer's own `lease_token`."""

    agent_id: str
    capabilities: list[str]
    lease_seconds: int
    task_id: str | None
    idempotency_key: str | None
    lease_token: str | None = attrs.field(repr=False)

    @classmethod
    def from_mapping(cls, raw: object) -> ClaimRequest:
        optional = frozenset({"task_id", "idempotency_key", "lease_token"})
        request = cls(**structure(raw, _CLAIM_CHECKS, what="claim", optional=optional))
        if request.idempotency_key is not None and request.lease_token is None:
            raise LedgerError(
                "LEASE_TOKEN_REQUIRED",
                "an idempotent claim must bring its own lease_token: the ledger keeps only "
                "its digest and could not give a generated one back on a replay",
            )
        return request

    def public(self, lease_token: str) -> JsonObject:
        return {
            "agent_id": self.agent_id,
            "capabilities": list(self.capabilities),
            "lease_seconds": self.lease_seconds,
            "task_id": self.task_id,
            "lease_token_sha256": lease_token_sha256(lease_token),
        }


_HEARTBEAT_CHECKS = {
    "task_id": identifier(),
    "lease_token": _lease_token,
    "lease_seconds": integer(minimum=1, maximum=MAX_LEASE_SECONDS),
}


@attrs.frozen
class HeartbeatRequest:
    task_id: str
    lease_token: str = attrs.field(repr=False)
    lease_seconds: int

    @classmethod
    def from_mapping(cls, raw: object) -> HeartbeatRequest:
        return cls(**structure(raw, _HEARTBEAT_CHECKS, what="heartbeat"))


_SUBMIT_CHECKS = {
    "task_id": identifier(),
    "lease_token": _lease_token,
    "result": _json_value(dict, "object"),
    "idempotency_key": identifier(),
}


@attrs.frozen
class SubmitRequest:
    task_id: str
    lease_token: str = attrs.field(repr=False)
    result: JsonObject
    idempotency_key: str

    @classmethod
    def from_mapping(cls, raw: object) -> SubmitRequest:
        return cls(**structure(raw, _SUBMIT_CHECKS, what="submit"))

    def public(self) -> JsonObject:
        return {
            "task_id": self.task_id,
            "lease_token_sha256": lease_token_sha256(self.lease_token),
            "result": self.result,
        }


_VERIFY_CHECKS = {
    "task_id": identifier(),
    "decision": one_of(*VERIFY_DECISIONS),
    "reason": text(max_length=MAX_REASON),
    "idempotency_key": identifier(),
    "expected_result_digest": nullable(sha256_field()),
}


@attrs.frozen
class VerifyRequest:
    task_id: str
    decision: str
    reason: str
    idempotency_key: str
    expected_result_digest: str | None

    @classmethod
    def from_mapping(cls, raw: object) -> VerifyRequest:
        optional = frozenset({"expected_result_digest"})
        return cls(**structure(raw, _VERIFY_CHECKS, what="verify", optional=optional))

    def public(self) -> JsonObject:
        return {
            "task_id": self.task_id,
            "decision": self.decision,
            "reason": self.reason,
            "expected_result_digest": self.expected_result_digest,
        }


_CANCEL_CHECKS = {
    "task_id": identifier(),
    "reason": text(max_length=MAX_REASON),
    "idempotency_key": identifier(),
}


@attrs.frozen
class CancelRequest:
    task_id: str
    reason: str
    idempotency_key: str

    @classmethod
    def from_mapping(cls, raw: object) -> CancelRequest:
        return cls(**structure(raw, _CANCEL_CHECKS, what="cancel"))

    def public(self) -> JsonObject:
        return {"task_id": self.task_id, "reason": self.reason}


def check_identifier(value: object, *, what: str) -> str:
    """One identifier argument (a task id, an idempotency key), or `FIELDS_INVALID`."""
    return str(structure({what: value}, {what: identifier()}, what="arguments")[what])


def integer_in_range(value: object, *, minimum: int, maximum: int, what: str) -> int:
    checks = {what: integer(minimum=minimum, maximum=maximum)}
    return int(structure({what: value}, checks, what="arguments")[what])
