"""Which OpenTelemetry trace a task attempt's spans belong to, and what an agent's result reports
of its model calls, as span attributes (docs/observability.md).

One trace per task attempt, derived from the attempt itself: its trace id and the id of its root
span are the first 24 bytes of a domain-separated sha256 of (task id, attempt). Every process
that touches the attempt (the server, the worker, the reviewer, a library caller) computes the
same ids from what it already knows, so the spans of processes that never talked to each other
(the reviewer and the worker) still meet in one trace, and a write whose task is only known once
it is done (a create, a claim of whatever task comes first) still lands in its attempt's trace.
No process records the root span itself: each process's top span is a child of it.

Pure: the shell's tracing module turns these into spans.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping

import attrs
from aios_ledger.core.tasks.budgets import MAX_MODEL_NAME, MODEL_NAME

TRACE_DOMAIN = b"aios-ledger/attempt-trace/v1"
# Writes on a task between two attempts: they belong to the attempt that comes next.
BETWEEN_ATTEMPTS = frozenset({"create", "retry", "pause", "resume"})
# What an agent's `usage` may report, read as the GenAI semantic conventions name it; any other
# shape (a negative count, a bool, text too long) is left out, never an error: the spans only
# show what an agent says, the ledger's own rules judge the result.
MAX_TOKEN_COUNT = 2**63 - 1
_TOKEN_ATTRIBUTES = (
    ("input_tokens", "gen_ai.usage.input_tokens"),
    ("output_tokens", "gen_ai.usage.output_tokens"),
)
MODEL_ATTRIBUTE = "gen_ai.request.model"


@attrs.frozen
class AttemptTrace:
    """The trace of attempt `attempt` of task `task_id`: a 128-bit trace id and the 64-bit id
    of its (unrecorded) root span, both never zero."""

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
    """The attempt whose trace a write belongs to, from the task's `attempt` after it: a
    create, retry, pause or resume prepares the next attempt; every other write acts on the
    current one (a cancel before any claim on the first)."""
    if operation in BETWEEN_ATTEMPTS:
        return attempt + 1
    return max(attempt, 1)


def model_usage_attributes(result: object) -> dict[str, int | str]:
    """The GenAI attributes of the model usage an agent's result reports in its `usage` object
    (`input_tokens`, `output_tokens`: non-negative integers; `model`: its name), those fields
    of it that have that shape; nothing for a result without one."""
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
