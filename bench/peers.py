"""Part 2's worker: one repetition of whole lifecycles of one system, in a fresh process.

    python -m bench.peers SYSTEM LEVEL JOBS PATH     # prints one JSON line

SYSTEM is `ledger`, `ledger-batched`, `huey` or `dbos`; LEVEL the synchronous level (NORMAL
or FULL) every connection of that system uses, in WAL mode, so that durability is matched.
Each run starts on a fresh file and times only the work (not the import or the schema set-up):
- ledger: `create_tasks` of all jobs in one transaction, then per job claim, submit, verify;
- ledger-batched: the same, with `claim_many`, `submit_results` and `verify_results` taking
  LEDGER_BATCH jobs per transaction;
- huey (SqliteHuey's storage): enqueue each job, dequeue and execute it (the result is
  stored), read the result back;
- dbos (DBOS Transact, SQLite system database): enqueue a trivial workflow per job on a queue
  and wait for every result. DBOS's own SQLite engine leaves the journal mode at SQLite's
  default (a rollback journal) and the synchronous level at FULL; here it is given an engine
  whose connections use WAL and LEVEL, like the others, with DBOS's own connection settings
  (IMMEDIATE transactions, busy timeout, foreign keys).
Transactions are counted where the system lets us: the ledger and Huey by construction, DBOS
by SQLAlchemy's commit events (reads included).
"""

from __future__ import annotations

import importlib
import json
import sys
import time
from pathlib import Path
from typing import Any

LEDGER_BATCH = 100
DBOS_POLL_SECONDS = 0.01


def _identity(n: int) -> int:
    """The trivial job of the peers: its result is its argument."""
    return n


def ledger(level: str, jobs: int, path: Path) -> dict[str, Any]:
    from aios_ledger.shell import TaskLedger

    with TaskLedger(path, synchronous=level) as store:
        start = time.perf_counter()
        store.create_tasks(
            ({"goal": "g", "instructions": "run", "success_criteria": ["ok"]}, f"create-{n}")
            for n in range(jobs)
        )
        for n in range(jobs):
            claim = store.claim(agent_id="worker", capabilities=[], lease_seconds=60)
            assert claim is not None
            store.submit_result(
                claim["task_id"],
                lease_token=claim["lease_token"],
                result={"summary": str(n)},
                idempotency_key=f"submit-{n}",
            )
            store.verify(
                claim["task_id"], decision="SUCCEEDED", reason="ok", idempotency_key=f"verify-{n}"
            )
        elapsed = time.perf_counter() - start
    return {"seconds": elapsed, "jobs": jobs, "write_transactions": 1 + 3 * jobs}


def ledger_batched(level: str, jobs: int, path: Path) -> dict[str, Any]:
    """The same lifecycles through the batch calls: a worker with LEDGER_BATCH free slots
    claims that many tasks in one transaction, submits their results in one, and a reviewer
    verifies them in one. Every task still gets its own lease, events, seals and keys."""
    from aios_ledger.shell import TaskLedger

    with TaskLedger(path, synchronous=level) as store:
        start = time.perf_counter()
        store.create_tasks(
            ({"goal": "g", "instructions": "run", "success_criteria": ["ok"]}, f"create-{n}")
            for n in range(jobs)
        )
        transactions, done = 1, 0
        while done < jobs:
            claims = store.claim_many(
                agent_id="worker", capabilities=[], lease_seconds=60, limit=LEDGER_BATCH
            )
            if not claims:
                raise RuntimeError("nothing to claim")
            store.submit_results(
                {
                    "task_id": claim["task_id"],
                    "lease_token": claim["lease_token"],
                    "result": {"summary": str(done + index)},
                    "idempotency_key": f"submit-{done + index}",
                }
                for index, claim in enumerate(claims)
            )
            store.verify_results(
                {
                    "task_id": claim["task_id"],
                    "decision": "SUCCEEDED",
                    "reason": "ok",
                    "idempotency_key": f"verify-{done + index}",
                }
                for index, claim in enumerate(claims)
            )
            transactions += 3
            done += len(claims)
        elapsed = time.perf_counter() - start
    return {"seconds": elapsed, "jobs": jobs, "write_transactions": transactions}


def huey(level: str, jobs: int, path: Path) -> dict[str, Any]:
    huey_module: Any = importlib.import_module("huey")
    storage_module: Any = importlib.import_module("huey.storage")

    class MatchedSqliteStorage(storage_module.SqliteStorage):  # type: ignore[misc]
        def _create_connection(self) -> Any:
            conn = super()._create_connection()
            conn.execute(f"pragma synchronous={level}")
            return conn

    queue = huey_module.Huey(
        "bench", storage_class=MatchedSqliteStorage, filename=str(path), journal_mode="wal"
    )

    trivial = queue.task()(_identity)

    start = time.perf_counter()
    results = [trivial(n) for n in range(jobs)]
    while True:
        task = queue.dequeue()
        if task is None:
            break
        queue.execute(task)
    for n, result in enumerate(results):
        if result.get() != n:
            raise RuntimeError("huey lost a result")
    elapsed = time.perf_counter() - start
    # enqueue, dequeue (select + delete), store the result, pop the result
    return {"seconds": elapsed, "jobs": jobs, "write_transactions": 4 * jobs}


def dbos(level: str, jobs: int, path: Path) -> dict[str, Any]:
    sa: Any = importlib.import_module("sqlalchemy")
    dbos_module: Any = importlib.import_module("dbos")
    engine = sa.create_engine(f"sqlite:///{path}")
    commits = [0]

    def on_connect(dbapi_conn: Any, _record: Any) -> None:
        dbapi_conn.isolation_level = "IMMEDIATE"
        dbapi_conn.execute("PRAGMA busy_timeout=30000")
        dbapi_conn.execute("PRAGMA foreign_keys=ON")
        dbapi_conn.execute("PRAGMA journal_mode=WAL")
        dbapi_conn.execute(f"PRAGMA synchronous={level}")

    def on_commit(_conn: Any) -> None:
        commits[0] += 1

    sa.event.listen(engine, "connect", on_connect)
    sa.event.listen(engine, "commit", on_commit)
    dbos_class = dbos_module.DBOS
    dbos_class(
        config={
            "name": "aios-bench",
            "system_database_engine": engine,
            "run_admin_server": False,
            "log_level": "WARNING",
        }
    )

    trivial = dbos_class.workflow()(_identity)

    dbos_class.launch()
    queue = dbos_class.register_queue("bench", polling_interval_sec=DBOS_POLL_SECONDS)
    try:
        before = commits[0]
        start = time.perf_counter()
        handles = [queue.enqueue(trivial, n) for n in range(jobs)]
        for n, handle in enumerate(handles):
            if handle.get_result() != n:
                raise RuntimeError("dbos lost a result")
        elapsed = time.perf_counter() - start
        transactions = commits[0] - before
    finally:
        dbos_class.destroy()
    return {"seconds": elapsed, "jobs": jobs, "transactions": transactions}


SYSTEMS = {"ledger": ledger, "ledger-batched": ledger_batched, "huey": huey, "dbos": dbos}


def main(argv: list[str]) -> int:
    system, level, jobs, path = argv
    result = SYSTEMS[system](level, int(jobs), Path(path))
    sys.stdout.write(json.dumps(result) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
