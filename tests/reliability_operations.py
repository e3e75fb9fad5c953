"""The ledger operations the reliability clients drive, by name, with their logged arguments."""

from __future__ import annotations

from typing import Any

from aios_ledger.shell.tasks.ledger import TaskLedger


def perform(ledger: TaskLedger, op: str, args: dict[str, Any], *, agent_id: str) -> Any:
    """Run one operation; a claim's answer is returned without its lease token (never logged)."""
    if op == "create":
        return ledger.create_task(args["task"], idempotency_key=args["key"])
    if op == "claim":
        answer = ledger.claim(
            agent_id=agent_id,
            capabilities=[],
            lease_seconds=args["lease_seconds"],
            idempotency_key=args["key"],
            lease_token=args["token"],
        )
        return None if answer is None else {k: v for k, v in answer.items() if k != "lease_token"}
    if op == "heartbeat":
        return ledger.heartbeat(
            args["task_id"], lease_token=args["token"], lease_seconds=args["lease_seconds"]
        )
    if op == "submit":
        return ledger.submit_result(
            args["task_id"],
            lease_token=args["token"],
            result=args["result"],
            idempotency_key=args["key"],
        )
    if op == "verify":
        return ledger.verify(
            args["task_id"], decision=args["decision"], reason="r", idempotency_key=args["key"]
        )
    if op == "cancel":
        return ledger.cancel(args["task_id"], reason="r", idempotency_key=args["key"])
    if op == "expire":
        return ledger.expire_leases()
    raise AssertionError(op)
