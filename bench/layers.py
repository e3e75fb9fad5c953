"""Part 7: what the ledger's layers cost, measured on one transition (a heartbeat).

Part 1 misses its ratio, and its split puts the gap in the Python around the statements. This
part tells the work a heartbeat must do from the way the ledger is built around it. Three
programs heartbeat claimed tasks, each on its own file, interleaved:

- ledger: `TaskLedger.heartbeat`.
- flat: the same heartbeat written as one function over the same core work: the same checks
  (identifier, token pattern and sha256, lease range, status, expiry) and the same rows (the
  compare-and-swap, the event with its canonical payload, its seal). What it leaves out is the
  building: no request record or field table, no `TaskState`, no decision plan of `SqlWrite`
  and `EventAppend` records to apply, no transaction and statement wrappers, no busy retries.
  Its file's log is verified with the ledger's own verifier after the run, so its seals are
  the ledger's.
- raw: part 1's raw heartbeat: the same statements with payloads of the same sizes.

A second pass times each program's statements inside apsw's `execute`, as part 1's split does.
"""

from __future__ import annotations

import functools
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, cast

import apsw
from aios_ledger.core import EventRow, LedgerError, TaskRow, Timestamp, chain_of, lease_token_sha256
from aios_ledger.core.jsonvalue import encode_checked
from aios_ledger.core.kinds import IDENTIFIER
from aios_ledger.core.log import GENESIS_SEAL
from aios_ledger.core.log.merkle import MerkleTreeRow, append_writes
from aios_ledger.core.log.records import SEAL_VERSION_5
from aios_ledger.core.log.rows import TASKS, chained_row_digest
from aios_ledger.core.log.seals import ChainedRow, seal_of_stored
from aios_ledger.core.tasks import TaskOperation, next_task_status
from aios_ledger.core.tasks.requests import LEASE_TOKEN, MAX_LEASE_SECONDS
from aios_ledger.shell import TaskLedger
from aios_ledger.shell.actors import current_actor
from aios_ledger.shell.clock import Clock, read_clock, system_clock
from aios_ledger.shell.db.engines.sqlite import SqliteConnection, SqliteDatabase
from aios_ledger.shell.db.statements import sql
from aios_ledger.shell.log.verification import verify_log

from .harness import Size, figure, interleaved_values, paired_ratio, sized, summary
from .transitions import CAPABILITIES, TASK_FIELDS, Attachable, RawLoop, timed_statements

LEASE_SECONDS = 3600
_GET, _NEXT_ID, _TIP, _TREE, _CAS, _EVENT, _SEAL = (
    sql(name)
    for name in (
        "get_task",
        "log_next_event_id",
        "chain_tip",
        "merkle_tree_for_update",
        "tasks_cas_update",
        "insert_event",
        "insert_seal",
    )
)
_BEGIN, _COMMIT, _ROLLBACK = sql("begin_immediate"), sql("commit"), sql("rollback")


def flat_heartbeat(
    conn: apsw.Connection,
    task_id: object,
    lease_token: object,
    lease_seconds: object,
    *,
    clock: Clock = system_clock,
) -> dict[str, Any]:
    """`TaskLedger.heartbeat` as one function: the same checks in the same order, the same rows
    and the same answer (tests/test_bench_layers.py holds it to that)."""
    if not isinstance(task_id, str) or not IDENTIFIER.fullmatch(task_id):
        raise LedgerError("FIELDS_INVALID", "heartbeat.task_id is not an identifier")
    if not isinstance(lease_token, str) or not LEASE_TOKEN.fullmatch(lease_token):
        raise LedgerError("FIELDS_INVALID", "heartbeat.lease_token is not a lease token")
    if (
        isinstance(lease_seconds, bool)
        or not isinstance(lease_seconds, int)
        or not 1 <= lease_seconds <= MAX_LEASE_SECONDS
    ):
        raise LedgerError("FIELDS_INVALID", "heartbeat.lease_seconds is out of range")
    now = read_clock(clock)
    conn.execute(_BEGIN)
    try:
        answer = _flat_heartbeat_step(conn, task_id, lease_token, lease_seconds, now)
        conn.execute(_COMMIT)
    except BaseException:
        conn.execute(_ROLLBACK)
        raise
    return answer


def _flat_heartbeat_step(
    conn: apsw.Connection, task_id: str, lease_token: str, lease_seconds: int, now: Timestamp
) -> dict[str, Any]:
    row = conn.execute(_GET, {"task_id": task_id}).fetchone()
    if row is None:
        raise LedgerError("TASK_NOT_FOUND", f"no task {task_id!r}")
    task = TaskRow(*row)
    if task.lease_token_hash is None or task.lease_token_hash != lease_token_sha256(lease_token):
        raise LedgerError("LEASE_INVALID", f"the token does not hold the lease of {task_id!r}")
    expires = task.lease_expires_at
    if expires is None or Timestamp.parse(expires) <= now:
        raise LedgerError("LEASE_EXPIRED", f"the lease of task {task_id!r} expired at {expires}")
    next_status = next_task_status(task.status, TaskOperation.HEARTBEAT)
    new_expiry = now.plus_seconds(lease_seconds).text
    next_id = conn.execute(_NEXT_ID).fetchone()
    assert next_id is not None
    event_id = next_id[0]
    chain = chain_of(task_id)
    tip = conn.execute(_TIP, {"chain": chain}).fetchone()
    chain_seq, prev_seal = (1, GENESIS_SEAL) if tip is None else (tip[1] + 1, tip[2])
    tree_row = conn.execute(_TREE).fetchone()
    assert tree_row is not None
    tree = MerkleTreeRow(*tree_row)
    conn.execute(
        _CAS,
        {
            "task_id": task_id,
            "expected_revision": task.revision,
            "status": next_status,
            "attempt": task.attempt,
            "max_attempts": task.max_attempts,
            "not_before": task.not_before,
            "claimed_by": task.claimed_by,
            "lease_token_hash": task.lease_token_hash,
            "lease_expires_at": new_expiry,
            "result_json": task.result_json,
            "result_digest": task.result_digest,
            "result_idempotency_key": task.result_idempotency_key,
            "verification_json": task.verification_json,
            "updated_at": now.text,
        },
    )
    if conn.changes() != 1:
        raise LedgerError("REVISION_CONFLICT", "tasks_cas_update changed no row")
    payload = encode_checked({"attempt": task.attempt, "lease_expires_at": new_expiry})
    after = task._replace(
        status=next_status,
        lease_expires_at=new_expiry,
        revision=task.revision + 1,
        updated_at=now.text,
    )
    # A v5 seal: what changed of the row, chained on the tip's digest (every column after none).
    previous = None if tip is None else tip[3]
    changes = after.written(task).changes(full=previous is None)
    chained = ChainedRow(changes, chained_row_digest(previous, TASKS, task_id, changes))
    actor = current_actor().stored()
    conn.execute(
        _EVENT,
        {
            "event_id": event_id,
            "task_id": task_id,
            "agent_id": task.claimed_by,
            "event_type": "TASK_HEARTBEAT",
            "payload_json": payload,
            "created_at": now.text,
            "actor": actor,
        },
    )
    seal = seal_of_stored(
        EventRow(
            event_id=event_id,
            task_id=task_id,
            agent_id=task.claimed_by,
            event_type="TASK_HEARTBEAT",
            payload_json=payload,
            created_at=now.text,
            actor=actor,
        ),
        chain_seq,
        prev_seal,
        (),
        chained=chained,
    )
    conn.execute(
        _SEAL,
        {
            "event_id": event_id,
            "chain": chain,
            "chain_seq": chain_seq,
            "prev_seal": prev_seal,
            "seal": seal,
            "sealed_at_adoption": 0,
            "seal_version": SEAL_VERSION_5,
            "row_changes": chained.changes,
            "chained_row_digest": chained.digest,
        },
    )
    # Its Merkle leaf, the subtrees it completes and the tree's head row moved on.
    leaves, _ = append_writes(tree, [(event_id, seal)])
    for write in leaves:
        conn.execute(sql(str(write.statement.value)), dict(write.params))
        if write.statement.guarded and conn.changes() != 1:
            raise LedgerError("REVISION_CONFLICT", f"{write.statement.value} changed no row")
    return {
        "task_id": task_id,
        "status": next_status,
        "revision": task.revision + 1,
        "attempt": task.attempt,
        "max_attempts": task.max_attempts,
        "claimed_by": task.claimed_by,
        "lease_expires_at": new_expiry,
        "idempotent": False,
    }


class Claimed:
    """A file of tasks claimed through the ledger's API, with their lease tokens."""

    def __init__(self, path: Path, synchronous: str, tasks: int) -> None:
        self.ledger = TaskLedger(path, synchronous=synchronous)
        self.database = cast(SqliteDatabase, self.ledger.database)
        self.leases: list[tuple[str, str]] = []
        for n in range(tasks):
            self.ledger.create_task(TASK_FIELDS, idempotency_key=f"create-{n}")
            claim = self.ledger.claim(
                agent_id="agent-1", capabilities=CAPABILITIES, lease_seconds=LEASE_SECONDS
            )
            assert claim is not None
            self.leases.append((claim["task_id"], claim["lease_token"]))

    def attach(self, conn: SqliteConnection) -> None:
        """Send every statement through `conn` (the timed pass)."""
        self.database.conn = conn

    def close(self) -> None:
        self.ledger.close()


def _ledger_round(claimed: Claimed) -> None:
    for task_id, token in claimed.leases:
        claimed.ledger.heartbeat(task_id, lease_token=token, lease_seconds=LEASE_SECONDS)


def _flat_round(claimed: Claimed) -> None:
    conn = claimed.database.conn
    for task_id, token in claimed.leases:
        flat_heartbeat(conn, task_id, token, LEASE_SECONDS)


def _raw_round(raw: RawLoop, claimed: Claimed) -> None:
    for task_id, _ in claimed.leases:
        raw.heartbeat(task_id)


def _per_heartbeat_us(round_: Callable[[], None], count: int) -> float:
    start = time.perf_counter()
    round_()
    return (time.perf_counter() - start) / count * 1e6


def _sql_us(loop: Attachable, round_: Callable[[], None], count: int) -> Callable[[], float]:
    """µs per heartbeat inside apsw's `execute`: one round on a timed connection."""

    def measure() -> float:
        with timed_statements(loop) as timed:
            round_()
        return timed.seconds / count * 1e6

    return measure


def _verified(claimed: Claimed) -> None:
    report = verify_log(claimed.database)
    if not report.intact:
        raise RuntimeError(f"the flat heartbeat's log does not verify: {report.public()}")


def run(scratch: Path, *, size: Size, reps: int) -> list[dict[str, Any]]:
    tasks = sized(size, full=400, quick=100, smoke=5)
    rows: list[dict[str, Any]] = []
    for level in ("NORMAL", "FULL"):
        ledger = Claimed(scratch / f"layers-ledger-{level}.db", level, tasks)
        flat = Claimed(scratch / f"layers-flat-{level}.db", level, tasks)
        raw_file = Claimed(scratch / f"layers-raw-{level}.db", level, tasks)
        raw_file.close()
        raw = RawLoop(scratch / f"layers-raw-{level}.db", level)
        rounds: dict[str, Callable[[], None]] = {
            "ledger": functools.partial(_ledger_round, ledger),
            "flat": functools.partial(_flat_round, flat),
            "raw": functools.partial(_raw_round, raw, raw_file),
        }
        try:
            values = interleaved_values(
                {
                    side: functools.partial(_per_heartbeat_us, round_, tasks)
                    for side, round_ in rounds.items()
                },
                reps,
                warmup=True,
            )
            sql_us = interleaved_values(
                {
                    side: _sql_us(loop, rounds[side], tasks)
                    for side, loop in (("ledger", ledger), ("flat", flat), ("raw", raw))
                },
                reps,
            )
            _verified(flat)
        finally:
            ledger.close()
            flat.close()
            raw.close()
        rows += [
            figure(
                "7 layers",
                f"heartbeat {side} {level}",
                summary(values[side]),
                "µs",
                note=f"{tasks} heartbeats per repetition" if side == "ledger" else "",
            )
            for side in rounds
        ]
        rows += [
            figure(
                "7 layers",
                f"raw/{side} heartbeat {level}",
                paired_ratio(values["raw"], values[side]),
                "ratio",
                note="the flat heartbeat's log verified" if side == "flat" else "",
            )
            for side in ("ledger", "flat")
        ]
        rows += [
            figure(
                "7 layers",
                f"heartbeat {side} sql {level}",
                summary(sql_us[side]),
                "µs",
                note="inside apsw execute" if side == "ledger" else "",
            )
            for side in rounds
        ]
    return rows
