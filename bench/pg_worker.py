"""Part 9's worker: one process's share of whole lifecycles on PostgreSQL, one system at a time.

    python -m bench.pg_worker SYSTEM URL JOBS START PROCESS   # prints one JSON line
    python -m bench.pg_worker build URL TASKS                 # a queue for the claim latency
    python -m bench.pg_worker claims URL CLAIMS               # its p50 and p99

URL names the schema (`?search_path=`) the runner prepared; START is the wall-clock time at
which every process of a round begins (so that process start-up is not timed), and each
process reports when it finished. Systems:
- ledger: per job create_task, claim, submit_result, verify (four calls, four transactions);
- ledger-batched: the same through create_tasks, claim_many, submit_results, verify_results,
  BATCH jobs per call;
- raw, raw-pipelined: the ledger's own statements (PostgreSQL's texts, by name) for the same
  four transitions, with no core, in the ledger's transactions (the write lock shared, the task
  locked): the reads the ledger makes (the locked task or claim batch, the recorded answer, the
  chain's tip, the event ids drawn), the compare-and-swap, the event, its seal (a sha256 over
  the previous one; the task row's changes in its own row) and the idempotency row, one
  statement per round trip, or the writes of each transition in one pipeline as the ledger
  sends them;
- procrastinate, procrastinate-batched: defer each job (or `batch_defer` them), then one
  worker runs them until the queue is empty (`wait=False`);
- pgqueuer-psycopg, pgqueuer-asyncpg: enqueue each job, then drain the queue in batches of 10.
"""

from __future__ import annotations

import asyncio
import hashlib
import importlib
import json
import sys
import time
from typing import Any

BATCH = 100


# Who the raw loops' events name, as the ledger's events name theirs.
ACTOR = '{"name":"w","roles":[],"via":"library"}'  # Actor("w", "library").stored()


def _wait(start: float) -> None:
    time.sleep(max(0.0, start - time.time()))


def ledger(url: str, jobs: int, start: float, process: str) -> None:
    from aios_ledger.shell import TaskLedger

    with TaskLedger(url) as store:
        _wait(start)
        for n in range(jobs):
            lifecycle(store, n, process)


def lifecycle(store: Any, n: int, process: str) -> None:
    """Job `n` of `process` through create_task, claim, submit_result and verify."""
    store.create_task(
        {"goal": "g", "instructions": "run", "success_criteria": ["ok"]},
        idempotency_key=f"create-{process}-{n}",
    )
    # Beside other processes the queue's unlocked tasks may all be taken at the moment of a
    # claim (SKIP LOCKED answers "nothing" rather than waiting): ask again, as a worker polls.
    # Every process claims as many tasks as it created.
    claim = None
    while claim is None:
        claim = store.claim(agent_id=f"worker-{process}", capabilities=[], lease_seconds=60)
    store.submit_result(
        claim["task_id"],
        lease_token=claim["lease_token"],
        result={"summary": str(n)},
        idempotency_key=f"submit-{process}-{n}",
    )
    store.verify(
        claim["task_id"], decision="SUCCEEDED", reason="ok", idempotency_key=f"verify-{process}-{n}"
    )


def ledger_batched(url: str, jobs: int, start: float, process: str) -> None:
    from aios_ledger.shell import TaskLedger

    with TaskLedger(url) as store:
        _wait(start)
        for first in range(0, jobs, BATCH):
            count = min(BATCH, jobs - first)
            store.create_tasks(
                (
                    {"goal": "g", "instructions": "run", "success_criteria": ["ok"]},
                    f"create-{process}-{n}",
                )
                for n in range(first, first + count)
            )
            claims: list[Any] = []
            while len(claims) < count:
                claims += store.claim_many(
                    agent_id=f"worker-{process}",
                    capabilities=[],
                    lease_seconds=60,
                    limit=count - len(claims),
                )
            store.submit_results(
                [
                    {
                        "task_id": claim["task_id"],
                        "lease_token": claim["lease_token"],
                        "result": {"summary": "ok"},
                        "idempotency_key": f"submit-{process}-{claim['task_id']}",
                    }
                    for claim in claims
                ]
            )
            store.verify_results(
                [
                    {
                        "task_id": claim["task_id"],
                        "decision": "SUCCEEDED",
                        "reason": "ok",
                        "idempotency_key": f"verify-{process}-{claim['task_id']}",
                    }
                    for claim in claims
                ]
            )


class Raw:
    """The ledger's statements, by name, on one psycopg connection, without the core."""

    def __init__(self, url: str, pipelined: bool) -> None:
        import psycopg
        from aios_ledger.shell.db.engines.postgresql import TEXTS, PostgresTarget, configure

        from .harness import check_parameters

        self.check_parameters = check_parameters
        target = PostgresTarget.parse(url)
        self.conn = psycopg.connect(target.conninfo, **target.connect_options())
        configure(self.conn)
        self.texts = TEXTS
        self.pipelined = pipelined

    def one(self, name: str, params: dict[str, Any] | None = None) -> Any:
        cursor = self.conn.execute(self.texts[name], params)
        return cursor.fetchone() if cursor.description is not None else cursor.rowcount

    def writes(self, statements: list[tuple[str, dict[str, Any]]]) -> None:
        for name, params in statements:
            self.check_parameters(name, params)
        if not self.pipelined:
            for name, params in statements:
                self.one(name, params)
            return
        with self.conn.pipeline():
            for name, params in statements:
                self.conn.execute(self.texts[name], params)

    def transition(
        self, task_id: str, event_type: str, writes: list[tuple[str, dict[str, Any]]], now: str
    ) -> None:
        """The chain's tip, the event's id drawn, then the writes, the event and its seal."""
        tip = self.one("chain_tip", {"chain": f"task:{task_id}"})
        (event_id,) = self.one("log_reserve_event_ids", {"count": 1})
        seq, prev = (tip[1], tip[2]) if tip else (0, "")
        seal = hashlib.sha256(f"{prev}|{event_id}|{event_type}|{now}".encode()).hexdigest()
        self.writes(
            [
                *writes,
                (
                    "insert_event",
                    {
                        "event_id": event_id,
                        "task_id": task_id,
                        "agent_id": "w",
                        "event_type": event_type,
                        "payload_json": "{}",
                        "created_at": now,
                        "actor": ACTOR,
                    },
                ),
                (
                    "insert_seal",
                    {
                        "event_id": event_id,
                        "chain": f"task:{task_id}",
                        "chain_seq": seq + 1,
                        "prev_seal": prev,
                        "seal": seal,
                        "sealed_at_adoption": 0,
                        "seal_version": 5,
                        "row_changes": "{}",
                        "chained_row_digest": "sha256:" + seal,
                    },
                ),
            ]
        )

    def step(self, work: Any) -> None:
        # The BEGIN and the write lock shared, as the ledger's row-locked writes, in one round trip.
        self.conn.execute(self.texts["begin_read_committed"] + self.texts["writer_settings_shared"])
        work()
        self.one("commit")


def _task_row(task_id: str, seq: int, now: str) -> dict[str, Any]:
    return {
        "task_id": task_id,
        "goal": "g",
        "instructions": "run",
        "success_criteria_json": '["ok"]',
        "required_capabilities_json": "[]",
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
        "created_at": now,
        "updated_at": now,
        "verification_mode": "reviewer",
        "retry_base_seconds": 10,
        "retry_max_seconds": 3600,
        "not_before": None,
        "seq": seq,
        "awaiting_projection": 0,
    }


def _cas(task_id: str, revision: int, status: str, now: str, **fields: Any) -> dict[str, Any]:
    return {
        "task_id": task_id,
        "expected_revision": revision,
        "status": status,
        "attempt": 1,
        "max_attempts": 3,
        "not_before": None,
        "claimed_by": fields.get("claimed_by", "w"),
        "lease_token_hash": fields.get("lease_token_hash", "h"),
        "lease_expires_at": fields.get("lease_expires_at", "2099-01-01T00:00:00Z"),
        "result_json": fields.get("result_json"),
        "result_digest": fields.get("result_digest"),
        "result_idempotency_key": fields.get("result_idempotency_key"),
        "verification_json": fields.get("verification_json"),
        "updated_at": now,
    }


def _key(key: str, operation: str, task_id: str, now: str) -> tuple[str, dict[str, Any]]:
    return (
        "task_idempotency_insert",
        {
            "idempotency_key": key,
            "operation": operation,
            "subject": task_id,
            "request_sha256": hashlib.sha256(key.encode()).hexdigest(),
            "response_json": "{}",
            "created_at": now,
        },
    )


def raw(url: str, jobs: int, start: float, process: str, *, pipelined: bool) -> None:
    loop = Raw(url, pipelined)
    now = "2026-08-20T00:00:00.000Z"
    _wait(start)
    for n in range(jobs):
        task_id = f"raw-{process}-{n}"

        def create(task_id: str = task_id, n: int = n) -> None:
            loop.one("task_idempotency_get", {"idempotency_key": f"c-{task_id}"})
            (seq,) = loop.one("tasks_next_seq")
            row = _task_row(task_id, seq, now)
            key = _key(f"c-{task_id}", "create", task_id, now)
            loop.transition(task_id, "TASK_CREATED", [("tasks_insert", row), key], now)

        def claim(task_id: str = task_id) -> None:
            # The claim of a named task: a queue claim's SKIP LOCKED batch would lock another
            # process's task here, which that process then waits for.
            loop.one("tasks_expired_leases", {"now": now, "limit": 32})
            loop.one("get_task_for_update", {"task_id": task_id})
            write = ("tasks_cas_update", _cas(task_id, 1, "CLAIMED", now))
            loop.transition(task_id, "TASK_CLAIMED", [write], now)

        def submit(task_id: str = task_id) -> None:
            loop.one("get_task_for_update", {"task_id": task_id})
            loop.one("task_idempotency_get", {"idempotency_key": f"s-{task_id}"})
            cas = _cas(task_id, 2, "SUBMITTED", now, result_json="{}", result_digest="d")
            key = _key(f"s-{task_id}", "submit", task_id, now)
            loop.transition(task_id, "RESULT_SUBMITTED", [("tasks_cas_update", cas), key], now)

        def verify(task_id: str = task_id) -> None:
            loop.one("get_task_for_update", {"task_id": task_id})
            loop.one("task_idempotency_get", {"idempotency_key": f"v-{task_id}"})
            cas = _cas(task_id, 3, "SUCCEEDED", now, verification_json="{}")
            key = _key(f"v-{task_id}", "verify", task_id, now)
            loop.transition(task_id, "TASK_VERIFIED", [("tasks_cas_update", cas), key], now)

        for work in (create, claim, submit, verify):
            loop.step(work)
    loop.conn.close()


def procrastinate(url: str, jobs: int, start: float, batched: bool) -> None:
    from aios_ledger.shell.db.engines.postgresql import PostgresTarget

    proc: Any = importlib.import_module("procrastinate")  # the bench extra: untyped for mypy

    target = PostgresTarget.parse(url)
    connector = proc.PsycopgConnector(
        conninfo=target.conninfo, kwargs={"options": f"-c search_path={target.schema}"}
    )
    app = proc.App(connector=connector)

    @app.task(name="identity")  # type: ignore[untyped-decorator]
    def identity(n: int) -> int:
        return n

    with app.open():
        app.schema_manager.apply_schema()
        _wait(start)
        if batched:
            for first in range(0, jobs, BATCH):
                identity.batch_defer(*({"n": n} for n in range(first, min(jobs, first + BATCH))))
        else:
            for n in range(jobs):
                identity.defer(n=n)
    app.run_worker(wait=False, concurrency=1, install_signal_handlers=False)


def pgqueuer(url: str, jobs: int, start: float, driver: str) -> None:
    asyncio.run(_pgqueuer(url, jobs, start, driver))


async def _pgqueuer(url: str, jobs: int, start: float, driver_name: str) -> None:
    import psycopg
    from aios_ledger.shell.db.engines.postgresql import PostgresTarget

    pgq: Any = importlib.import_module("pgqueuer")  # the bench extra: untyped for mypy
    pgq_db: Any = importlib.import_module("pgqueuer.db")
    pgq_queries: Any = importlib.import_module("pgqueuer.queries")
    pgq_types: Any = importlib.import_module("pgqueuer.types")
    target = PostgresTarget.parse(url)
    if driver_name == "asyncpg":
        asyncpg: Any = importlib.import_module("asyncpg")
        connection = await asyncpg.connect(
            target.conninfo, server_settings={"search_path": target.schema}
        )
        driver: Any = pgq_db.AsyncpgDriver(connection)
    else:
        aconn = await psycopg.AsyncConnection.connect(
            target.conninfo, autocommit=True, options=f"-c search_path={target.schema}"
        )
        driver = pgq_db.PsycopgDriver(aconn)
    queries = pgq_queries.Queries(driver)
    await queries.install()
    manager = pgq.QueueManager(queries)
    done = 0

    @manager.entrypoint("identity")  # type: ignore[untyped-decorator]
    async def identity(job: Any) -> None:
        nonlocal done
        done += 1

    _wait(start)
    for n in range(jobs):
        await queries.enqueue("identity", str(n).encode())
    await manager.run(batch_size=10, mode=pgq_types.QueueExecutionMode.drain)
    assert done == jobs, done


def build(url: str, tasks: int) -> None:
    """A queue of `tasks` QUEUED tasks, through create_tasks in transactions of 10,000."""
    from aios_ledger.shell import TaskLedger

    with TaskLedger(url) as store:
        for first in range(0, tasks, 10_000):
            store.create_tasks(
                (
                    {"goal": f"goal {n}", "instructions": "run", "priority": n % 3},
                    f"create-{n}",
                )
                for n in range(first, min(tasks, first + 10_000))
            )


def claims(url: str, count: int) -> dict[str, Any]:
    """`count` claims, one at a time, each timed (after one untimed claim)."""
    from aios_ledger.shell import TaskLedger

    from .harness import percentile

    latencies = []
    with TaskLedger(url) as store:
        store.claim(agent_id="warm", capabilities=[], lease_seconds=600)
        for _ in range(count):
            began = time.perf_counter()
            got = store.claim(agent_id="worker", capabilities=[], lease_seconds=600)
            latencies.append(time.perf_counter() - began)
            if got is None:
                raise RuntimeError("the queue ran dry")
    return {
        "p50_ms": percentile(latencies, 0.5) * 1000,
        "p99_ms": percentile(latencies, 0.99) * 1000,
    }


def main(argv: list[str]) -> int:
    if argv[0] == "build":
        build(argv[1], int(argv[2]))
        return 0
    if argv[0] == "claims":
        sys.stdout.write(json.dumps(claims(argv[1], int(argv[2]))) + "\n")
        return 0
    system, url, jobs_text, start_text, process = argv
    jobs, start = int(jobs_text), float(start_text)
    if system == "ledger":
        ledger(url, jobs, start, process)
    elif system == "ledger-batched":
        ledger_batched(url, jobs, start, process)
    elif system in ("raw", "raw-pipelined"):
        raw(url, jobs, start, process, pipelined=system == "raw-pipelined")
    elif system in ("procrastinate", "procrastinate-batched"):
        procrastinate(url, jobs, start, batched=system.endswith("batched"))
    elif system.startswith("pgqueuer-"):
        pgqueuer(url, jobs, start, system.removeprefix("pgqueuer-"))
    else:
        raise SystemExit(f"unknown system {system}")
    sys.stdout.write(json.dumps({"jobs": jobs, "start": start, "end": time.time()}) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
