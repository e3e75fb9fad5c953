"""One client of the contention test: random task operations with short leases and the real
clock against a shared file, logged as a Jepsen-style history.

    python reliability_contention_client.py DB HISTORY PROCESS SECONDS SEED

Each operation is an `invoke` record (wall-clock time `t` from `time.time()`, taken just
before the call) and a completion record (`ok` with the answer, `fail` with the LedgerError's
code), `t` taken just after the call returned. Operations: create, claim (always with an
idempotency key and the client's own token; 1-2 s leases), heartbeat and submit of the tasks it
believes it holds, verify of a submitted task, expire, replays of earlier keyed operations, and
pauses of up to 2 s that let its leases run out while it still believes it holds them.
"""

from __future__ import annotations

import json
import random
import sys
import time
from typing import Any

from aios_ledger.core import LedgerError
from aios_ledger.shell.tasks.ledger import TaskLedger
from reliability_operations import perform

UNAVAILABLE_RETRIES = 100


class Client:
    def __init__(self, db: str, history: str, process: int, seed: int) -> None:
        self.ledger = TaskLedger(db)
        self.out = open(history, "a", encoding="utf-8")  # noqa: SIM115 - closed in run()
        self.process = process
        self.agent = f"agent-{process}"
        self.rng = random.Random(seed)
        self.counter = 0
        self.serial = 0
        self.held: dict[str, dict[str, str]] = {}
        self.keyed: list[tuple[str, dict[str, Any]]] = []

    def name(self, kind: str) -> str:
        self.counter += 1
        return f"{kind}-p{self.process}-{self.counter}"

    def log(self, record: dict[str, Any]) -> None:
        self.out.write(json.dumps({"p": self.process, **record}, sort_keys=True) + "\n")
        self.out.flush()

    def perform(self, op: str, args: dict[str, Any]) -> Any:
        return perform(self.ledger, op, args, agent_id=self.agent)

    def invoke(self, op: str, args: dict[str, Any]) -> tuple[str, Any]:
        """One operation; while the server is away (DATABASE_UNAVAILABLE: the outcome of that
        try is unknown, logged as `info`, as Jepsen logs a timeout), the same operation again
        with the same keys, so that whatever was applied is answered as a replay."""
        for _ in range(UNAVAILABLE_RETRIES):
            self.serial += 1
            serial = self.serial
            self.log({"kind": "invoke", "n": serial, "op": op, "args": args, "t": time.time()})
            try:
                value = self.perform(op, args)
            except LedgerError as refused:
                kind = "info" if refused.code == "DATABASE_UNAVAILABLE" else "fail"
                self.log(
                    {"kind": kind, "n": serial, "op": op, "code": refused.code, "t": time.time()}
                )
                if kind == "info":
                    time.sleep(0.2)
                    continue
                return "fail", refused.code
            self.log({"kind": "ok", "n": serial, "op": op, "value": value, "t": time.time()})
            return "ok", value
        return "info", "DATABASE_UNAVAILABLE"

    def step(self) -> None:
        rng = self.rng
        weights = {
            "create": 2.0,
            "claim": 3.0,
            "heartbeat": 2.0,
            "submit": 2.0,
            "verify": 1.5,
            "expire": 1.0,
            "replay": 0.6,
            "pause": 0.5,
        }
        op = rng.choices(list(weights), weights=list(weights.values()))[0]
        if op == "pause":
            time.sleep(rng.uniform(0.2, 2.0))
            return
        if op == "replay":
            if self.keyed:
                old_op, old_args = rng.choice(self.keyed)
                self.invoke(old_op, {**old_args, "replay": True})
            return
        if op == "create":
            task = {
                "task_id": self.name("task"),
                "goal": "g",
                "instructions": "i",
                "priority": rng.randint(0, 3),
                "max_attempts": rng.randint(2, 4),
            }
            args: dict[str, Any] = {"task": task, "key": self.name("create")}
        elif op == "claim":
            args = {
                "lease_seconds": rng.randint(1, 2),
                "key": self.name("claim"),
                "token": f"tok-{self.name('lease')}-{rng.getrandbits(64):016x}",
            }
        elif op in ("heartbeat", "submit"):
            if not self.held:
                return
            task_id = rng.choice(sorted(self.held))
            args = {"task_id": task_id, **self.held[task_id]}
            if op == "heartbeat":
                args["lease_seconds"] = rng.randint(1, 2)
            else:
                args["key"] = self.name("submit")
                args["result"] = {"status": "SUCCEEDED", "summary": f"by {self.agent}"}
        elif op == "verify":
            submitted = self.ledger.list_tasks("SUBMITTED", limit=20)
            if not submitted:
                return
            args = {
                "task_id": rng.choice(submitted)["task_id"],
                "decision": rng.choice(["SUCCEEDED", "NEEDS_REWORK", "NEEDS_REWORK", "FAILED"]),
                "key": self.name("verify"),
            }
        else:
            args = {}
        kind, value = self.invoke(op, args)
        if (
            kind == "ok" and "key" in args and value is not None
        ):  # an empty claim keeps its key free
            self.keyed.append((op, args))
        if op == "claim" and kind == "ok" and value is not None:
            self.held[str(value["task_id"])] = {"token": args["token"], "claim_key": args["key"]}
        elif op == "submit" or (op == "heartbeat" and kind == "fail"):
            self.held.pop(args["task_id"], None)

    def run(self, seconds: float) -> None:
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            self.step()
        self.out.close()
        self.ledger.close()


def main(argv: list[str]) -> int:
    db, history, process, seconds, seed = argv[1:6]
    Client(db, history, int(process), int(seed)).run(float(seconds))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv))
