"""Part 8's programs, each run in a fresh process (`python -m bench.api_agents MODE ...`); the
answer is one JSON line.

- `local DB LIFECYCLES`: the in-process ledger at one call per step: create, claim (that task),
  heartbeat, submit, verify, one after another on one TaskLedger (FULL).
- `http DB AGENTS LIFECYCLES`: `aios-ledger serve` on DB (FULL, group commit) and AGENTS threads,
  each a `LedgerClient` with its own token (agent, owner, reviewer), each doing LIFECYCLES of
  the same five calls; the wall time from the start line to the last agent's end, every
  heartbeat's latency, and the server's batch-size histogram (requests per commit).
- `wakeup DB WAITERS SAMPLES`: WAITERS agents long-poll a claim (`wait_seconds` 30); an owner
  creates one task at a time; the wake-up is the time from the create's answer to the claim's
  answer in the agent that took it (both in this process, one monotonic clock).

Where the machine has two CPUs or more (and `taskset`), the server runs pinned to the first
(`taskset -c 0`) and this process, the agents' load generator, to the others
(`os.sched_setaffinity`), so that the 32 agents' own Python does not take the server's core
(each answer says `pinned`). On 2 CPUs that is one core each; other programs on the machine
still share both. The load generator also freezes its heap once its clients are built
(`gc.freeze()`), so that its own full collections (30-150 ms each, measured) do not show up as
the server's latency.
"""

from __future__ import annotations

import functools
import gc
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import httpx
from aios_ledger.shell import Database, LedgerClient, TaskLedger
from aios_ledger.shell.api.tokens import issue_token

ROLES = ["agent", "owner", "reviewer"]
LEASE_SECONDS = 300
START_PATIENCE = 60.0
CLI = (sys.executable, "-m", "aios_ledger.shell.cli")
SERVER_CPU = 0


def _agent_cpus() -> set[int] | None:
    """The CPUs the agents get when the server is pinned to `SERVER_CPU` (None: not pinned)."""
    if not hasattr(os, "sched_getaffinity") or shutil.which("taskset") is None:
        return None
    rest = os.sched_getaffinity(0) - {SERVER_CPU}
    return rest if rest and SERVER_CPU in os.sched_getaffinity(0) else None


def _task(task_id: str) -> dict[str, Any]:
    return {"task_id": task_id, "goal": "g", "instructions": "i"}


def lifecycle(
    ledger: Any,
    agent: str,
    task_id: str,
    beats: list[float] | None = None,
    reviewer: Any | None = None,
) -> None:
    """The five calls of one task's life, each one call of the ledger (or the client); the
    verify by `reviewer` when given (over the API an agent may not judge its own result)."""
    ledger.create_task(_task(task_id), idempotency_key=f"create-{task_id}")
    claim = ledger.claim(
        agent_id=agent, capabilities=[], lease_seconds=LEASE_SECONDS, task_id=task_id
    )
    token = claim["lease_token"]
    started = time.perf_counter()
    ledger.heartbeat(task_id, lease_token=token, lease_seconds=LEASE_SECONDS)
    if beats is not None:
        beats.append((time.perf_counter() - started) * 1000)
    ledger.submit_result(
        task_id, lease_token=token, result={"summary": "done"}, idempotency_key=f"s-{task_id}"
    )
    judge = ledger if reviewer is None else reviewer
    judge.verify(task_id, decision="SUCCEEDED", reason="ok", idempotency_key=f"v-{task_id}")


def _local(db: str, count: int) -> dict[str, Any]:
    with TaskLedger(db) as ledger:
        lifecycle(ledger, "agent-0", "task-warm")
        started = time.perf_counter()
        for serial in range(count):
            lifecycle(ledger, "agent-0", f"task-{serial}")
        seconds = time.perf_counter() - started
    return {"lifecycles": count, "seconds": seconds}


class Server:
    """`aios-ledger serve` on a free loopback port, with tokens issued beforehand."""

    def __init__(self, db: str, names: list[str]) -> None:
        with Database(db) as opened:
            self.tokens = {name: issue_token(opened, name, ROLES)["token"] for name in names}
            # Each agent's results are verified under a reviewer token of another name.
            self.reviewers = {
                name: issue_token(opened, f"reviewer-of-{name}", ["reviewer"])["token"]
                for name in names
            }
            self.auditor = issue_token(opened, "bench-auditor", ["auditor"])["token"]
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            port = probe.getsockname()[1]
        self.url = f"http://127.0.0.1:{port}"
        agent_cpus = _agent_cpus()
        self.pinned = agent_cpus is not None
        pin = ("taskset", "-c", str(SERVER_CPU)) if agent_cpus is not None else ()
        self.process = subprocess.Popen(
            [
                *pin,
                *CLI,
                *("--db", db, "--log-level", "ERROR"),
                *("serve", "--listen", f"127.0.0.1:{port}"),
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        if agent_cpus is not None:  # before any agent thread starts: they inherit it
            os.sched_setaffinity(0, agent_cpus)
        deadline = time.monotonic() + START_PATIENCE
        while True:
            try:
                if httpx.get(f"{self.url}/v1/health", timeout=1.0).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            if time.monotonic() > deadline or self.process.poll() is not None:
                raise RuntimeError("the server did not start")
            time.sleep(0.05)

    def batches(self) -> tuple[float, float]:
        """(requests committed, commits) from the server's histogram."""
        text = httpx.get(
            f"{self.url}/metrics", headers={"Authorization": f"Bearer {self.auditor}"}
        ).text
        found = {}
        for line in text.splitlines():
            for name in ("sum", "count"):
                if line.startswith(f"aios_ledger_group_commit_batch_size_{name} "):
                    found[name] = float(line.split()[1])
        return found["sum"], found["count"]

    def stop(self) -> None:
        self.process.send_signal(signal.SIGTERM)
        try:  # long polls still waiting would hold a graceful stop for their whole wait
            self.process.wait(timeout=3)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()


def _http(db: str, agents: int, count: int) -> dict[str, Any]:
    TaskLedger(db).close()
    names = [f"agent-{n}" for n in range(agents)]
    server = Server(db, names)
    clients = {name: LedgerClient(server.url, server.tokens[name]) for name in names}
    reviewers = {name: LedgerClient(server.url, server.reviewers[name]) for name in names}
    beats: list[list[float]] = [[] for _ in names]
    start = threading.Barrier(agents + 1)
    failures: list[BaseException] = []

    def agent(number: int) -> None:
        name = names[number]
        client, reviewer = clients[name], reviewers[name]
        lifecycle(client, name, f"task-warm-{number}", reviewer=reviewer)
        start.wait()
        try:
            for serial in range(count):
                lifecycle(client, name, f"task-{number}-{serial}", beats[number], reviewer)
        except BaseException as failed:
            failures.append(failed)

    threads = [threading.Thread(target=agent, args=(n,)) for n in range(agents)]
    gc.collect()
    gc.freeze()
    try:
        for thread in threads:
            thread.start()
        warm_committed, warm_commits = 0.0, 0.0
        start.wait()
        started = time.perf_counter()
        warm_committed, warm_commits = server.batches()
        for thread in threads:
            thread.join()
        seconds = time.perf_counter() - started
        committed, commits = server.batches()
    finally:
        for client in [*clients.values(), *reviewers.values()]:
            client.close()
        server.stop()
    if failures:
        raise failures[0]
    return {
        "lifecycles": agents * count,
        "seconds": seconds,
        "heartbeat_ms": [beat for per_agent in beats for beat in per_agent],
        "requests_per_commit": (committed - warm_committed) / max(1.0, commits - warm_commits),
        "pinned": server.pinned,
    }


def _wakeup(db: str, waiters: int, samples: int) -> dict[str, Any]:
    TaskLedger(db).close()
    names = [f"waiter-{n}" for n in range(waiters)]
    server = Server(db, [*names, "owner"])
    owner = LedgerClient(server.url, server.tokens["owner"])
    got: dict[str, float] = {}
    arrived = threading.Condition()
    stop = threading.Event()

    def waiter(name: str) -> None:
        with LedgerClient(server.url, server.tokens[name]) as client:
            while not stop.is_set():
                claim = client.claim(
                    agent_id=name, capabilities=[], lease_seconds=LEASE_SECONDS, wait_seconds=30
                )
                if claim is not None:
                    with arrived:
                        got[claim["task_id"]] = time.perf_counter()
                        arrived.notify_all()

    threads = [threading.Thread(target=waiter, args=(name,), daemon=True) for name in names]
    for thread in threads:
        thread.start()
    time.sleep(1.0)  # every waiter is in its long poll
    latencies = []
    try:
        for serial in range(samples):
            task_id = f"task-wake-{serial}"
            owner.create_task(_task(task_id), idempotency_key=task_id)
            created = time.perf_counter()
            with arrived:
                if not arrived.wait_for(functools.partial(got.__contains__, task_id), 30):
                    raise RuntimeError(f"{task_id} never reached a waiter")
            latencies.append((got[task_id] - created) * 1000)
            time.sleep(0.15)  # the waiter that took it is back in its long poll
    finally:
        stop.set()
        # The waiters still polling end with the server.
        owner.close()
        server.stop()
    return {"wakeup_ms": latencies}


def main(argv: list[str]) -> int:
    mode, db = argv[1], argv[2]
    numbers = [int(value) for value in argv[3:]]
    if mode == "local":
        answer = _local(db, *numbers)
    elif mode == "http":
        answer = _http(db, *numbers)
    elif mode == "wakeup":
        answer = _wakeup(db, *numbers)
    else:
        raise SystemExit(f"unknown mode {mode}")
    for suffix in ("", "-wal", "-shm"):
        Path(f"{db}{suffix}").unlink(missing_ok=True)
    sys.stdout.write(json.dumps(answer) + "\n")
    sys.stdout.flush()
    os._exit(0)  # the waiters' threads may still be in a poll the server ended


if __name__ == "__main__":
    main(sys.argv)
