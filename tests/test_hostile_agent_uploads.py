"""A hostile agent's uploads against the server `serve` runs (uvicorn on loopback), real git
and a real governed repository: the cheap checks (token, role, holder, lease) come before the
body is read, decoded or scanned, and a refused upload leaves nothing behind.

Figures: 23 hostile cases tried, 23 refused, each with its stable code: 16 uploads (HTTP, the
CLI, the library), none of which leaves a proposal, a bundle file, a scratch folder or a git
object behind; 6 task writes to another agent's task (3 bodies that are not JSON, refused as
such; 3 with the holder's own lease token, refused NOT_TASK_HOLDER by the core in the write);
and 1 write to another agent's run.

Each test tells the cheap check from the expensive one by what it answers: a body that is not
JSON, a bundle that is not base64, a bundle file that does not exist would each be refused by
their own code if they were read first, so the answer's code shows which check ran first.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Iterator
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest
from aios_ledger.core import LedgerError
from aios_ledger.shell.db.connection import Database, fetch_all
from aios_ledger.shell.git.proposals import proposals_dir, record_proposal
from aios_ledger.shell.git.workspace import LEASE_TOKEN_HEADER
from aios_ledger.shell.log.verification import verify_log
from api_server import ApiServer
from cli_runner import run_cli
from git_support import (
    CAPABILITY,
    binding,
    edit,
    git,
    governed_task,
    make_repository,
    register,
    repository_files,
    workspace,
)
from hostile_support import bundle_bomb, listing, problem

WRONG_LEASE = "x" * 43
# The bundle: one 4 MiB blob under 5 paths, a few KB once packed.
BOMB_BYTES = 4 * 1024 * 1024
BOMB_PATHS = 5


def objects(bare: Path) -> list[str]:
    return listing(bare / "objects")


def bomb(live: dict[str, Any]) -> bytes:
    """A valid bundle on the base that would cost a scan: one big blob under several paths."""
    root: Path = live["root"]
    work = root / "bomb-work"
    git("clone", "--quiet", str(live["bare"]), str(work))
    out = root / "bomb.bundle"
    return bundle_bomb(work / ".git", live["base"], out, paths=BOMB_PATHS, blob_bytes=BOMB_BYTES)


@pytest.fixture
def live(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[dict[str, Any]]:
    """A server whose scratch folders go to a folder of the test's own (TMPDIR), a governed
    repository and a bound task claimed by `agent-1`."""
    scratch = tmp_path / "server-tmp"
    scratch.mkdir()
    monkeypatch.setenv("TMPDIR", str(scratch))
    db = tmp_path / "ledger.db"
    with ApiServer(db, role_tokens=True) as server:
        bare, base = make_repository(tmp_path)
        register(db, bare)
        governed_task(server.db, "task-held", binding("task-held", base))
        governed_task(server.db, "task-free", binding("task-free", base))
        answer = server.client("agent").post(
            "/v1/claims",
            json={"capabilities": [CAPABILITY], "lease_seconds": 300, "task_id": "task-held"},
        )
        assert answer.status_code == 200, answer.text
        with Database(db) as opened:
            bundles = proposals_dir(opened)
        yield {
            "server": server,
            "bare": bare,
            "base": base,
            "claimed": answer.json(),
            "lease": answer.json()["lease_token"],
            "scratch": scratch,
            "bundles": bundles,
            "root": tmp_path,
        }
        with Database(db) as opened:
            assert verify_log(opened).intact


class LeftBehind:
    """What a refused upload must not leave: a recorded proposal, a stored bundle, a scratch
    folder, a git object, a repository file."""

    def __init__(self, live: dict[str, Any]) -> None:
        self.live = live
        self.before = self.now()

    def now(self) -> tuple[Any, ...]:
        live = self.live
        with Database(live["server"].db) as db:
            proposals = db.read(
                lambda conn: [
                    fetch_all(conn, "task_proposals_of_task", {"task_id": task})
                    for task in ("task-held", "task-free")
                ]
            )
        return (
            proposals,
            listing(live["bundles"]),
            listing(live["scratch"]),
            objects(live["bare"]),
            repository_files(live["bare"]),
        )

    def assert_nothing(self) -> None:
        assert self.now() == self.before


def upload(bundle: bytes, *, lease: str | None = None) -> dict[str, str]:
    body: dict[str, str] = {"bundle_base64": base64.b64encode(bundle).decode()}
    if lease is not None:
        body["lease_token"] = lease
    return body


def test_an_agent_holding_nothing_is_refused_before_its_bomb_is_scanned(
    live: dict[str, Any],
) -> None:
    """The issue's case: a bundle that costs a scan, for a task nobody holds, with a lease
    that is not the task's: refused LEASE_INVALID and nothing stored (the bundle used to be
    scanned for a minute, then refused, and its file kept)."""
    server, data = live["server"], bomb(live)
    left = LeftBehind(live)
    stranger = server.client("agent-2")
    url = "/v1/tasks/task-free/proposal"
    headers = {LEASE_TOKEN_HEADER: WRONG_LEASE}
    problem(stranger.post(url, json=upload(data), headers=headers), 409, "LEASE_INVALID")
    # The lease in the body (a client before the header): refused before the bundle is decoded.
    problem(stranger.post(url, json=upload(data, lease=WRONG_LEASE)), 409, "LEASE_INVALID")
    # Another agent's task: the holder's check, with the header or without (before the lease).
    held = "/v1/tasks/task-held/proposal"
    problem(stranger.post(held, json=upload(data), headers=headers), 403, "NOT_TASK_HOLDER")
    problem(stranger.post(held, json=upload(data, lease=WRONG_LEASE)), 403, "NOT_TASK_HOLDER")
    left.assert_nothing()


def test_a_wrong_lease_header_is_refused_before_the_body_is_read(live: dict[str, Any]) -> None:
    """The header's lease is checked before the body: a body that is not even JSON, or nests
    past the parser's depth, is answered LEASE_INVALID, not by the body's refusal."""
    server = live["server"]
    left = LeftBehind(live)
    holder = server.client("agent")
    url = "/v1/tasks/task-held/proposal"
    wrong = {LEASE_TOKEN_HEADER: WRONG_LEASE, "Content-Type": "application/json"}
    problem(holder.post(url, content=b"{not json", headers=wrong), 409, "LEASE_INVALID")
    problem(holder.post(url, content=b"[" * 5000, headers=wrong), 409, "LEASE_INVALID")
    # Without a token, or with an owner's, the token's and the role's refusals come first.
    anonymous = httpx.post(server.url + url, content=b"{not json", headers=wrong)
    problem(anonymous, 401, "UNAUTHENTICATED")
    problem(server.client("owner").post(url, content=b"{not json", headers=wrong), 403, "FORBIDDEN")
    left.assert_nothing()


def test_a_body_lease_is_checked_before_the_bundle_is_decoded(live: dict[str, Any]) -> None:
    """Without the header, the body's lease (compatibility) is checked before its bundle is
    decoded: a bundle that is not base64 under a wrong lease is LEASE_INVALID, and a lease
    sent twice must agree."""
    server = live["server"]
    left = LeftBehind(live)
    holder = server.client("agent")
    url = "/v1/tasks/task-held/proposal"
    body = {"lease_token": WRONG_LEASE, "bundle_base64": "%%% not base64"}
    problem(holder.post(url, json=body), 409, "LEASE_INVALID")
    both = {"lease_token": WRONG_LEASE, "bundle_base64": "AAAA"}
    disagreeing = {LEASE_TOKEN_HEADER: live["lease"]}
    problem(holder.post(url, json=both, headers=disagreeing), 422, "FIELDS_INVALID")
    problem(holder.post(url, json={"bundle_base64": "AAAA"}), 422, "FIELDS_INVALID")
    left.assert_nothing()


def test_the_holder_uploads_with_the_lease_in_the_header(
    live: dict[str, Any], tmp_path: Path
) -> None:
    """The header carries the lease of a proposal that is recorded as before (the body's
    lease may come too when it is the same); the attempt's next upload is answered by its
    digest without a scan."""
    server, base = live["server"], live["base"]
    space = workspace(server.db, live["claimed"])
    try:
        edit(space, {"ok.txt": "fine\n"})
        out = tmp_path / "ok.bundle"
        git("bundle", "create", "--quiet", str(out), "HEAD", "--not", base, cwd=space.path)
        data = out.read_bytes()
    finally:
        space.remove()
    holder = server.client("agent")
    url = "/v1/tasks/task-held/proposal"
    headers = {LEASE_TOKEN_HEADER: live["lease"]}
    recorded = holder.post(url, json=upload(data), headers=headers)
    assert recorded.status_code == 201, recorded.text
    assert recorded.json()["changed_files"] == ["ok.txt"]
    again = holder.post(url, json=upload(data, lease=live["lease"]), headers=headers)
    assert again.status_code == 200 and again.json()["idempotent"] is True
    # Another bundle for the attempt is refused by its digest, before it is read: bytes that are
    # no bundle at all are PROPOSAL_CONFLICT, not BUNDLE_INVALID.
    left = LeftBehind(live)
    problem(holder.post(url, json=upload(b"no bundle"), headers=headers), 409, "PROPOSAL_CONFLICT")
    left.assert_nothing()


def test_task_and_run_routes_check_the_holder_in_the_write(live: dict[str, Any]) -> None:
    """heartbeat, result, release of another agent's task, and an event on another agent's
    run, are refused by the core's decision, in the write, even with the holder's own lease
    token: these routes make no read of their own, so their bodies are parsed first (a body
    that is not JSON is refused as such)."""
    server = live["server"]
    stranger = server.client("agent-2")
    garbage, json_type = b"{not json", {"Content-Type": "application/json"}
    lease = live["claimed"]["lease_token"]
    bodies = {
        "heartbeat": {"lease_token": lease, "lease_seconds": 60},
        "result": {"lease_token": lease, "result": {}, "idempotency_key": "stolen"},
        "release": {"lease_token": lease, "reason": "stolen"},
    }
    for route, body in bodies.items():
        url = f"/v1/tasks/task-held/{route}"
        problem(stranger.post(url, content=garbage, headers=json_type), 422, "JSON_INVALID")
        problem(stranger.post(url, json=body), 403, "NOT_TASK_HOLDER")
    run = server.client("agent").post("/v1/runs", json={"prompt": "p"})
    assert run.status_code == 201, run.text
    events = f"/v1/runs/{run.json()['run_id']}/events"
    problem(stranger.post(events, content=garbage, headers=json_type), 422, "JSON_INVALID")
    problem(stranger.post(events, json={"kind": "note", "payload": 1}), 403, "NOT_RUN_OWNER")


def test_the_cli_checks_the_lease_before_reading_the_bundle(
    live: dict[str, Any], tmp_path: Path
) -> None:
    """`aios-ledger propose` (a real process) with a wrong lease: LEASE_INVALID, although its
    bundle file does not exist (it used to be read first: INPUT_UNREADABLE)."""
    server = live["server"]
    left = LeftBehind(live)
    request = tmp_path / "propose.json"
    missing = str(tmp_path / "no-such.bundle")
    request.write_text(
        json.dumps({"task_id": "task-held", "lease_token": WRONG_LEASE, "bundle": missing})
    )
    done = run_cli("--db", server.db, "propose", "--json", request)
    assert done.returncode != 0
    assert done.stderr.startswith("LEASE_INVALID: "), done.stderr
    left.assert_nothing()


def test_the_library_checks_the_lease_before_the_bundle(live: dict[str, Any]) -> None:
    """`record_proposal` (the local worker's path) refuses a wrong lease before it looks at
    the bytes (bytes that are no bundle would be BUNDLE_INVALID), and an agent that is not the
    holder before its lease."""
    server, data = live["server"], bomb(live)
    left = LeftBehind(live)
    with Database(server.db) as db:
        with pytest.raises(LedgerError) as wrong:
            record_proposal(db, "task-held", b"not a bundle", lease_token=WRONG_LEASE)
        assert wrong.value.code == "LEASE_INVALID"
        with pytest.raises(LedgerError) as stranger:
            record_proposal(db, "task-held", data, lease_token=live["lease"], agent_id="agent-2")
        assert stranger.value.code == "NOT_TASK_HOLDER"
    left.assert_nothing()


def test_a_lease_that_passes_during_the_scan_leaves_no_bundle_behind(
    live: dict[str, Any],
) -> None:
    """The lease is checked again in the write: a clock that passes the lease after the cheap
    check (as a long scan would) gets LEASE_EXPIRED, and the bundle stored for the write is
    removed (it used to stay in the bundles folder)."""
    server = live["server"]
    readings = iter([datetime.now().astimezone()])

    def clock() -> datetime:
        # The admission reads the clock first; every later reading is an hour on.
        return next(readings, datetime.now().astimezone() + timedelta(hours=1))

    space = workspace(server.db, live["claimed"])
    try:
        edit(space, {"late.txt": "late\n"})
        out = Path(space.root, "late.bundle")
        git("bundle", "create", "--quiet", str(out), "HEAD", "--not", live["base"], cwd=space.path)
        data = out.read_bytes()
    finally:
        space.remove()
    left = LeftBehind(live)
    with Database(server.db) as db, pytest.raises(LedgerError) as late:
        record_proposal(db, "task-held", data, lease_token=live["lease"], clock=clock)
    assert late.value.code == "LEASE_EXPIRED"
    left.assert_nothing()
