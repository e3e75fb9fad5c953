"""Which OpenTelemetry trace an attempt's spans belong to, its ids derived from (task id, attempt)
so that processes that never talked meet in one trace."""

from __future__ import annotations

import hashlib
from collections.abc import Mapping

import attrs
from aios_ledger.core.tasks.budgets import MAX_MODEL_NAME, MODEL_NAME

TRACE_DOMAIN = b"aios-ledger/attempt-trace/v1"
# Writes on a task between two attempts: they belong to the attempt that comes next.
BETWEEN_ATTEMPTS = frozenset({"create", "retry", "pause", "resume"})
# What an agent's `usage` may report, by the GenAI conventions' names; another shape is left out,
# never an error, as the spans only show what an agent says.
MAX_TOKEN_COUNT = 2**63 - 1
_TOKEN_ATTRIBUTES = (
    ("input_tokens", "gen_ai.usage.input_tokens"),
    ("output_tokens", "gen_ai.usage.output_tokens"),
)
MODEL_ATTRIBUTE = "gen_ai.request.model"


@attrs.frozen
class AttemptTrace:
    """One attempt's 128-bit trace id and 64-bit unrecorded root span id, never zero."""

    task_id: str
    attempt: int
    trace_id: int
    root_span_id: int

    @classmethod
    def of(cls, task_id: str, attempt: int) -> AttemptTrace:
        digest = hashlib.sha256(
            b"\0".join(
                (TRACE_DOMAIN, task_id.encode("utf-8", "backslashreplace"), str(attempt).encode())
            )
        ).digest()
        trace_id = int.from_bytes(digest[:16], "big") or 1
        root_span_id = int.from_bytes(digest[16:24], "big") or 1
        return cls(task_id, attempt, trace_id, root_span_id)

    @property
    def traceparent(self) -> str:
        """The W3C `traceparent` of the attempt's root span, sampled."""
        return f"00-{self.trace_id:032x}-{self.root_span_id:016x}-01"


def attempt_of_write(operation: str, attempt: int) -> int:
    """A create, retry, pause or resume prepares the next attempt; all else the current."""
    return attempt + 1 if operation in BETWEEN_ATTEMPTS else max(attempt, 1)


def model_usage_attributes(result: object) -> dict[str, int | str]:
    """The GenAI attributes of the well-shaped fields of a result's `usage` object."""
    usage = result.get("usage") if isinstance(result, Mapping) else None
    if not isinstance(usage, Mapping):
        return {}
    attributes: dict[str, int | str] = {}
    for field, attribute in _TOKEN_ATTRIBUTES:
        count = usage.get(field)
        if type(count) is int and 0 <= count <= MAX_TOKEN_COUNT:
            attributes[attribute] = count
    model = usage.get("model")
    if isinstance(model, str) and len(model) <= MAX_MODEL_NAME and MODEL_NAME.match(model):
        attributes[MODEL_ATTRIBUTE] = model
    return attributes
