"""How a task's submitted results are judged automatically: SUCCEEDED is accepted (its contract was
checked on submit), anything else goes to rework."""

from __future__ import annotations

import attrs
from aios_ledger.core.jsonvalue import JsonObject
from aios_ledger.core.tasks.modes import VerifyDecision
from aios_ledger.core.tasks.requests import MAX_REASON


@attrs.frozen
class Judgement:
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
