"""Part 12: one `aios-ledger serve` against two on one PostgreSQL database, under the same HTTP
load, and the integration lag as a reader of the database sees it.

Each repetition, interleaved, in a fresh schema (part 9's server): one or two real `serve`
processes on the schema, then two load-generator processes (`python -m bench.serves agents`),
each with half of the 32 agents (4 in a smoke run): threads, each with a `LedgerClient` of its
own token and one of a reviewer's, doing whole lifecycles at one call per step (create, claim
that task, submit, verify). With one server both generators talk to it; with two, each to its
own: the client side is the same in both variants, so the ratio is the servers'. Lifecycles
per second over the wall time from the agreed start to the last agent's end.

The lag: a thread of the runner reads the tree's new leaves every POLL_SECONDS and counts each
event's lag as the moment its leaf was first seen less the moment the event was written (one
clock, this machine's). That bounds the lag from above by a poll, and counts the pass's own
commit, which the integrator's own figure (part 11) does not. Only the events written in the
timed window count. With two servers both run an integrator; passes take turns on one lock.

    python -m bench.serves agents   # a load generator: its agents on stdin, then its start
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import threading
import time
from datetime import datetime
from pathlib import Path
from typing import Any

import psycopg

from .harness import (
    Size,
    figure,
    free_port,
    interleaved_values,
    paired_ratio,
    recorded,
    sized,
    summary,
    wait_healthy,
)
from .integration import lag_figure
from .postgres import ROOT, Server

SERVES = (1, 2)
AGENTS = 32
GENERATORS = 2
ROLES = ["agent", "owner", "reviewer"]
LEASE_SECONDS = 300
POLL_SECONDS = 0.02
# How long the lag reader waits, after the load, for the tree to cover every event.
CATCH_UP_SECONDS = 60.0
CLI = (sys.executable, "-m", "aios_ledger.shell.cli")


def _lifecycle(client: Any, reviewer: Any, agent: str, task_id: str) -> None:
    client.create_task(
        {"task_id": task_id, "goal": "g", "instructions": "i"}, idempotency_key=f"c-{task_id}"
    )
    claim = client.claim(
        agent_id=agent, capabilities=[], lease_seconds=LEASE_SECONDS, task_id=task_id
    )
    client.submit_result(
        task_id,
        lease_token=claim["lease_token"],
        result={"summary": "done"},
        idempotency_key=f"s-{task_id}",
    )
    # Over the API an agent may not judge its own result: a reviewer of another name does.
    reviewer.verify(task_id, decision="SUCCEEDED", reason="ok", idempotency_key=f"v-{task_id}")


def generate_load() -> dict[str, Any]:
    """A load generator: reads {"agents": [{name, url, token, reviewer}], "lifecycles": n} from
    stdin, warms each agent up with one lifecycle, says `ready`, reads the start (epoch
    seconds), runs every agent's lifecycles from then on, and answers when the last ended."""
    from aios_ledger.shell import LedgerClient  # before the plan: while the servers start

    plan = json.loads(sys.stdin.readline())
    count = int(plan["lifecycles"])
    clients = [
        (a["name"], LedgerClient(a["url"], a["token"]), LedgerClient(a["url"], a["reviewer"]))
        for a in plan["agents"]
    ]
    for name, client, reviewer in clients:
        _lifecycle(client, reviewer, name, f"warm-{name}")
    sys.stdout.write("ready\n")
    sys.stdout.flush()
    start = float(sys.stdin.readline())
    failures: list[BaseException] = []
    ends: list[float] = []

    def agent(name: str, client: Any, reviewer: Any) -> None:
        time.sleep(max(0.0, start - time.time()))
        try:
            for serial in range(count):
                _lifecycle(client, reviewer, name, f"task-{name}-{serial}")
        except BaseException as failed:
            failures.append(failed)
        ends.append(time.time())

    threads = [threading.Thread(target=agent, args=entry) for entry in clients]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    for _, client, reviewer in clients:
        client.close()
        reviewer.close()
    if failures:
        raise failures[0]
    return {"end": max(ends), "lifecycles": count * len(clients)}


class Serve:
    """One `aios-ledger serve` process on `url`, on a free loopback port."""

    def __init__(self, url: str) -> None:
        port = free_port()
        self.url = f"http://127.0.0.1:{port}"
        self.process = subprocess.Popen(
            [*CLI, "--db", url, "--log-level", "ERROR", "serve", "--listen", f"127.0.0.1:{port}"],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )

    def wait_ready(self) -> None:
        wait_healthy(self.url, self.process, lambda: f": {self._stderr()}")

    def stop(self) -> None:
        self.process.send_signal(signal.SIGTERM)
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()

    def _stderr(self) -> str:
        if self.process.poll() is None:
            return "still running"
        assert self.process.stderr is not None
        return self.process.stderr.read()[-2000:]


class LagReader:
    """Reads the tree's new leaves every POLL_SECONDS on a thread of its own: each leaf's event
    and when the leaf was first seen."""

    def __init__(self, url: str) -> None:
        base, schema = url.split("?", maxsplit=1)[0], url.rsplit("=", 1)[1]
        self.conn = psycopg.connect(base, autocommit=True)
        self.conn.execute(f"SET search_path TO {schema}".encode())
        self.seen: list[tuple[str, float]] = []  # (the event's created_at, seen at)
        self.leaves = 0
        self.stopping = threading.Event()
        self.thread = threading.Thread(target=self._poll, daemon=True)
        self.thread.start()

    def _poll(self) -> None:
        while not self.stopping.is_set():
            self.read()
            self.stopping.wait(POLL_SECONDS)

    def read(self) -> None:
        rows = self.conn.execute(
            b"SELECT l.leaf_index, e.created_at FROM merkle_leaves AS l"
            b" JOIN events AS e ON e.event_id = l.event_id"
            b" WHERE l.leaf_index >= %s ORDER BY l.leaf_index",
            (self.leaves,),
        ).fetchall()
        now = time.time()
        self.seen += [(str(created_at), now) for _, created_at in rows]
        if rows:
            self.leaves = int(rows[-1][0]) + 1

    def finish(self) -> list[tuple[str, float]]:
        """Waits (bounded) until every event has its leaf; then each leaf's event's created_at
        and when the leaf was first seen."""
        events = self.conn.execute(b"SELECT count(*) FROM event_seals").fetchone()
        total = int(events[0]) if events else 0
        deadline = time.monotonic() + CATCH_UP_SECONDS
        while self.leaves < total and time.monotonic() < deadline:
            time.sleep(POLL_SECONDS)
        self.stopping.set()
        self.thread.join()
        self.conn.close()
        if self.leaves < total:
            raise RuntimeError(f"the tree covers {self.leaves} of {total} events after the load")
        return self.seen


def _epoch(text: str) -> float:
    return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()


def _round(server: Server, serves: int, agents: int, per_agent: int) -> dict[str, Any]:
    """One repetition: `serves` servers, `agents` split over the two generators."""
    url = server.schema()
    from aios_ledger.shell import Database, TaskLedger
    from aios_ledger.shell.api.tokens import issue_token

    TaskLedger(url).close()
    names = [f"agent-{n}" for n in range(agents)]
    servers = [Serve(url) for _ in range(serves)]
    # Every process starts at once: the generators' imports overlap the servers' start.
    generators = [
        subprocess.Popen(
            [sys.executable, "-m", "bench.serves", "agents"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            cwd=ROOT,
        )
        for _ in range(GENERATORS)
    ]
    try:
        with Database(url) as db:  # while the servers start
            tokens = {name: issue_token(db, name, ROLES)["token"] for name in names}
            reviewers = {
                name: issue_token(db, f"rev-{name}", ["reviewer"])["token"] for name in names
            }
        for started in servers:
            started.wait_ready()
        share = agents // GENERATORS
        for n, generator in enumerate(generators):
            target = servers[n % serves].url
            mine = names[n * share : (n + 1) * share]
            plan = {
                "lifecycles": per_agent,
                "agents": [
                    {"name": a, "url": target, "token": tokens[a], "reviewer": reviewers[a]}
                    for a in mine
                ],
            }
            assert generator.stdin is not None
            generator.stdin.write(json.dumps(plan) + "\n")
            generator.stdin.flush()
        for generator in generators:
            assert generator.stdout is not None
            if generator.stdout.readline().strip() != "ready":
                _, err = generator.communicate(timeout=60)
                raise RuntimeError(f"a load generator failed: {err[-2000:]}")
        lag = LagReader(url)
        start = time.time() + 0.2
        for generator in generators:
            assert generator.stdin is not None
            generator.stdin.write(f"{start}\n")
            generator.stdin.flush()
        ends, lifecycles = [], 0
        for generator in generators:
            out, err = generator.communicate(timeout=900)
            if generator.returncode != 0:
                raise RuntimeError(f"a load generator failed: {err[-2000:]}")
            answer = json.loads(out.strip().splitlines()[-1])
            ends.append(float(answer["end"]))
            lifecycles += int(answer["lifecycles"])
        timed = [
            seen - _epoch(created) for created, seen in lag.finish() if _epoch(created) >= start
        ]
    finally:
        for generator in generators:
            if generator.poll() is None:
                generator.kill()
        for started in servers:
            started.stop()
    server.drop_schema(url)
    return {"rate": lifecycles / (max(ends) - start), "lags": timed}


def run(scratch: Path, *, size: Size, reps: int) -> list[dict[str, Any]]:
    del scratch  # everything lives on the server
    server = Server()
    try:
        return _run(server, size=size, reps=reps)
    finally:
        server.close()


def _run(server: Server, *, size: Size, reps: int) -> list[dict[str, Any]]:
    agents = sized(size, full=AGENTS, quick=AGENTS, smoke=4)
    per_agent = sized(size, full=15, quick=5, smoke=1)
    outcomes: dict[int, list[dict[str, Any]]] = {n: [] for n in SERVES}
    values = interleaved_values(
        {
            f"x{n}": recorded(
                lambda n=n: _round(server, n, agents, per_agent),  # type: ignore[misc]
                outcomes[n],
                lambda outcome: float(outcome["rate"]),
            )
            for n in SERVES
        },
        reps,
    )
    part = "12 two serves"
    load = f"{agents} HTTP agents in {GENERATORS} processes, {per_agent} lifecycles each"
    rows = [
        figure(
            part,
            f"serve x{n} lifecycles",
            summary(values[f"x{n}"]),
            "lifecycles/s",
            note=f"{load}; 4 calls each",
        )
        for n in SERVES
    ]
    ratio = paired_ratio(values["x2"], values["x1"])
    rows.append(
        figure(
            part, "serve x2 / serve x1", ratio, "ratio", target=">= 1.3", met=ratio["median"] >= 1.3
        )
    )
    for n in SERVES:
        lags = [value for outcome in outcomes[n] for value in outcome["lags"]]
        note = f"events, leaf first seen less written, read every {POLL_SECONDS} s"
        rows.append(lag_figure(part, f"serve x{n}", lags, reps, peak=n == max(SERVES), note=note))
    return rows


def main(argv: list[str]) -> int:
    if argv and argv[0] == "agents":
        sys.stdout.write(json.dumps(generate_load()) + "\n")
        return 0
    raise SystemExit(f"unknown command {argv[:1]}")


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
