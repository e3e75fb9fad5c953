"""The writer the crash test kills: random ledger operations on one file, each logged.

    python reliability_crash_writer.py DB LOG SEED [MAX_OPS]

The ledger runs at the synchronous level in AIOS_CRASH_SYNCHRONOUS (FULL when unset).

Before each operation it appends an `invoke` record to LOG, and right after the operation
returned (or raised a `LedgerError`) a completion record (`ok` with the answer, or `fail` with
the code), each line fsync'd before going on, so that LOG holds every acknowledged operation.
On start it reads LOG back: the lease tokens of the claims it was given, and the operation that
was in flight when the previous writer died, which it issues again first when it had an
idempotency key (a replay must give back the recorded answer, or apply it once).

Its clock starts one second after the latest time an earlier writer logged (or now, if later)
and jumps ahead at random, so that leases run out without sleeping. It prints `ready` once it has
completed one operation (a new process carries on; `opening` just before it opens
the file), then works until killed or MAX_OPS.
"""

from __future__ import annotations

import json
import os
import random
import sys
from datetime import UTC, datetime, timedelta
from typing import Any

from aios_ledger.core import LedgerError, Timestamp
from aios_ledger.shell import TaskLedger
from reliability_operations import perform

SYNCHRONOUS_ENV = "AIOS_CRASH_SYNCHRONOUS"

AGENTS = ("agent-a", "agent-b")


def read_log(path: str) -> list[dict[str, Any]]:
    """The records of LOG; a torn last line (killed while writing it) is not a record."""
    records = []
    try:
        with open(path, encoding="utf-8") as handle:
            for line in handle:
                try:
                    records.append(json.loads(line))
                except json.JSONDecodeError:
                    continue
    except FileNotFoundError:
        pass
    return records


class VirtualClock:
    def __init__(self) -> None:
        self.base = datetime.now(UTC)
        self.offset = 0

    def __call__(self) -> datetime:
        return self.base + timedelta(seconds=self.offset)


class Writer:
    def __init__(self, db: str, log: str, seed: int) -> None:
        self.rng = random.Random(seed)
        self.seed = seed
        self.counter = 0
        self.records = read_log(log)
        self.fd = os.open(log, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        self.serial = 1 + max((int(r["n"]) for r in self.records), default=0)
        self.tokens: dict[str, str] = {}
        for record in self.records:
            if record["kind"] == "ok" and record["op"] == "claim" and record["value"]:
                self.tokens[record["value"]["task_id"]] = record["args"]["token"]
        self.clock = VirtualClock()
        # Never before a time an earlier writer used: every record holds its writer's clock.
        used = [Timestamp.parse(record["at"]).to_datetime() for record in self.records]
        if used:
            self.clock.base = max(self.clock.base, max(used) + timedelta(seconds=1))
        sys.stdout.write("opening\n")  # the next moments create or migrate the file
        sys.stdout.flush()
        synchronous = os.environ.get(SYNCHRONOUS_ENV, "FULL")
        self.ledger = TaskLedger(db, clock=self.clock, synchronous=synchronous)

    def log(self, record: dict[str, Any]) -> None:
        record = {**record, "at": Timestamp.from_datetime(self.clock()).text}
        os.write(self.fd, (json.dumps(record, sort_keys=True) + "\n").encode())
        os.fsync(self.fd)

    def name(self, kind: str) -> str:
        self.counter += 1
        return f"{kind}-{self.seed}-{self.counter}"

    # -- operations -------------------------------------------------------------------------

    def perform(self, op: str, args: dict[str, Any]) -> Any:
        answer = perform(self.ledger, op, args, agent_id=str(args.get("agent_id")))
        if op == "claim" and answer is not None:
            self.tokens[str(answer["task_id"])] = args["token"]
        return answer

    def invoke(self, op: str, args: dict[str, Any]) -> None:
        serial = self.serial
        self.serial += 1
        self.log({"kind": "invoke", "n": serial, "op": op, "args": args})
        try:
            value = self.perform(op, args)
        except LedgerError as refused:
            self.log({"kind": "fail", "n": serial, "op": op, "args": args, "code": refused.code})
            return
        self.log({"kind": "ok", "n": serial, "op": op, "args": args, "value": value})

    def choose(self) -> tuple[str, dict[str, Any]] | None:
        rng = self.rng
        queued = self.ledger.list_tasks("QUEUED", limit=50)
        claimed = [t["task_id"] for t in self.ledger.list_tasks("CLAIMED", limit=50)]
        submitted = [t["task_id"] for t in self.ledger.list_tasks("SUBMITTED", limit=50)]
        weights = {
            "create": 3 if len(queued) < 12 else 0.3,
            "claim": 3,
            "heartbeat": 2,
            "submit": 2.5,
            "verify": 2.5,
            "cancel": 0.4,
            "expire": 1,
            "jump": 1.5,
        }
        op = rng.choices(list(weights), weights=list(weights.values()))[0]
        if op == "jump":
            self.clock.offset += rng.randint(1, 3)
            return None
        if op == "create":
            task_id = self.name("t")
            task = {
                "task_id": task_id,
                "goal": "g",
                "instructions": "i" * rng.randint(1, 2000),
                "priority": rng.randint(0, 3),
                "max_attempts": rng.randint(1, 3),
            }
            return op, {"task": task, "key": self.name("create")}
        if op == "claim":
            return op, {
                "agent_id": rng.choice(AGENTS),
                "lease_seconds": rng.randint(1, 3),
                "key": self.name("claim"),
                "token": f"token-{self.name('lease')}-{rng.getrandbits(64):016x}",
            }
        if op in ("heartbeat", "submit"):
            held = [task_id for task_id in claimed if task_id in self.tokens]
            pool = held if held and rng.random() < 0.85 else list(self.tokens)
            if not pool:
                return None
            task_id = rng.choice(pool)
            args: dict[str, Any] = {"task_id": task_id, "token": self.tokens[task_id]}
            if op == "heartbeat":
                return op, {**args, "lease_seconds": rng.randint(1, 3)}
            result = {"status": "SUCCEEDED", "summary": f"done {rng.getrandbits(32)}"}
            return op, {**args, "key": self.name("submit"), "result": result}
        if op == "verify":
            if not submitted:
                return None
            decision = rng.choice(["SUCCEEDED", "NEEDS_REWORK", "NEEDS_REWORK", "FAILED"])
            return op, {
                "task_id": rng.choice(submitted),
                "decision": decision,
                "key": self.name("verify"),
            }
        if op == "cancel":
            open_tasks = [t["task_id"] for t in queued] + claimed + submitted
            if not open_tasks:
                return None
            return op, {"task_id": rng.choice(open_tasks), "key": self.name("cancel")}
        return "expire", {}

    def pending(self) -> dict[str, Any] | None:
        """The operation in flight when the previous writer died, if it had a key."""
        completed = {record["n"] for record in self.records if record["kind"] != "invoke"}
        invoked = [record for record in self.records if record["kind"] == "invoke"]
        if not invoked or invoked[-1]["n"] in completed:
            return None
        last = invoked[-1]
        has_key = "key" in last["args"]
        return last if has_key else None

    def run(self, max_ops: int | None) -> None:
        announced = False
        done = 0
        pending = self.pending()
        if pending is not None:
            self.invoke(pending["op"], pending["args"])
        while max_ops is None or done < max_ops:
            chosen = self.choose()
            if chosen is None:
                continue
            self.invoke(*chosen)
            done += 1
            if not announced:
                sys.stdout.write("ready\n")
                sys.stdout.flush()
                announced = True
        self.ledger.close()


def main(argv: list[str]) -> int:
    db, log, seed = argv[1], argv[2], int(argv[3])
    max_ops = int(argv[4]) if len(argv) > 4 else None
    Writer(db, log, seed).run(max_ops)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv))
