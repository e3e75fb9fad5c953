"""A hostile client against the server `serve` runs (uvicorn on loopback, real sockets; a real
`serve` process where its memory or its survival is the subject, a real ledger file made
immutable with `chattr +i`, a real full file system): the server survives the network.

Figures (cases tried, refused): 50 connections that never finish their headers, all 50 closed
by the header timeout while a normal client is served; 1 byte-by-byte trickle, closed; 1
connection over `--max-connections`, refused 503 `TOO_MANY_CONNECTIONS`; 1 server started on a
read-only file, 2 (as an unprivileged user) on a read-only folder, `-wal` and `-shm` (the `-wal`
empty, or holding a commit), and 1 on a full disk (a real 8 MiB tmpfs), each writing again (and
saying it is ready) once the files are writable or the disk has room, without a restart; 1 on a
read-only folder with no `-wal`, refused at start; 12 ids no route can
address, all 12 refused at creation (tasks and runs) with 422 `FIELDS_INVALID` and nothing
written, and 1 review run's id, refused; a number too large, 422; every code of the status
table is the documented status.

Every bound here is a socket timeout or a count of tries, never an assertion on a duration.
"""

from __future__ import annotations

import errno
import json
import os
import pwd
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from aios_ledger.core import ChainTip, LedgerError, LogTail
from aios_ledger.core.actors import Actor
from aios_ledger.core.auxiliary.records import AuxiliaryRunSpec, ExecutionFrame
from aios_ledger.core.digests import canonical_json, sha256_hex
from aios_ledger.core.log import LEDGER_CHAIN
from aios_ledger.core.log.plan import Replay
from aios_ledger.core.projection.bindings import BindingState, decide_register_binding
from aios_ledger.core.projection.records import BindingRow
from aios_ledger.core.runs.evidence import ExecutionTarget
from aios_ledger.core.tasks.attempts import evidence_session
from aios_ledger.core.timestamps import Timestamp
from aios_ledger.core.work import REVIEW_KIND
from aios_ledger.shell import Database
from aios_ledger.shell.api.backend import DEFAULT_MAX_HEADER_BYTES, ApiSettings, Backend, Stores
from aios_ledger.shell.api.problems import STATUS_BY_CODE, STATUS_BY_PART, status_of
from aios_ledger.shell.api.tokens import issue_token
from aios_ledger.shell.tasks.ledger import TaskLedger
from api_server import ApiServer, Served, ServeProcess, cli, free_port
from conftest import postgres_url
from legacy_fixtures import binding

# Who the decisions here act as.
ACTOR = Actor("tester", "library")

ROOT = Path(__file__).resolve().parent.parent
PATIENCE = 60.0  # seconds a socket may wait for the server: a bound, not a speed assertion
PARTIAL_HEAD = b"GET /v1/health HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: "
NOW = Timestamp.parse("2026-09-01T12:00:00Z")
PROBE_TRIES = 600  # of 0.1 s each, while the server notices a change
OVERSIZED_HEAD = 4 * 1024 * 1024


def _connect(server: Served) -> socket.socket:
    connection = socket.create_connection(("127.0.0.1", server.port), timeout=PATIENCE)
    return connection


def _read_until_closed(connection: socket.socket) -> bytes:
    """Everything the server sends until it closes the connection; a server that keeps it
    open past PATIENCE fails the test (socket.timeout)."""
    received = b""
    while chunk := connection.recv(65536):
        received += chunk
    return received


def test_connections_that_never_finish_their_headers_are_closed(tmp_path: Path) -> None:
    with ApiServer(tmp_path / "slow.db", "--header-timeout", "1", "--max-connections", "64") as (
        server
    ):
        slow = [_connect(server) for _ in range(50)]
        for connection in slow:
            connection.sendall(PARTIAL_HEAD)
        # Meanwhile a normal client is served.
        with server.client() as client:
            assert client.get("/v1/health").status_code == 200
        for connection in slow:
            with connection:
                assert _read_until_closed(connection) == b""
        # A trickle of bytes does not extend the time a head may take.
        with _connect(server) as trickle:
            closed = False
            for byte in PARTIAL_HEAD * 100:
                try:
                    trickle.sendall(bytes([byte]))
                except (BrokenPipeError, ConnectionResetError):
                    closed = True
                    break
                time.sleep(0.05)  # pacing the attacker, never measured
            assert closed, "a trickling head kept its connection"
        with server.client() as client:
            assert client.get("/v1/health").status_code == 200


def _rss_kib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise AssertionError(f"no VmRSS for {pid}")


def _send_oversized_head(connection: socket.socket) -> None:
    """A head of OVERSIZED_HEAD bytes in 64 KiB chunks, never finished."""
    chunk = b"x" * 65536
    try:
        connection.sendall(PARTIAL_HEAD)
        for _ in range(OVERSIZED_HEAD // len(chunk)):
            connection.sendall(chunk)
    except (BrokenPipeError, ConnectionResetError):
        pass  # the server may close before all of it is sent


def test_a_head_over_the_limit_is_431_and_not_buffered(tmp_path: Path) -> None:
    """20 connections each send a 4 MiB head they never finish: each is answered 431
    `HEADERS_TOO_LARGE` and closed, and the server's memory does not grow with them (held, they
    grow it by about 80 MiB; 1 MiB heads would stay within the bound unrefused); a whole head
    over the limit is refused too, and a head just under the limit is served."""
    with ServeProcess(tmp_path / "heads.db", "--header-timeout", "60") as server:
        assert server.process is not None
        before = _rss_kib(server.process.pid)
        attempts = [_connect(server) for _ in range(20)]
        for connection in attempts:
            _send_oversized_head(connection)
        grown_mib = (_rss_kib(server.process.pid) - before) / 1024
        assert grown_mib < 30, f"the server grew by {grown_mib:.0f} MiB"
        for connection in attempts:
            with connection:
                answer = _read_until_closed(connection)
            head, _, body = answer.partition(b"\r\n\r\n")
            assert head.startswith(b"HTTP/1.1 431 "), answer[:200]
            assert json.loads(body)["code"] == "HEADERS_TOO_LARGE"
        # A whole head over the limit, sent at once, is refused as well.
        with _connect(server) as whole:
            whole.sendall(PARTIAL_HEAD + b"x" * DEFAULT_MAX_HEADER_BYTES + b"\r\n\r\n")
            assert _read_until_closed(whole).startswith(b"HTTP/1.1 431 ")
        with server.client() as client:
            padding = "a" * (DEFAULT_MAX_HEADER_BYTES - 2048)
            assert client.get("/v1/health", headers={"X-Pad": padding}).status_code == 200


def test_a_request_answered_after_the_header_timeout_keeps_its_connection(tmp_path: Path) -> None:
    """The header timeout bounds a head, not an answer: a long poll that waits past it is
    answered on its connection, and the next request's head on the same connection is timed
    afresh (one client, one connection throughout)."""
    body = {"capabilities": ["cap-poll-nothing"], "lease_seconds": 60, "wait_seconds": 2}
    with (
        ApiServer(tmp_path / "poll.db", "--header-timeout", "1", role_tokens=True) as server,
        server.client("agent") as agent,
    ):
        assert agent.post("/v1/claims", json=body).status_code == 204
        assert agent.get("/v1/health").status_code == 200
        assert agent.post("/v1/claims", json=body).status_code == 204


def test_a_connection_beyond_the_limit_is_refused_with_a_problem(tmp_path: Path) -> None:
    limit = 4
    flags = ("--header-timeout", "60", "--max-connections", str(limit))
    with ApiServer(tmp_path / "limit.db", *flags) as server:
        held = [_connect(server) for _ in range(limit)]
        for connection in held:
            connection.sendall(PARTIAL_HEAD)
        with _connect(server) as extra:
            answer = _read_until_closed(extra)
        head, _, body = answer.partition(b"\r\n\r\n")
        assert head.startswith(b"HTTP/1.1 503 "), answer
        assert json.loads(body)["code"] == "TOO_MANY_CONNECTIONS"
        for connection in held:
            connection.close()
        # Once they are gone, clients are served again (the server notices the closes).
        for _ in range(PROBE_TRIES):
            with _connect(server) as probe:
                probe.sendall(b"GET /v1/health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
                if _read_until_closed(probe).startswith(b"HTTP/1.1 200 "):
                    break
            time.sleep(0.1)
        else:
            raise AssertionError("the server did not serve again after the connections closed")


@pytest.fixture
def chattr() -> str:
    found = shutil.which("chattr")
    if found is None:
        pytest.skip("no chattr here")
    return found


@pytest.fixture
def immutable_ledger(tmp_path: Path, chattr: str) -> Iterator[tuple[Path, str]]:
    """A ledger with an owner's token, made immutable (as root, permission bits keep no one
    out); made writable again at the end whatever the test did."""
    ledger = tmp_path / "read-only.db"
    with Database(ledger) as opened:
        token = str(issue_token(opened, "owner-1", ["owner"])["token"])
    if subprocess.run([chattr, "+i", str(ledger)], check=False).returncode:
        pytest.skip("cannot make a file immutable here (chattr +i)")
    try:
        yield ledger, token
    finally:
        subprocess.run([chattr, "-i", str(ledger)], check=True)


def test_a_server_on_a_read_only_file_recovers_when_it_becomes_writable(
    immutable_ledger: tuple[Path, str], chattr: str
) -> None:
    ledger, token = immutable_ledger
    task = {
        "idempotency_key": "k-1",
        "task": {"task_id": "after", "goal": "g", "instructions": "i"},
    }
    with ServeProcess(ledger) as server, server.client(token=token) as owner:
        assert server.client().get("/v1/health").json() == {"status": "ok"}  # live
        not_ready = server.client().get("/v1/ready")
        assert not_ready.status_code == 503
        assert not_ready.json()["code"] == "DATABASE_READ_ONLY", not_ready.text
        refused = owner.post("/v1/tasks", json=task)
        assert (refused.status_code, refused.json()["code"]) == (503, "DATABASE_READ_ONLY")
        subprocess.run([chattr, "-i", str(ledger)], check=True)
        for _ in range(PROBE_TRIES):
            if server.client().get("/v1/ready").status_code == 200:
                break
            time.sleep(0.1)
        else:
            raise AssertionError("/v1/ready never said ready after the file became writable")
        created = owner.post("/v1/tasks", json=task)
        assert created.status_code == 201, created.text
        assert owner.get("/v1/tasks/after").json()["status"] == "QUEUED"
        assert server.process is not None and server.process.poll() is None  # no restart


def _as_an_unprivileged_user() -> tuple[list[str], int, int] | None:
    """How to run `serve` as a user whom permission bits bind: as itself when not root, else
    as `nobody` through util-linux's setpriv (the command prefix and the uid and gid that own
    its files); None where root cannot drop its privileges here."""
    if os.geteuid() != 0:
        return [], os.geteuid(), os.getegid()
    setpriv = shutil.which("setpriv")
    if setpriv is None:
        return None
    user = pwd.getpwnam("nobody")
    prefix = [setpriv, f"--reuid={user.pw_uid}", f"--regid={user.pw_gid}", "--clear-groups"]
    return prefix, user.pw_uid, user.pw_gid


# A writer that ends without closing (killed, say) leaves its -wal and -shm behind: after a
# read, an empty -wal; after a write, one that holds its commit (a token issued), which the
# server must read back through a read-only -shm. Prints the token it issued, if any.
LEAVE_AFTER_A_READ = (
    "import os, sys, apsw; kept = apsw.Connection(sys.argv[1]); "
    "kept.execute('select 1 from sqlite_master').fetchall(); os._exit(0)"
)
LEAVE_AFTER_A_WRITE = (
    "import os, sys; from aios_ledger.shell import Database; "
    "from aios_ledger.shell.api.tokens import issue_token; kept = Database(sys.argv[1]); "
    "print(issue_token(kept, 'owner-2', ['owner'])['token'], flush=True); os._exit(0)"
)


@pytest.mark.parametrize(
    ("leave", "read_only"),
    [
        pytest.param(LEAVE_AFTER_A_READ, ("", "-wal", "-shm"), id="folder-wal-shm-after-a-read"),
        pytest.param(LEAVE_AFTER_A_WRITE, ("", "-wal", "-shm"), id="folder-wal-shm-after-a-write"),
        pytest.param(LEAVE_AFTER_A_WRITE, ("-wal",), id="wal-alone-after-a-write"),
    ],
)
def test_a_server_on_a_read_only_folder_wal_or_shm_writes_once_they_are_writable(
    tmp_path: Path, leave: str, read_only: tuple[str, ...]
) -> None:
    """The ledger file is writable but its folder, `-wal` and `-shm` are not (left by a writer
    that ended without closing): the connections SQLite opens then share a read-only `-shm`,
    which the server must close them all to drop. With only the `-wal` read-only, SQLite begins
    a write that it cannot finish (an I/O error), so the server asks the file system too."""
    user = _as_an_unprivileged_user()
    if user is None:
        pytest.skip("running as root without setpriv: cannot drop CAP_DAC_OVERRIDE here")
    prefix, uid, gid = user
    folder = Path(tempfile.mkdtemp(prefix="read-only-folder-"))  # `nobody` may not enter tmp_path
    ledger = folder / "ledger.db"
    try:
        with Database(ledger) as opened:
            token = str(issue_token(opened, "owner-1", ["owner"])["token"])
        left = subprocess.run(
            [sys.executable, "-c", leave, str(ledger)], check=True, capture_output=True, text=True
        )
        token = left.stdout.strip() or token
        files = [ledger, ledger.with_name("ledger.db-wal"), ledger.with_name("ledger.db-shm")]
        assert (files[1].stat().st_size > 0) == (leave is LEAVE_AFTER_A_WRITE)
        for path in [folder, *files]:
            os.chown(path, uid, gid)
        made_read_only = [Path(f"{ledger}{suffix}") if suffix else folder for suffix in read_only]
        for path in made_read_only:
            path.chmod(0o555 if path == folder else 0o444)
        task = {"task_id": "after", "goal": "g", "instructions": "i"}
        with ServeProcess(ledger, log=tmp_path / "serve.log", command_prefix=prefix) as server:
            owner = server.client(token=token)
            not_ready = server.client().get("/v1/ready")
            assert not_ready.status_code == 503, not_ready.text
            assert not_ready.json()["code"] == "DATABASE_READ_ONLY", not_ready.text
            refused = owner.post("/v1/tasks", json={"idempotency_key": "k-1", "task": task})
            assert (refused.status_code, refused.json()["code"]) == (503, "DATABASE_READ_ONLY")
            assert repr(str(ledger)) in refused.json()["detail"]  # the file, and what to do
            assert owner.get("/v1/tasks").status_code == 200  # reads go on meanwhile
            for path in made_read_only:
                path.chmod(0o755 if path == folder else 0o644)
            for _ in range(PROBE_TRIES):
                if server.client().get("/v1/ready").status_code == 200:
                    break
                time.sleep(0.1)
            else:
                raise AssertionError(f"/v1/ready never said ready: {server.log()}")
            created = owner.post("/v1/tasks", json={"idempotency_key": "k-1", "task": task})
            assert created.status_code == 201, created.text
            assert owner.get("/v1/tasks/after").json()["status"] == "QUEUED"
            assert server.process is not None and server.process.poll() is None  # no restart
        with Database(ledger) as reopened:
            assert TaskLedger(database=reopened).get("after")["status"] == "QUEUED"
        assert json.loads(cli("--db", str(ledger), "verify"))["intact"] is True
    finally:
        folder.chmod(0o755)
        shutil.rmtree(folder)


def test_a_server_on_a_read_only_folder_without_its_wal_refuses_to_start(tmp_path: Path) -> None:
    """A ledger closed cleanly has no `-wal` or `-shm`; in a read-only folder SQLite cannot make
    them and so cannot even read the file: `serve` exits at once, naming the file and what to
    do, rather than run a server that answers nothing (a supervisor starts it again)."""
    user = _as_an_unprivileged_user()
    if user is None:
        pytest.skip("running as root without setpriv: cannot drop CAP_DAC_OVERRIDE here")
    prefix, uid, gid = user
    folder = Path(tempfile.mkdtemp(prefix="read-only-folder-"))  # `nobody` may not enter tmp_path
    ledger = folder / "ledger.db"
    try:
        cli("--db", str(ledger), "init")
        for path in [folder, ledger]:
            os.chown(path, uid, gid)
        before = ledger.read_bytes()
        folder.chmod(0o555)
        serve = [sys.executable, "-m", "aios_ledger.shell.cli", "--db", str(ledger), "serve"]
        ended = subprocess.run(
            [*prefix, *serve, "--listen", f"127.0.0.1:{free_port()}"],
            capture_output=True,
            text=True,
            timeout=PATIENCE,
            check=False,
        )
        assert ended.returncode == 1, ended
        assert ended.stderr.startswith("DATABASE_READ_ONLY: "), ended.stderr
        assert repr(str(ledger)) in ended.stderr and "writable" in ended.stderr
        assert sorted(os.listdir(folder)) == ["ledger.db"] and ledger.read_bytes() == before
    finally:
        folder.chmod(0o755)
        shutil.rmtree(folder)


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    """A real file system of 8 MiB (tmpfs), to fill up; skipped where nothing may mount."""
    disk = tmp_path / "disk"
    disk.mkdir()
    mount = ["mount", "-t", "tmpfs", "-o", "size=8m", "tmpfs", str(disk)]
    if shutil.which("mount") is None or subprocess.run(mount, check=False).returncode:
        pytest.skip("cannot mount a small tmpfs here")
    try:
        yield disk
    finally:
        subprocess.run(["umount", "-l", str(disk)], check=True)


def _fill(disk: Path) -> Path:
    filler = disk / "filler"
    # Unbuffered: a buffered writer keeps what ENOSPC refused and fails again on close, or not,
    # by how the free space happens to align with its chunks (the schema's size decides it).
    with filler.open("wb", buffering=0) as out:
        try:
            while True:
                out.write(b"\0" * 65536)
        except OSError as full:
            assert full.errno == errno.ENOSPC, full
    return filler


def test_a_server_on_a_full_disk_writes_again_once_there_is_room(
    small_disk: Path, tmp_path: Path
) -> None:
    ledger = small_disk / "full.db"
    with Database(ledger) as opened:
        token = str(issue_token(opened, "owner-1", ["owner"])["token"])
    with ServeProcess(ledger, log=tmp_path / "full.serve.log") as server:
        owner = server.client(token=token)
        assert server.client().get("/v1/ready").status_code == 200
        filler = _fill(small_disk)
        refusal = None
        for number in range(200):
            task = {"task_id": f"t-{number}", "goal": "g", "instructions": "x" * 60_000}
            answer = owner.post("/v1/tasks", json={"idempotency_key": f"k-{number}", "task": task})
            if answer.status_code != 201:
                refusal = (number, answer.status_code, answer.json()["code"])
                break
        assert refusal is not None and refusal[1:] in {
            (503, "STORAGE_FULL"),
            (503, "STORAGE_IO_ERROR"),
        }, refusal
        not_ready = server.client().get("/v1/ready")
        assert not_ready.status_code == 503 and not_ready.json()["code"].startswith("STORAGE_")
        assert server.client().get("/v1/health").status_code == 200
        filler.unlink()
        for _ in range(PROBE_TRIES):
            if server.client().get("/v1/ready").status_code == 200:
                break
            time.sleep(0.1)
        else:
            raise AssertionError("/v1/ready never said ready after room was made")
        refused_id = f"t-{refusal[0]}"
        assert owner.get(f"/v1/tasks/{refused_id}").status_code == 404  # nothing of it written
        task = {"task_id": refused_id, "goal": "g", "instructions": "i"}
        again = owner.post("/v1/tasks", json={"idempotency_key": "again", "task": task})
        assert again.status_code == 201, again.text
        assert len(owner.get("/v1/tasks", params={"limit": 1000}).json()["tasks"]) == refusal[0] + 1
        assert server.process is not None and server.process.poll() is None  # no restart


def test_ready_on_postgresql_is_a_shared_write_probe(postgres_database: str | None) -> None:
    """On PostgreSQL the probe is an empty row-locked transaction: ready while writers write,
    the Merkle log's integration reported beside."""
    url = postgres_url(postgres_database)
    with ApiServer(url, role_tokens=True) as server:
        ready = server.client().get("/v1/ready").json()
        assert ready["status"] == "ready" and ready["integration"]["inline"] is False
        body = {"idempotency_key": "k", "task": {"goal": "g", "instructions": "i"}}
        assert server.client("owner").post("/v1/tasks", json=body).status_code == 201
        assert server.client().get("/v1/ready").status_code == 200


# Ids a URL path cannot address, or only as something else.
UNADDRESSABLE = (
    "a/b",
    "tasks/../x",
    ".",
    "..",
    "a%2Fb",
    "a?b",
    "a#b",
    "a b",
    "a\tb",
    "a\nb",
    "a\x7fb",
    "a\u202eb",
)


def test_ids_no_route_can_address_are_refused_at_creation(tmp_path: Path) -> None:
    with ApiServer(tmp_path / "ids.db", role_tokens=True) as server:
        owner, agent = server.client("owner"), server.client("agent")
        refused = 0
        for number, bad in enumerate(UNADDRESSABLE):
            task = {"task_id": bad, "goal": "g", "instructions": "i"}
            answer = owner.post("/v1/tasks", json={"idempotency_key": f"k-{number}", "task": task})
            assert answer.status_code == 422, (bad, answer.text)
            assert answer.json()["code"] == "FIELDS_INVALID" and "task_id" in answer.text
            run = agent.post("/v1/runs", json={"prompt": "p", "run_id": bad})
            assert run.status_code == 422 and "run_id" in run.text, (bad, run.text)
            refused += 1
        assert refused == len(UNADDRESSABLE)
        assert owner.get("/v1/tasks").json()["tasks"] == []
        # What the rule lets through, every route reaches.
        allowed = "a:b@c+d=e.f_g-h"
        body = {
            "idempotency_key": "ok",
            "task": {"task_id": allowed, "goal": "g", "instructions": "i"},
        }
        assert owner.post("/v1/tasks", json=body).status_code == 201
        assert owner.get(f"/v1/tasks/{allowed}").json()["task_id"] == allowed
        assert owner.get(f"/v1/tasks/{allowed}/events").status_code == 200


def test_a_number_too_large_is_422_over_http(tmp_path: Path) -> None:
    with ApiServer(tmp_path / "number.db", role_tokens=True) as server:
        owner = server.client("owner")
        raw = '{"idempotency_key": "k", "task": {"goal": "g", "instructions": "i", "x": %s}}'
        answer = owner.post(
            "/v1/tasks",
            content=raw % ("9" * 40),
            headers={"Content-Type": "application/json"},
        )
        assert (answer.status_code, answer.json()["code"]) == (422, "JSON_NUMBER_TOO_LARGE")
        assert owner.get("/v1/tasks").json()["tasks"] == []


def test_a_review_run_no_route_can_address_is_refused_at_its_spawn(tmp_path: Path) -> None:
    with ApiServer(tmp_path / "review.db", role_tokens=True) as server:
        reviewer = server.client("reviewer")
        target = ExecutionTarget(evidence_session("t"), "t@1")
        digest = "sha256:" + "0" * 64
        spec = AuxiliaryRunSpec(ExecutionFrame.root(target), REVIEW_KIND, "review it", digest)
        body = {
            "spec": spec.with_id("review:t/../x:1:1").public(),
            "evidence": {"target": target.public()},
            "owner": "host:1:abc",
        }
        answer = reviewer.post("/v1/review-runs", json=body)
        assert answer.status_code == 422, answer.text
        assert answer.json()["code"] == "FIELDS_INVALID" and "spec.id" in answer.text


def _documented_statuses() -> list[tuple[str, int]]:
    text = (ROOT / "docs" / "http-api.md").read_text()
    section = text.split("## Status of each code", 1)[1].split("\n## ", 1)[0]
    return [
        (code, int(status))
        for code, status in re.findall(r"^\| `([A-Z_*]+)` \| (\d{3}) \|$", section, re.MULTILINE)
    ]


def test_the_status_table_is_the_documented_one() -> None:
    documented = _documented_statuses()
    exact = {code: status for code, status in documented if "*" not in code}
    parts = [
        (code.strip("*"), status)  # `STORAGE_*` -> `STORAGE_`, `*_NOT_FOUND` -> `_NOT_FOUND`
        for code, status in documented
        if "*" in code
    ]
    assert exact == STATUS_BY_CODE
    assert parts == list(STATUS_BY_PART)
    for code, status in documented:
        if "*" not in code:
            assert status_of(code) == status, code
    # The shape codes of JSON documents are 422, whatever their name.
    for code in ("JSON_INVALID", "JSON_NOT_OBJECT", "JSON_TOO_DEEP", "JSON_TOO_LARGE"):
        assert status_of(code) == 422
    assert status_of("JSON_NUMBER_TOO_LARGE") == 422
    assert status_of("GIT_ROW_CORRUPT") == 500


def test_a_new_binding_whose_job_id_holds_a_slash_is_refused_and_a_stored_one_replays() -> None:
    """The binding route's path is `/v1/bindings/{task_id}/{job_id}`: a job id with `/` could
    never be read back over HTTP. One stored before the rule still replays (its row reads)."""
    tail = LogTail.read(3, [LEDGER_CHAIN], [ChainTip(LEDGER_CHAIN, 2, "sha256:" + "2" * 64)])
    slashed = binding(job_id="job/1")
    with pytest.raises(LedgerError) as refused:
        decide_register_binding(BindingState(None, tail), slashed, now=NOW, actor=ACTOR)
    assert refused.value.code == "FIELDS_INVALID" and "job_id" in refused.value.detail
    stored = BindingRow(
        task_id=slashed.task_id,
        job_id=slashed.job_id,
        binding_sha256=sha256_hex(slashed.public()),
        binding_json=canonical_json(slashed.public()),
        created_at=NOW.text,
    )
    replay = decide_register_binding(BindingState(stored, tail), slashed, now=NOW, actor=ACTOR)
    assert isinstance(replay, Replay) and replay.response["idempotent"] is True


def test_without_group_commit_the_writer_is_opened_again_once_the_file_is_writable(
    immutable_ledger: tuple[Path, str], chattr: str
) -> None:
    ledger, _ = immutable_ledger
    backend = Backend(ApiSettings(db_path=str(ledger), group_commit=0))
    task = {"task_id": "later", "goal": "g", "instructions": "i"}

    def create(stores: Stores) -> object:
        return stores.tasks.create_task(task, idempotency_key="later")

    try:
        with pytest.raises(LedgerError) as refused:
            backend.write_now(create)
        assert refused.value.code == "DATABASE_READ_ONLY"
        subprocess.run([chattr, "-i", str(ledger)], check=True)
        for _ in range(PROBE_TRIES):
            try:
                backend.ready_now()
                break
            except LedgerError as waiting:
                assert waiting.code == "DATABASE_READ_ONLY", waiting
            time.sleep(0.1)
        else:
            raise AssertionError("the writer was never opened again")
        backend.write_now(create)
        assert backend.read_now(lambda stores: stores.tasks.get("later"))["status"] == "QUEUED"
    finally:
        backend.close()
