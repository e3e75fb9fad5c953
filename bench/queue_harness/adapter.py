"""The ledger as a system under test of the portable PostgreSQL queue benchmark.

    DATABASE_URL=postgres://... python -m bench.queue_harness.adapter

The benchmark (github.com/hardbyte/postgresql-job-queue-benchmarking, CONTRIBUTING_ADAPTERS.md)
runs one long-lived process per replica: it reads its settings from the environment, takes
`ENQUEUE <n>` lines on stdin (the harness paces the producer), and writes JSON lines on stdout:
one descriptor at start, then every SAMPLE_EVERY_S seconds one record per metric. Its job queue
is the ledger, through the library as the benchmark's Python adapters use theirs:
- enqueue: `create_tasks`, the n tasks of a token in one transaction, each carrying the wall
  time it was enqueued at (in its instructions, which a claim hands back);
- claim: `claim_many`, by WORKER_COUNT slots shared between a few claiming threads (the
  library is synchronous; its PostgreSQL pool serves them);
- complete: the synthetic work (JOB_WORK_MS), then `submit_results` and `verify_results` (the
  task ends SUCCEEDED), one transaction each per claimed batch.
A killed replica's leases lapse after LEASE_SECONDS and the next claim takes them over (a task
gets MAX_ATTEMPTS claims before a lapse would fail it); a result its worker submitted but did not
live to verify is verified by any replica's reviewer once it has waited as long as a lease.
"""

from __future__ import annotations

import datetime as dt
import json
import math
import os
import signal
import sys
import threading
import time
import uuid
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import IO, Any, TypeVar
from urllib.parse import urlparse

from aios_ledger.core.actors import VIA_LIBRARY, Actor
from aios_ledger.core.errors import LedgerError
from aios_ledger.core.tasks.answers import ClaimAnswer, VerifyAnswer
from aios_ledger.shell.actors import process_acting_as
from aios_ledger.shell.db.connection import fetch_all
from aios_ledger.shell.tasks.ledger import TaskLedger

T = TypeVar("T")

SYSTEM = "aios-ledger"
# The tables the benchmark's metrics daemon watches for bloat (adapter.json lists the same).
EVENT_TABLES = ["aios_ledger.tasks", "aios_ledger.events", "aios_ledger.task_idempotency"]
# Claim latency percentiles cover this many seconds, as the contract asks.
LATENCY_WINDOW_S = 30.0
LATENCY_RING = 32768
# How long a claiming thread waits after finding the queue empty, and how often the observer
# replica counts the queue: the Procrastinate adapter's polling figures.
IDLE_POLL_S = 0.05
DEPTH_POLL_S = 0.2
# After the database refused a transaction (down, restarting, its backend killed), wait this
# long before the next one, so that an outage is not a busy loop.
OUTAGE_PAUSE_S = 0.5
# How often each replica looks for results left unverified, and how many it reads at a time.
REVIEW_EVERY_S = 1.0
REVIEW_BATCH = 100
# Metrics only replica 0 reports: they observe the whole queue, not one replica.
OBSERVER_METRICS = frozenset({"queue_depth", "producer_target_rate"})
# A refusal that says the task is no longer this worker's to finish (its lease passed and
# another worker took it over): the other worker finishes it.
LEASE_LOST = frozenset({"LEASE_INVALID", "LEASE_EXPIRED", "INVALID_TRANSITION"})


@dataclass(frozen=True)
class Settings:
    """The environment the harness sets (CONTRIBUTING_ADAPTERS.md, "Env in")."""

    database_url: str
    instance_id: int
    worker_count: int
    claim_threads: int
    work_ms: int
    sample_every_s: int
    pacing: str
    producer_mode: str
    producer_rate: int
    target_depth: int
    batch_max: int
    batch_ms: int
    lease_seconds: int
    max_attempts: int

    @classmethod
    def from_env(cls, env: Mapping[str, str]) -> Settings:
        url = env.get("DATABASE_URL")
        if not url:
            raise SystemExit("DATABASE_URL must be set")

        def number(key: str, default: int) -> int:
            return int(env.get(key, str(default)))

        workers = max(1, number("WORKER_COUNT", 32))
        return cls(
            database_url=url,
            instance_id=number("BENCH_INSTANCE_ID", 0),
            worker_count=workers,
            claim_threads=min(workers, max(1, number("LEDGER_CLAIM_THREADS", 4))),
            work_ms=number("JOB_WORK_MS", 1),
            sample_every_s=max(1, number("SAMPLE_EVERY_S", 5)),
            pacing=env.get("PRODUCER_PACING", "harness"),
            producer_mode=env.get("PRODUCER_MODE", "fixed"),
            producer_rate=number("PRODUCER_RATE", 800),
            target_depth=number("TARGET_DEPTH", 1000),
            batch_max=max(1, number("PRODUCER_BATCH_MAX", 128)),
            batch_ms=max(1, number("PRODUCER_BATCH_MS", 25)),
            lease_seconds=max(1, number("LEDGER_LEASE_SECONDS", 10)),
            max_attempts=max(1, number("LEDGER_MAX_ATTEMPTS", 25)),
        )


def now_iso() -> str:
    return dt.datetime.now(dt.UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def percentiles(values: Sequence[float]) -> tuple[float, float, float]:
    """p50, p95 and p99 by nearest rank, the Procrastinate adapter's way; zeros when empty."""
    if not values:
        return 0.0, 0.0, 0.0
    ordered = sorted(values)
    last = len(ordered) - 1

    def rank(p: float) -> float:
        return ordered[min(last, max(0, round(p * last)))]

    return rank(0.50), rank(0.95), rank(0.99)


def parse_token(line: str) -> int | None:
    """The job count of an `ENQUEUE <n>` line; None for any other line."""
    parts = line.split()
    if len(parts) == 2 and parts[0] == "ENQUEUE" and parts[1].isdigit():
        return int(parts[1])
    return None


@dataclass
class Counters:
    """What the threads count and the sampler reads, under one lock."""

    lock: threading.Lock = field(default_factory=threading.Lock)
    enqueued: int = 0
    completed: int = 0
    queue_depth: int = 0
    latencies: deque[tuple[float, float]] = field(
        default_factory=lambda: deque(maxlen=LATENCY_RING)
    )

    def add_enqueued(self, count: int) -> None:
        with self.lock:
            self.enqueued += count

    def add_claimed(self, latencies_ms: Sequence[float]) -> None:
        at = time.monotonic()
        with self.lock:
            self.latencies.extend((at, latency) for latency in latencies_ms)

    def add_completed(self, count: int) -> None:
        with self.lock:
            self.completed += count

    def window(self, now: float) -> list[float]:
        with self.lock:
            return [v for t, v in self.latencies if t >= now - LATENCY_WINDOW_S]


class Adapter:
    """One replica: a producer, claiming threads, an observer and a sampler over one ledger."""

    def __init__(self, settings: Settings, ledger: TaskLedger, out: IO[str]) -> None:
        self.settings = settings
        self.ledger = ledger
        self.out = out
        self.out_lock = threading.Lock()
        self.counters = Counters()
        self.stop = threading.Event()
        # Keys stay unique across restarts of the same replica, which start counting at 0 again.
        self.run_tag = f"q{settings.instance_id}-{uuid.uuid4().hex[:8]}"
        self.sequence = 0
        self.agent_id = f"harness-worker-{settings.instance_id}"

    # -- output -----------------------------------------------------------------------------

    def emit(self, record: dict[str, Any]) -> None:
        record.setdefault("instance_id", self.settings.instance_id)
        with self.out_lock:
            self.out.write(json.dumps(record) + "\n")
            self.out.flush()

    def descriptor(self) -> dict[str, Any]:
        from importlib.metadata import version

        db_name = (urlparse(self.settings.database_url).path or "/").lstrip("/")
        return {
            "kind": "descriptor",
            "system": SYSTEM,
            "event_tables": EVENT_TABLES,
            "extensions": [],
            "version": version("aios-ledger"),
            "schema_version": "current",
            "db_name": db_name,
            "started_at": now_iso(),
        }

    def sample(self, rates: Mapping[str, float]) -> None:
        p50, p95, p99 = percentiles(self.counters.window(time.monotonic()))
        stamp = now_iso()
        metrics = [
            ("claim_p50_ms", p50, LATENCY_WINDOW_S),
            ("claim_p95_ms", p95, LATENCY_WINDOW_S),
            ("claim_p99_ms", p99, LATENCY_WINDOW_S),
            ("enqueue_rate", rates["enqueue_rate"], float(self.settings.sample_every_s)),
            ("completion_rate", rates["completion_rate"], float(self.settings.sample_every_s)),
            ("queue_depth", float(self.counters.queue_depth), 0.0),
            ("producer_target_rate", float(self.settings.producer_rate), 0.0),
        ]
        for metric, value, window in metrics:
            if metric in OBSERVER_METRICS and self.settings.instance_id != 0:
                continue
            self.emit(
                {
                    "t": stamp,
                    "system": SYSTEM,
                    "kind": "adapter",
                    "subject_kind": "adapter",
                    "subject": "",
                    "metric": metric,
                    "value": value,
                    "window_s": window,
                }
            )

    # -- the queue --------------------------------------------------------------------------

    def guarded(self, what: str, work: Callable[[], T]) -> T | None:
        """One transaction's answer; None after a refusal, whose code (never the URL) is
        logged, and a pause."""
        try:
            return work()
        except LedgerError as error:
            print(f"[{SYSTEM}] {what} refused: {error.code}", file=sys.stderr, flush=True)
        except Exception as error:  # the driver's own, during an outage
            print(f"[{SYSTEM}] {what} failed: {type(error).__name__}", file=sys.stderr, flush=True)
        self.stop.wait(OUTAGE_PAUSE_S)
        return None

    def enqueue(self, count: int) -> None:
        """Create `count` tasks in one transaction; retried until it commits or the run stops,
        with the same keys, so that a commit whose answer was lost is not doubled."""
        first = self.sequence
        self.sequence += count
        stamp = now_iso()
        items = [
            (
                {
                    "goal": "queue benchmark job",
                    "instructions": json.dumps({"seq": n, "enqueued_at": stamp}),
                    "max_attempts": self.settings.max_attempts,
                },
                f"{self.run_tag}-create-{n}",
            )
            for n in range(first, first + count)
        ]
        while not self.stop.is_set():
            if self.guarded("enqueue", lambda: self.ledger.create_tasks(items)) is not None:
                self.counters.add_enqueued(count)
                return

    def produce_from_tokens(self, tokens: IO[str]) -> None:
        """The harness's pacing: one create_tasks batch per `ENQUEUE <n>` line."""
        for line in tokens:
            if self.stop.is_set():
                return
            count = parse_token(line)
            if count:
                self.enqueue(count)

    def produce_locally(self) -> None:
        """The adapter's own pacing (PRODUCER_PACING=adapter, or depth-target mode): credit
        offered load on elapsed wall time, at most `batch_max` jobs a batch."""
        period = self.settings.batch_ms / 1000.0
        credit = 0.0
        last = time.monotonic()
        while not self.stop.wait(period):
            if self.settings.producer_mode == "depth-target":
                count = min(
                    self.settings.batch_max, self.settings.target_depth - self.counters.queue_depth
                )
            else:
                now = time.monotonic()
                credit += self.settings.producer_rate * (now - last)
                last = now
                count = min(self.settings.batch_max, int(credit))
                credit -= max(0, count)
            if count > 0:
                self.enqueue(count)

    def claim_loop(self, slots: int) -> None:
        def claim() -> list[ClaimAnswer]:
            return self.ledger.claim_many(
                agent_id=self.agent_id,
                capabilities=[],
                lease_seconds=self.settings.lease_seconds,
                limit=slots,
            )

        while not self.stop.is_set():
            claims = self.guarded("claim", claim)
            if claims is None:
                continue
            if not claims:
                self.stop.wait(IDLE_POLL_S)
                continue
            self.counters.add_claimed([claim_latency_ms(c) for c in claims])
            if self.settings.work_ms:
                time.sleep(self.settings.work_ms / 1000.0)  # the jobs' synthetic work, side by side
            self.counters.add_completed(self.complete(claims))

    def complete(self, claims: Sequence[ClaimAnswer]) -> int:
        """Submit and verify the claimed tasks; how many ended SUCCEEDED here. A batch refused
        as a whole goes again one task at a time, so one lapsed lease does not hold the rest."""
        done = self.finish(claims)
        if done is not None:
            return done
        return sum(self.finish([claim]) or 0 for claim in claims)

    def finish(self, claims: Sequence[ClaimAnswer]) -> int | None:
        """Submit then verify `claims`, a transaction each; how many verdicts were first given
        here, or None when the ledger refused them for a reason of their own (a lease lost to
        another worker)."""
        submits = [
            {
                "task_id": c["task_id"],
                "lease_token": c["lease_token"],
                "result": {"summary": "done"},
                "idempotency_key": f"submit-{c['task_id']}-{c['attempt']}",
            }
            for c in claims
        ]
        verdicts = [verdict(c["task_id"], c["attempt"]) for c in claims]
        try:
            if self.persist("submit", lambda: self.ledger.submit_results(submits)) is None:
                return 0
            answers = self.persist("verify", lambda: self.ledger.verify_results(verdicts))
        except LedgerError:
            return None
        return first_verdicts(answers or [])

    def persist(self, what: str, work: Callable[[], T]) -> T | None:
        """`work`'s answer, tried again through an outage; once the run is stopping, a last
        try and None. A refusal that says the lease is lost is raised."""
        while True:
            try:
                return work()
            except LedgerError as error:
                if error.code in LEASE_LOST:
                    raise
                print(f"[{SYSTEM}] {what} refused: {error.code}", file=sys.stderr, flush=True)
            except Exception as error:  # the driver's own, during an outage
                name = type(error).__name__
                print(f"[{SYSTEM}] {what} failed: {name}", file=sys.stderr, flush=True)
            if self.stop.wait(OUTAGE_PAUSE_S):
                return None

    def review_stale(self) -> None:
        """The reviewer of results whose worker was killed between submit and verify: a task
        SUBMITTED for longer than a lease is verified here (a live worker's verify, coming
        later, replays the same verdict). Every replica reviews; the verdicts' keys agree."""
        while not self.stop.wait(REVIEW_EVERY_S):
            submitted = self.guarded(
                "review", lambda: self.ledger.list_tasks("SUBMITTED", limit=REVIEW_BATCH)
            )
            cutoff = dt.datetime.now(dt.UTC) - dt.timedelta(seconds=self.settings.lease_seconds)
            for task in submitted or []:
                if dt.datetime.fromisoformat(task["updated_at"]) >= cutoff:
                    continue
                try:
                    answers = self.ledger.verify_results(
                        [verdict(task["task_id"], task["attempt"])]
                    )
                except LedgerError:
                    continue  # verified meanwhile, or the database away: the next round sees
                self.counters.add_completed(first_verdicts(answers))

    def observe_depth(self) -> None:
        """Replica 0 counts the QUEUED tasks (the status summary's statement)."""

        def count() -> int:
            rows = self.ledger.database.read(lambda conn: fetch_all(conn, "status_counts"))
            return sum(int(row["tasks"]) for row in rows if row["status"] == "QUEUED")

        while not self.stop.is_set():
            queued = self.guarded("depth", count)
            if queued is not None:
                with self.counters.lock:
                    self.counters.queue_depth = queued
            self.stop.wait(DEPTH_POLL_S)

    def sampler(self) -> None:
        """One record per metric every SAMPLE_EVERY_S, the first on a wall-clock boundary."""
        every = self.settings.sample_every_s
        if self.stop.wait(every - (time.time() % every)):
            return
        last_tick, last_enqueued, last_completed = time.monotonic(), 0, 0
        while not self.stop.wait(max(0.0, last_tick + every - time.monotonic())):
            tick = time.monotonic()
            with self.counters.lock:
                enqueued, completed = self.counters.enqueued, self.counters.completed
            elapsed = max(0.001, tick - last_tick)
            self.sample(
                {
                    "enqueue_rate": (enqueued - last_enqueued) / elapsed,
                    "completion_rate": (completed - last_completed) / elapsed,
                }
            )
            last_tick, last_enqueued, last_completed = tick, enqueued, completed

    def threads(self, tokens: IO[str]) -> list[threading.Thread]:
        """Every thread of the replica; the producer is a daemon, as it blocks reading stdin."""
        count = self.settings.claim_threads
        slots = math.ceil(self.settings.worker_count / count)
        harness_paced = self.settings.pacing == "harness" and self.settings.producer_mode == "fixed"
        producer: Callable[[], None] = (
            (lambda: self.produce_from_tokens(tokens)) if harness_paced else self.produce_locally
        )
        made = [threading.Thread(target=producer, name="producer", daemon=True)]
        made += [
            threading.Thread(target=self.claim_loop, args=(slots,), name=f"claim-{n}")
            for n in range(count)
        ]
        if self.settings.instance_id == 0:
            made.append(threading.Thread(target=self.observe_depth, name="depth"))
        made.append(threading.Thread(target=self.review_stale, name="reviewer"))
        made.append(threading.Thread(target=self.sampler, name="sampler"))
        return made


def verdict(task_id: str, attempt: int) -> dict[str, Any]:
    """The verdict on an attempt's result: the same request (and key) whoever gives it."""
    return {
        "task_id": task_id,
        "decision": "SUCCEEDED",
        "reason": "the synthetic job ran",
        "idempotency_key": f"verify-{task_id}-{attempt}",
    }


def first_verdicts(answers: Sequence[VerifyAnswer]) -> int:
    """The verdicts recorded by this call, not replayed from an earlier one: jobs completed."""
    return sum(1 for answer in answers if not answer["idempotent"])


def claim_latency_ms(claim: ClaimAnswer) -> float:
    """Enqueue to claim, from the enqueue time the task's instructions carry."""
    try:
        enqueued = dt.datetime.fromisoformat(json.loads(claim["instructions"])["enqueued_at"])
    except (ValueError, KeyError, TypeError):
        return 0.0
    return max(0.0, (dt.datetime.now(dt.UTC) - enqueued).total_seconds() * 1000.0)


def open_ledger(settings: Settings, stop: threading.Event) -> TaskLedger | None:
    """The ledger, its schema made on first use; a replica started while the database is away
    waits for it."""
    # A pool connection for each claiming thread, the producer and the observer.
    os.environ.setdefault("AIOS_LEDGER_PG_POOL_SIZE", str(settings.claim_threads + 2))
    while not stop.is_set():
        try:
            return TaskLedger(settings.database_url)
        except LedgerError as error:
            print(f"[{SYSTEM}] open refused: {error.code}", file=sys.stderr, flush=True)
        stop.wait(OUTAGE_PAUSE_S)
    return None


def run(settings: Settings, tokens: IO[str], out: IO[str], stop: threading.Event) -> int:
    """The replica until `stop` is set: 0, as the contract asks of a clean shutdown."""
    ledger = open_ledger(settings, stop)
    if ledger is None:
        return 0
    with ledger, process_acting_as(Actor(f"queue-harness-{settings.instance_id}", VIA_LIBRARY)):
        adapter = Adapter(settings, ledger, out)
        adapter.stop = stop
        adapter.emit(adapter.descriptor())
        threads = adapter.threads(tokens)
        for thread in threads:
            thread.start()
        stop.wait()
        # The contract's 5 s: a thread still inside a transaction ends with the process.
        deadline = time.monotonic() + 4.0
        for thread in threads:
            if not thread.daemon:
                thread.join(timeout=max(0.0, deadline - time.monotonic()))
    print(f"[{SYSTEM}] stopped", file=sys.stderr, flush=True)
    return 0


def main() -> int:
    settings = Settings.from_env(os.environ)
    stop = threading.Event()
    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, lambda *_: stop.set())
    code = run(settings, sys.stdin, sys.stdout, stop)
    sys.stdout.flush()
    os._exit(code)  # the producer thread may still block on stdin


if __name__ == "__main__":
    raise SystemExit(main())
