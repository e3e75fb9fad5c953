"""Part 1: single transitions of the ledger against raw apsw doing the same transaction shape.

Each task goes through create, claim, heartbeat, submit and verify, each one `BEGIN IMMEDIATE`
transaction with its sealed event. The raw baseline runs, on its own file with the same schema
and indexes, the very same named statements in the same order (the reads, the log's next event
id and chain tip, the guarded write whose change count is checked, the idempotency row, the
event, its v5 seal with the task row's changes and chained digest in it, and the other state
row the seal covers), with payloads of the same sizes, straight
through apsw: no request parsing, no decision records, no JSON work. It is what SQLite itself
can do with this transaction shape from Python.

A second pass per level splits each side's time per transition in two: inside apsw's `execute`
(binding and the first step, which is all of a write, a one-row read or the commit) and
everything around it. It runs after the timed repetitions, apart from them, because timing
every statement costs a little time of its own.
"""

from __future__ import annotations

import functools
import hashlib
import itertools
import time
import types
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Protocol, cast

import apsw
from aios_ledger.core import TaskRow
from aios_ledger.core.actors import Actor
from aios_ledger.core.log.merkle import MerkleTreeRow, append_writes
from aios_ledger.core.log.records import SEAL_VERSION_5
from aios_ledger.core.records import record_columns
from aios_ledger.shell import TaskLedger
from aios_ledger.shell.db.engines.sqlite import SqliteConnection, SqliteDatabase
from aios_ledger.shell.db.statements import sql
from aios_ledger.shell.tasks.ledger import TAKEOVER_BATCH, new_task_id

from .harness import (
    Size,
    check_parameters,
    figure,
    interleaved_values,
    paired_ratio,
    rate,
    recorded,
    sized,
    summary,
)

TRANSITIONS_PER_TASK = 5
NOW = "2026-11-29T20:00:00Z"
LATER = "2026-11-29T20:01:00Z"
TASK_FIELDS = {
    "goal": "g",
    "instructions": "do it",
    "success_criteria": ["ok"],
    "required_capabilities": ["python"],
}
CAPABILITIES = ["python"]
# The capabilities a claim offers, as the ledger binds them to its candidates' read.
OFFERED = '["python"]'
_REVISION = record_columns(TaskRow).index("revision")
_LEASE_TOKEN_HASH = record_columns(TaskRow).index("lease_token_hash")


# Who the raw loops' events name, as the ledger's events name theirs.
ACTOR = Actor("agent-1", "library").stored()


class LedgerLoop:
    """The ledger's own API, one task's whole lifecycle per iteration."""

    def __init__(self, path: Path, synchronous: str) -> None:
        self.ledger = TaskLedger(path, synchronous=synchronous)
        self.database = cast(SqliteDatabase, self.ledger.database)
        self.serial = itertools.count()

    def attach(self, conn: SqliteConnection) -> None:
        """Send every statement through `conn` (the split pass's timed connection)."""
        self.database.conn = conn

    def close(self) -> None:
        self.ledger.close()

    def lifecycle(self) -> None:
        ledger, n = self.ledger, next(self.serial)
        ledger.create_task(TASK_FIELDS, idempotency_key=f"create-{n}")
        claim = ledger.claim(agent_id="agent-1", capabilities=CAPABILITIES, lease_seconds=60)
        if claim is None:
            raise RuntimeError("nothing to claim")
        task_id, token = claim["task_id"], claim["lease_token"]
        ledger.heartbeat(task_id, lease_token=token, lease_seconds=60)
        ledger.submit_result(
            task_id, lease_token=token, result={"summary": "done"}, idempotency_key=f"submit-{n}"
        )
        ledger.verify(task_id, decision="SUCCEEDED", reason="fine", idempotency_key=f"verify-{n}")


def _pad(text: str, size: int) -> str:
    return (text + "x" * size)[:size]


RESPONSE = {"create": 166, "submit": 239, "verify": 287}
PAYLOAD = {
    "TASK_CREATED": 106,
    "TASK_CLAIMED": 55,
    "TASK_HEARTBEAT": 55,
    "RESULT_SUBMITTED": 120,
    "TASK_VERIFIED": 49,
}
# A v5 seal's task row changes (every column at the create), as long as the ledger's.
CHANGES = {
    "TASK_CREATED": 635,
    "TASK_CLAIMED": 240,
    "TASK_HEARTBEAT": 100,
    "RESULT_SUBMITTED": 294,
    "TASK_VERIFIED": 146,
}


class RawLoop:
    """The same statements in the same transactions, driven straight through apsw.

    Every statement is the ledger's own, by name (`sql`), read and written in the order the
    ledger's transitions issue them; each write binds exactly the parameters the statement
    registry (`core.statements.Statement`) declares for it, checked on its first use, and
    tests/test_bench_raw.py holds the whole sequence to the ledger's, statement by statement."""

    def __init__(self, path: Path, synchronous: str) -> None:
        # Database only migrates the file and sets the same pragmas; every transaction below
        # is issued by hand on its apsw connection.
        self.database = SqliteDatabase(path, synchronous=synchronous)
        self.conn = self.database.conn
        self.serial = itertools.count()
        self.next_seq = itertools.count(1)
        self._checked: set[str] = set()
        self._tree = MerkleTreeRow(0, b"", 0)
        # The head row once read: the ledger's one writer carries it from one transaction to
        # the next (inside `SqliteConnection`), and so does this loop, the file's one writer.
        self._tree_read = False

    def attach(self, conn: SqliteConnection) -> None:
        """Send every statement through `conn` (the split pass's timed connection)."""
        self.database.conn = self.conn = conn

    def close(self) -> None:
        self.database.close()

    def _one(self, name: str, params: dict[str, Any] | None = None) -> tuple[Any, ...] | None:
        for row in self.conn.execute(sql(name), params):
            return tuple(row)
        return None

    def _write(self, name: str, params: dict[str, Any]) -> None:
        if name not in self._checked:
            check_parameters(name, params)
            self._checked.add(name)
        self.conn.execute(sql(name), params)

    def _guarded(self, name: str, params: dict[str, Any]) -> None:
        self._write(name, params)
        if self.conn.changes() != 1:
            raise RuntimeError(f"{name} changed {self.conn.changes()} rows")

    def _next_event_id(self) -> int:
        """The id the next event gets, as the ledger reads it under the write lock."""
        found = self._one("log_next_event_id")
        assert found is not None
        return int(found[0])

    def _tip(self, task_id: str) -> tuple[str, int, str]:
        """The task's chain, the place the next event takes in it, and its last seal."""
        chain = "task:" + task_id
        tip = self._one("chain_tip", {"chain": chain})
        seq = 1 if tip is None else int(tip[1]) + 1
        prev = "0" * 64 if tip is None else str(tip[2])
        return chain, seq, prev

    def _lock_tree(self) -> None:
        """The Merkle tree's head row, read (and on PostgreSQL locked) once the decision's own
        reads are done, as the ledger's plan executor reads it before the plan's writes."""
        if self._tree_read:
            return
        row = self._one("merkle_tree_for_update")
        assert row is not None
        self._tree = MerkleTreeRow(*row)
        self._tree_read = True

    def _leaves(self, event_id: int, seal: str) -> None:
        """The event's Merkle leaf, the subtrees it completes and the head row moved on."""
        writes, self._tree = append_writes(self._tree, [(event_id, seal)])
        for write in writes:
            if write.statement.guarded:
                self._guarded(str(write.statement.value), dict(write.params))
            else:
                self._write(str(write.statement.value), dict(write.params))

    def _event(
        self,
        event_id: int,
        tip: tuple[str, int, str],
        task_id: str,
        event_type: str,
        rows: int = 1,
    ) -> None:
        """The event, its v5 seal (over, in its own row, the task row's changes and
        chained digest) and the other state rows it covers (`rows` counts the task's)."""
        chain, seq, prev = tip
        payload = _pad("{", PAYLOAD[event_type])
        self._write(
            "insert_event",
            {
                "event_id": event_id,
                "task_id": task_id,
                "agent_id": "agent-1",
                "event_type": event_type,
                "payload_json": payload,
                "created_at": NOW,
                "actor": ACTOR,
            },
        )
        row_digest = hashlib.sha256(f"tasks\0{task_id}\0{event_type}".encode()).hexdigest()
        changes = _pad("{", CHANGES[event_type])
        chained = hashlib.sha256(f"{prev}\0{changes}".encode()).hexdigest()
        seal = (
            "sha256:"
            + hashlib.sha256(
                f"{prev}\0{event_id}\0{event_type}\0{payload}\0{chained}\0{changes}".encode()
            ).hexdigest()
        )
        self._write(
            "insert_seal",
            {
                "event_id": event_id,
                "chain": chain,
                "chain_seq": seq,
                "prev_seal": prev,
                "seal": seal,
                "sealed_at_adoption": 0,
                "seal_version": SEAL_VERSION_5,
                "row_changes": changes,
                "chained_row_digest": chained,
            },
        )
        # Besides the task's row (in the seal's own), a keyed transition's recorded answer or a
        # claim's evidence run, as the ledger's seals cover them.
        for position in range(1, rows):
            self._write(
                "insert_sealed_row",
                {
                    "event_id": event_id,
                    "position": position,
                    "row_table": "tasks",
                    "row_key": task_id,
                    "row_digest": row_digest,
                },
            )
        self._leaves(event_id, seal)

    def _idempotency(self, key: str) -> None:
        """The recorded-answer lookup every keyed transition makes (none exists here)."""
        if self._one("task_idempotency_get", {"idempotency_key": key}) is not None:
            raise RuntimeError("key reused")

    def _ledger_row(self, key: str, operation: str, task_id: str) -> None:
        self._write(
            "task_idempotency_insert",
            {
                "idempotency_key": key,
                "operation": operation,
                "subject": task_id,
                "request_sha256": hashlib.sha256(key.encode()).hexdigest(),
                "response_json": _pad("{", RESPONSE[operation]),
                "created_at": NOW,
            },
        )

    def _tx(self, work: Callable[[], None]) -> None:
        self.conn.execute(sql("begin_immediate"))
        try:
            work()
            self.conn.execute(sql("commit"))
        except BaseException:
            self.conn.execute(sql("rollback"))
            raise

    def _cas(self, task_id: str, status: str, revision: int, **changes: Any) -> None:
        params: dict[str, Any] = {
            "task_id": task_id,
            "status": status,
            "attempt": 1,
            "max_attempts": 3,
            "not_before": None,
            "claimed_by": "agent-1",
            "lease_token_hash": "h" * 64,
            "lease_expires_at": LATER,
            "result_json": None,
            "result_digest": None,
            "result_idempotency_key": None,
            "verification_json": None,
            "updated_at": NOW,
            "expected_revision": revision,
        }
        params.update(changes)
        self._guarded("tasks_cas_update", params)

    def heartbeat(self, task_id: str) -> None:
        """One heartbeat transaction on a task the ledger's API claimed (part 7's raw side)."""
        self._tx(lambda: self._heartbeat(task_id))

    def _heartbeat(self, task_id: str) -> None:
        row = self._one("get_task", {"task_id": task_id})
        if row is None:
            raise RuntimeError(f"no task {task_id}")
        tip = self._tip(task_id)
        event_id = self._next_event_id()
        self._lock_tree()
        # The row's own revision and token hash, so that the ledger's checks still hold after it.
        self._cas(task_id, "CLAIMED", int(row[_REVISION]), lease_token_hash=row[_LEASE_TOKEN_HASH])
        self._event(event_id, tip, task_id, "TASK_HEARTBEAT")

    def lifecycle(self) -> None:
        n = next(self.serial)
        # Random like the ledger's own ids, so that both insert at random places in the same
        # indexes (sequential ids would only ever append at the right edge of each B-tree).
        task_id = new_task_id()

        def create() -> None:
            key = f"create-{n}"
            self._one("tasks_next_seq")
            self._one("get_task", {"task_id": task_id})
            tip = self._tip(task_id)
            self._idempotency(key)
            event_id = self._next_event_id()
            self._lock_tree()
            self._write(
                "tasks_insert",
                {
                    "task_id": task_id,
                    "goal": "g",
                    "instructions": "do it",
                    "success_criteria_json": '["ok"]',
                    "required_capabilities_json": '["python"]',
                    "constraints_json": "{}",
                    "metadata_json": "{}",
                    "deadline": None,
                    "priority": 0,
                    "max_attempts": 3,
                    "attempt": 0,
                    "status": "QUEUED",
                    "claimed_by": None,
                    "lease_token_hash": None,
                    "lease_expires_at": None,
                    "result_json": None,
                    "result_digest": None,
                    "result_idempotency_key": None,
                    "verification_json": None,
                    "revision": 1,
                    "created_at": NOW,
                    "updated_at": NOW,
                    "verification_mode": "reviewer",
                    "retry_base_seconds": 10,
                    "retry_max_seconds": 3600,
                    "not_before": None,
                    "seq": next(self.next_seq),
                    "awaiting_projection": 0,
                },
            )
            self._ledger_row(key, "create", task_id)
            self._event(event_id, tip, task_id, "TASK_CREATED", rows=2)

        def claim() -> None:
            # As the ledger's claim: first the passed leases it would take over (none here).
            self._one("tasks_expired_leases", {"now": NOW, "limit": TAKEOVER_BATCH})
            row = self._one(
                "tasks_claim_candidates", {"now": NOW, "limit": 1, "offered_json": OFFERED}
            )
            assert row is not None and row[0] == task_id
            event_id = self._next_event_id()
            tip = self._tip(task_id)
            self._lock_tree()
            self._cas(task_id, "CLAIMED", 1)
            self._write(
                "insert_attempt_run",
                {
                    "run_id": f"{task_id}@1",
                    "session_id": f"task:{task_id}",
                    "prompt": "attempt 1",
                    "created_at": NOW,
                },
            )
            self._event(event_id, tip, task_id, "TASK_CLAIMED", rows=2)

        def heartbeat() -> None:
            self._heartbeat(task_id)

        def submit() -> None:
            key = f"submit-{n}"
            self._one("get_task", {"task_id": task_id})
            tip = self._tip(task_id)
            self._idempotency(key)
            # The attempt's proposal, which a governed task's result must match (none here),
            # read with the task (on PostgreSQL in the same round trip).
            self._one("get_task_proposal_of_current_attempt", {"task_id": task_id})
            event_id = self._next_event_id()
            self._lock_tree()
            self._cas(
                task_id,
                "SUBMITTED",
                3,
                lease_token_hash=None,
                lease_expires_at=None,
                result_json=_pad("{", 18),
                result_digest="d" * 64,
                result_idempotency_key=key,
            )
            self._ledger_row(key, "submit", task_id)
            self._event(event_id, tip, task_id, "RESULT_SUBMITTED", rows=2)

        def verify() -> None:
            key = f"verify-{n}"
            self._one("get_task", {"task_id": task_id})
            tip = self._tip(task_id)
            self._idempotency(key)
            event_id = self._next_event_id()
            self._lock_tree()
            self._cas(
                task_id,
                "SUCCEEDED",
                4,
                lease_token_hash=None,
                lease_expires_at=None,
                result_json=_pad("{", 18),
                result_digest="d" * 64,
                result_idempotency_key=f"submit-{n}",
                verification_json=_pad("{", 40),
            )
            self._ledger_row(key, "verify", task_id)
            self._event(event_id, tip, task_id, "TASK_VERIFIED", rows=2)

        for step in (create, claim, heartbeat, submit, verify):
            self._tx(step)


def transitions_per_second(loop: LedgerLoop | RawLoop, tasks: int) -> float:
    start = time.perf_counter()
    for _ in range(tasks):
        loop.lifecycle()
    return rate(tasks * TRANSITIONS_PER_TASK, time.perf_counter() - start)


class TimedConnection:
    """An apsw connection whose `execute` calls add up their time. A statement's work happens
    inside `execute` up to its first row, which is all of a write, a one-row read or a commit."""

    def __init__(self, conn: apsw.Connection) -> None:
        self._conn = conn
        self.seconds = 0.0

    def execute(self, statements: str, bindings: Any = None) -> apsw.Cursor:
        start = time.perf_counter()
        try:
            return self._conn.execute(statements, bindings)
        finally:
            self.seconds += time.perf_counter() - start

    def __getattr__(self, name: str) -> Any:
        # The engine's own methods (`fetch_record`, `run_plan`, ...) run bound to this wrapper,
        # so that the statements they issue go through the timed `execute`; apsw's own
        # attributes are the connection's.
        method = getattr(type(self._conn), name, None)
        if isinstance(method, types.FunctionType):
            return types.MethodType(method, self)
        return getattr(self._conn, name)


class Attachable(Protocol):
    """A program whose statements all go through `database.conn`, which `attach` replaces."""

    @property
    def database(self) -> SqliteDatabase: ...

    def attach(self, conn: SqliteConnection) -> None: ...


@contextmanager
def timed_statements(loop: Attachable) -> Iterator[TimedConnection]:
    """Send the program's statements through a `TimedConnection` for the `with` block."""
    real = loop.database.conn
    timed = TimedConnection(real)
    loop.attach(cast(SqliteConnection, timed))
    try:
        yield timed
    finally:
        loop.attach(real)


def split_per_transition(loop: LedgerLoop | RawLoop, tasks: int) -> dict[str, float]:
    """µs per transition inside apsw's `execute` ("sql") and around it ("python")."""
    with timed_statements(loop) as timed:
        per_second = transitions_per_second(loop, tasks)
    sql_us = timed.seconds / (tasks * TRANSITIONS_PER_TASK) * 1e6
    return {"sql": sql_us, "python": 1e6 / per_second - sql_us}


def run(scratch: Path, *, size: Size, reps: int) -> list[dict[str, Any]]:
    tasks = sized(size, full=400, quick=100, smoke=5)
    rows: list[dict[str, Any]] = []
    for level in ("NORMAL", "FULL"):
        ledger = LedgerLoop(scratch / f"transitions-ledger-{level}.db", level)
        raw = RawLoop(scratch / f"transitions-raw-{level}.db", level)
        splits: dict[str, list[dict[str, Any]]] = {"ledger": [], "raw": []}
        try:
            values = interleaved_values(
                {
                    "ledger": functools.partial(transitions_per_second, ledger, tasks),
                    "raw": functools.partial(transitions_per_second, raw, tasks),
                },
                reps,
                warmup=True,
            )
            interleaved_values(
                {
                    side: recorded(
                        functools.partial(split_per_transition, loop, tasks),
                        splits[side],
                        lambda split: float(split["sql"]),
                    )
                    for side, loop in (("ledger", ledger), ("raw", raw))
                },
                reps,
            )
        finally:
            ledger.close()
            raw.close()
        # A report, not a target: the write path DESIGN.md lays down (request record, decision,
        # plan, executor) stays, and its per-transition targets against raw SQLite are retired.
        ratio = paired_ratio(values["ledger"], values["raw"])
        rows += [
            figure("1 transitions", f"ledger {level}", summary(values["ledger"]), "trans/s"),
            figure("1 transitions", f"raw apsw {level}", summary(values["raw"]), "trans/s"),
            figure(
                "1 transitions",
                f"ledger/raw {level}",
                ratio,
                "ratio",
                note=f"{tasks} tasks x 5 transitions per repetition",
            ),
        ]
        rows += [
            figure(
                "1 transitions",
                f"{side} {part} {level}",
                summary([split[part] for split in splits[side]]),
                "µs/trans",
                note=(
                    "inside apsw execute: statements to their first row, commit"
                    if part == "sql"
                    else "the rest: around the statements"
                ),
            )
            for part in ("sql", "python")
            for side in ("ledger", "raw")
        ]
    return rows
