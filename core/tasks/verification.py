"""How a task's submitted results are judged: by a reviewer (`task verify`, the default), or
automatically when they arrive (`auto`).

An automatic judgement accepts a result whose `status` is SUCCEEDED (its contract was already
checked on submit: a result that breaks it is refused before it is judged); anything else (a
FAILED status, no status: what a worker submits for a non-zero exit, a timeout, invalid output,
a refused result) needs rework, with the result's own account of the failure as the reason.
"""

from __future__ import annotations

import attrs
from aios_ledger.core.jsonvalue import JsonObject
from aios_ledger.core.tasks.modes import VerifyDecision
from aios_ledger.core.tasks.requests import MAX_REASON


@attrs.frozen
class Judgement:
    """A verification's decision and why."""

    decision: VerifyDecision
    reason: str


def automatic_judgement(result: JsonObject) -> Judgement:
    status = result.get("status")
    if status == "SUCCEEDED":
        return Judgement(VerifyDecision.SUCCEEDED, "result status SUCCEEDED")
    reason = f"result status {status!r}"
    summary = result.get("summary")
    if isinstance(summary, str) and summary:
        reason = f"{reason}: {summary}"
    return Judgement(VerifyDecision.NEEDS_REWORK, reason[:MAX_REASON])
