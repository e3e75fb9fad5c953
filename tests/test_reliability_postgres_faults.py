"""PostgreSQL's own faults, survived by a real `serve`: a restart mid-load, the server's backends
terminated, every connection slot taken by other clients, an outside session idle in transaction
holding a lock the ledger's writes need, and outside sessions holding vacuum back.

Each test runs on a cluster of its own (`pg_cluster.PgCluster`), never the shared server. A
client loop creates tasks through the API, asking again with the same idempotency key until a
create is acknowledged; while the database cannot write, requests are refused
`DATABASE_UNAVAILABLE` with `Retry-After` rather than held (the client's timeout, far above the
server's patience, never fires), `/v1/ready` answers false, then true once the server has
reconnected by itself; while another session holds a lock the writes need, they are refused
`DATABASE_BUSY` with `Retry-After` once the ledger's lock_timeout passes. At the end the ledger
holds exactly the acknowledged tasks, and `verify` holds.
"""

from __future__ import annotations

import re
import secrets
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import psycopg
from api_server import ServeProcess, cli
from pg_cluster import LEDGER_ROLE, PgCluster

# A client that waits this long for an answer tells a refusal from a held request: the server
# refuses within its patience (`UNAVAILABLE_PATIENCE`), far below it.
CLIENT_TIMEOUT = 5.0
# Bounds on waiting for progress, never speed assertions.
PATIENCE = 90.0
ACKNOWLEDGED_BETWEEN_FAULTS = 5
CAPABILITY = "pg-faults"


def _body(key: str) -> dict[str, Any]:
    return {
        "idempotency_key": key,
        "task": {"goal": "g", "instructions": "i", "required_capabilities": [CAPABILITY]},
    }


# The codes of a refusal that asking again later lifts: the server is away, or another session
# holds a lock the write needs.
AWAY = "DATABASE_UNAVAILABLE"
LOCKED = "DATABASE_BUSY"


def _refusal_code(answer: httpx.Response) -> str | None:
    """The code of a 503 refusal with `Retry-After` that time lifts; None for any other answer."""
    if answer.status_code != 503 or not answer.headers.get("Retry-After", "").isdigit():
        return None
    code = answer.json().get("code")
    return code if code in (AWAY, LOCKED) else None


class Creator:
    """Creates tasks one after another, each asked again with its key until acknowledged."""

    def __init__(self, server: ServeProcess) -> None:
        self.client = server.client("owner")
        self.client.timeout = httpx.Timeout(CLIENT_TIMEOUT)
        self.acknowledged: dict[str, str] = {}  # idempotency key -> task id
        self.refusals: Counter[str] = Counter()  # by code
        self.unexpected: list[str] = []  # a timeout, or an answer neither 201 nor a refusal
        self._stopping = threading.Event()
        self._answered = threading.Condition()  # notified at each answer
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stopping.is_set():
            key = "k-" + secrets.token_hex(8)
            while not self._create(key):
                pass

    def _create(self, key: str) -> bool:
        """Whether to go on to the next key: this one acknowledged, or too much went wrong."""
        try:
            answer = self.client.post("/v1/tasks", json=_body(key))
        except httpx.TransportError as exc:
            answer = None
            failure = f"{type(exc).__name__}: {exc}"
        with self._answered:
            self._answered.notify_all()
            if answer is None:
                self.unexpected.append(failure)
            elif answer.status_code == 201:
                self.acknowledged[key] = str(answer.json()["task_id"])
                return True
            elif (code := _refusal_code(answer)) is not None:
                self.refusals[code] += 1
            else:
                self.unexpected.append(f"{answer.status_code} {answer.headers} {answer.text[:300]}")
            return len(self.unexpected) > 100

    def wait_for(self, what: str, condition: Callable[[], bool]) -> None:
        with self._answered:
            assert self._answered.wait_for(condition, PATIENCE), f"not within {PATIENCE} s: {what}"

    def stop(self) -> None:
        """Stops after the create under way is acknowledged."""
        self._stopping.set()
        self._thread.join(PATIENCE)
        assert not self._thread.is_alive(), "the last create was never acknowledged"


def _until_ready(probe: httpx.Client) -> None:
    """Asks `/v1/ready` until it answers ready (each answer paces the next question)."""
    deadline = time.monotonic() + PATIENCE
    while _ready(probe).status_code != 200:
        assert time.monotonic() < deadline, f"/v1/ready not true within {PATIENCE} s"


def _ready(client: httpx.Client) -> httpx.Response:
    return client.get("/v1/ready", timeout=CLIENT_TIMEOUT)


def _assert_refused_now(server: ServeProcess) -> None:
    """While the database cannot write: `/v1/ready` and a create answer a refusal in time."""
    probe = server.client("owner")
    ready = _ready(probe)
    assert _refusal_code(ready) == AWAY, (ready.status_code, ready.headers, ready.text)
    create = _create_once(probe)
    assert _refusal_code(create) == AWAY, (create.status_code, create.headers, create.text)


def _create_once(client: httpx.Client) -> httpx.Response:
    key = "k-" + secrets.token_hex(8)
    return client.post("/v1/tasks", json=_body(key), timeout=CLIENT_TIMEOUT)


def _until_more_acknowledged(creator: Creator) -> None:
    before = len(creator.acknowledged)
    creator.wait_for(
        "more creates acknowledged",
        lambda: len(creator.acknowledged) >= before + ACKNOWLEDGED_BETWEEN_FAULTS,
    )


def _assert_recovered(server: ServeProcess, creator: Creator) -> None:
    probe = server.client("owner")
    _until_ready(probe)
    _until_more_acknowledged(creator)


def _assert_ledger_holds_exactly(cluster: PgCluster, url: str, creator: Creator) -> None:
    assert creator.unexpected == [], creator.unexpected[:5]
    with cluster.admin() as conn:
        rows = conn.execute("SELECT task_id FROM aios_ledger.tasks").fetchall()
    stored = sorted(str(row[0]) for row in rows)
    assert stored == sorted(creator.acknowledged.values()), "a task lost, doubled or unexpected"
    cli("--db", url, "verify")


def _serve(cluster: PgCluster, tmp_path: Path) -> ServeProcess:
    return ServeProcess(cluster.url(), role_tokens=True, log=tmp_path / "serve.log")


def _terminate_ledger_backends(cluster: PgCluster) -> int:
    with cluster.admin() as conn:
        rows = conn.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE usename = %s",
            (LEDGER_ROLE,),
        ).fetchall()
    return len(rows)


def test_a_postgresql_restart_mid_load_is_refused_in_time_and_loses_nothing(
    tmp_path: Path,
) -> None:
    with PgCluster() as cluster, _serve(cluster, tmp_path) as server:
        creator = Creator(server)
        _until_more_acknowledged(creator)
        cluster.stop()
        _assert_refused_now(server)
        creator.wait_for("the loop refused too", lambda: creator.refusals[AWAY] > 0)
        cluster.start()
        _assert_recovered(server, creator)
        creator.stop()
        _assert_ledger_holds_exactly(cluster, cluster.url(), creator)


def test_the_servers_backends_terminated_mid_load_lose_nothing(tmp_path: Path) -> None:
    with PgCluster() as cluster, _serve(cluster, tmp_path) as server:
        creator = Creator(server)
        for _ in range(3):
            _until_more_acknowledged(creator)
            assert _terminate_ledger_backends(cluster) > 0
        _assert_recovered(server, creator)
        creator.stop()
        _assert_ledger_holds_exactly(cluster, cluster.url(), creator)


def test_every_connection_slot_taken_by_others_is_refused_in_time_then_recovered(
    tmp_path: Path,
) -> None:
    crowd: list[psycopg.Connection[Any]] = []
    with PgCluster() as cluster, _serve(cluster, tmp_path) as server:
        try:
            probe = server.client("owner")
            assert _ready(probe).status_code == 200
            # The server's pool finds its connections broken only when it uses them next,
            # when no slot is left for a new one.
            assert _terminate_ledger_backends(cluster) > 0
            while True:
                try:
                    crowd.append(psycopg.connect(cluster.url("crowd"), connect_timeout=10))
                except psycopg.OperationalError:
                    break
            _assert_refused_now(server)
        finally:
            for conn in crowd:
                conn.close()
        creator = Creator(server)
        _assert_recovered(server, creator)
        creator.stop()
        _assert_ledger_holds_exactly(cluster, cluster.url(), creator)


@contextmanager
def _outside_transaction(cluster: PgCluster) -> Iterator[psycopg.Connection[Any]]:
    """Another client's session, its transaction left open until the block ends."""
    with psycopg.connect(cluster.url("postgres"), connect_timeout=10) as session:
        try:
            yield session
        finally:
            session.rollback()


def test_an_outside_session_idle_in_transaction_holding_a_lock_is_refused_in_time(
    tmp_path: Path,
) -> None:
    """A lock on the tasks table that every create needs, held by a session left idle in its
    transaction: creates are refused DATABASE_BUSY once lock_timeout passes, `/v1/ready`
    answers, and creates succeed again once the session ends."""
    with PgCluster() as cluster, _serve(cluster, tmp_path) as server:
        creator = Creator(server)
        _until_more_acknowledged(creator)
        with _outside_transaction(cluster) as holder:
            holder.execute("LOCK TABLE aios_ledger.tasks IN SHARE MODE")
            probe = server.client("owner")
            create = _create_once(probe)
            assert _refusal_code(create) == LOCKED, (create.status_code, create.text)
            # Whether an empty write can begin depends on the writers queued at that moment:
            # either answer, never a held request.
            ready = _ready(probe)
            assert ready.status_code == 200 or _refusal_code(ready) == LOCKED, ready.text
            creator.wait_for("the loop refused too", lambda: creator.refusals[LOCKED] > 0)
        _assert_recovered(server, creator)
        creator.stop()
        assert creator.refusals[AWAY] == 0  # the server was never away
        _assert_ledger_holds_exactly(cluster, cluster.url(), creator)


# The harness's `active_readers` (github.com/hardbyte/postgresql-job-queue-benchmarking): this many
# REPEATABLE READ sessions scanning a hot table again and again in one transaction each.
ACTIVE_READERS = 4
READER_PACE = 0.1  # seconds between one reader's scans: pacing, never a correctness wait
_NOT_YET_REMOVABLE = re.compile(r"(\d+) are dead but not yet removable")


class ActiveReaders:
    """Sessions that keep one REPEATABLE READ snapshot each while they scan the tasks table."""

    def __init__(self, cluster: PgCluster) -> None:
        self._stopping = threading.Event()
        self._scanned = threading.Barrier(ACTIVE_READERS + 1)
        self._threads = [
            threading.Thread(target=self._scan, args=(cluster.url("postgres"),), daemon=True)
            for _ in range(ACTIVE_READERS)
        ]
        for thread in self._threads:
            thread.start()
        self._scanned.wait(PATIENCE)  # every snapshot taken

    def _scan(self, url: str) -> None:
        with psycopg.connect(url, connect_timeout=10) as session:
            session.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ")
            session.execute("SELECT count(*) FROM aios_ledger.tasks").fetchone()
            self._scanned.wait(PATIENCE)
            while not self._stopping.wait(READER_PACE):
                session.execute("SELECT count(*) FROM aios_ledger.tasks").fetchone()
            session.rollback()

    def stop(self) -> None:
        self._stopping.set()
        for thread in self._threads:
            thread.join(PATIENCE)


def _dead_rows_vacuum_keeps(cluster: PgCluster) -> int:
    """VACUUM the ledger's tables: the dead row versions it had to keep for some snapshot."""
    kept: list[int] = []
    with cluster.admin() as admin:
        admin.add_notice_handler(
            lambda notice: kept.extend(
                int(n) for n in _NOT_YET_REMOVABLE.findall(notice.message_primary or "")
            )
        )
        tables = admin.execute(
            "SELECT quote_ident(tablename) FROM pg_tables WHERE schemaname = 'aios_ledger'"
        ).fetchall()
        listed = ", ".join(f"aios_ledger.{row[0]}" for row in tables)
        admin.execute(f"VACUUM (VERBOSE) {listed}")
    assert kept, "VACUUM reported no table"
    return sum(kept)


def test_writes_go_on_while_outside_sessions_hold_vacuum_back(tmp_path: Path) -> None:
    """The harness's `idle_in_tx_saturation` (a session idle in a transaction that has an XID)
    and `active_readers` at once: the ledger keeps acknowledging creates while VACUUM must keep
    their dead rows; once those sessions end, nothing of the ledger's holds a snapshot (not an
    event stream open all along, whose client reads nothing), so VACUUM keeps nothing."""
    with (
        PgCluster() as cluster,
        _serve(cluster, tmp_path) as server,
        server.client("auditor").stream("GET", "/v1/events/stream", params={"after": 0}) as stream,
    ):
        assert stream.status_code == 200
        creator = Creator(server)
        _until_more_acknowledged(creator)
        with _outside_transaction(cluster) as idle:
            idle.execute("SELECT txid_current()")
            readers = ActiveReaders(cluster)
            try:
                for _ in range(3):
                    _until_more_acknowledged(creator)
                assert _dead_rows_vacuum_keeps(cluster) > 0  # vacuum is held back
            finally:
                readers.stop()
        creator.stop()
        assert sum(creator.refusals.values()) == 0
        assert _dead_rows_vacuum_keeps(cluster) == 0
        _assert_ledger_holds_exactly(cluster, cluster.url(), creator)
