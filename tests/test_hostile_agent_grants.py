"""A hostile agent against capability grants and separation of duties (issue 26, item 5).

Figures: 22 hostile cases tried, 22 refused (each with its stable code, nothing changed):
capability lies over HTTP (a named claim, the next-eligible claim, a batch, a long poll, a
keyed claim, a token issued with no grant, `worker --api` on a governed repository: 7), a
forged or widened grant (`token issue` refusals: 3; a grant widened by hand in the database,
which `verify` reports: 1), self-review (an agent+reviewer token over HTTP, a reviewer token
re-issued under the author's name, `review --api`, the library with a named reviewer, a batch
verify, a local `review --as` the author's name: 6), a local review that names nobody (the
command line and the library) and an `--as` beside `--api` that is not the token's name (3), and
the library's named grant (a claim and a batch claim: 2).

Everything runs against the server `serve` runs on loopback (tests/api_server.py), real
SQLite files, the real command line (in this process: tests/cli_runner.py), and a real bare git
repository for the governed task.
"""

from __future__ import annotations

import json
import secrets
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from aios_ledger.core import (
    ClaimRequest,
    LedgerError,
    LogTail,
    TaskState,
    Timestamp,
    decide_claim,
)
from aios_ledger.core.actors import Actor
from aios_ledger.core.api.tokens import API_TOKENS
from aios_ledger.core.log.rows import row_digest
from aios_ledger.core.log.state import stored_row_state
from aios_ledger.core.sealed_tables import SEALED_TABLES
from aios_ledger.shell.api.tokens import authenticate, issue_token, list_tokens
from aios_ledger.shell.db.connection import Database
from aios_ledger.shell.log.verification import verify_log
from aios_ledger.shell.tasks.ledger import TaskLedger
from aios_ledger.shell.work.reviewer import review_submitted
from api_server import ApiServer, cli
from cli_runner import CliResult, run_cli
from git_support import (
    CAPABILITY,
    binding,
    events_of,
    governed_task,
    make_repository,
    register,
    repository_files,
)
from hostile_support import problem as refused
from legacy_fixtures import rows
from test_worker_e2e import AGENT, REVIEWER, create, event_types, task

# Who the decisions here act as.
ACTOR = Actor("tester", "library")


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ApiServer]:
    with ApiServer(tmp_path_factory.mktemp("grants") / "ledger.db", role_tokens=True) as running:
        yield running


def unique(prefix: str) -> str:
    return f"{prefix}-{secrets.token_hex(5)}"


def queued(server: ApiServer, *needs: str) -> str:
    answer = server.client("owner").post(
        "/v1/tasks",
        json={
            "idempotency_key": unique("k"),
            "task": {"goal": "g", "instructions": "i", "required_capabilities": list(needs)},
        },
    )
    assert answer.status_code == 201, answer.text
    return str(answer.json()["task_id"])


def ledger_rows(db: Path) -> dict[str, list[tuple[Any, ...]]]:
    """What a refusal must leave as it was: the tasks, the events, the recorded answers."""
    return {
        table: rows(db, f"SELECT * FROM {table} ORDER BY 1")
        for table in ("tasks", "events", "task_idempotency", "api_tokens")
    }


def granted_agent(server: ApiServer, *capabilities: str) -> tuple[str, httpx.Client]:
    name = unique("agent")
    token = server.issue(name, "agent", capabilities=list(capabilities))
    return name, server.client(token=token)


# -- capability lies ------------------------------------------------------------------------


@pytest.mark.parametrize(
    "claim",
    [
        pytest.param({"task_id": "{task}"}, id="named-task"),
        pytest.param({}, id="next-eligible"),
        pytest.param({"limit": 5}, id="batch"),
        pytest.param({"wait_seconds": 5}, id="long-poll"),
        pytest.param({"idempotency_key": "{key}", "lease_token": "{lease}"}, id="keyed"),
    ],
)
def test_a_claim_offering_an_ungranted_capability_is_refused_and_changes_nothing(
    server: ApiServer, claim: dict[str, Any]
) -> None:
    """The agent lists `gpu.secret` beside its granted `python` to take a task that needs it:
    403 CAPABILITY_NOT_GRANTED naming the extra capability, however the claim is made."""
    secret = unique("gpu.secret")
    task_id = queued(server, secret)
    _, agent = granted_agent(server, "python")
    fields = {
        name: value.format(task=task_id, key=unique("k"), lease="L" * 43)
        if isinstance(value, str)
        else value
        for name, value in claim.items()
    }
    before = ledger_rows(server.db)
    answer = agent.post(
        "/v1/claims",
        json={"capabilities": ["python", secret], "lease_seconds": 60, **fields},
    )
    detail = refused(answer, 403, "CAPABILITY_NOT_GRANTED")
    assert secret in detail and "python" in detail
    assert ledger_rows(server.db) == before
    assert task(server.db, task_id)["status"] == "QUEUED"


def test_a_token_issued_without_capabilities_claims_only_what_needs_none(
    server: ApiServer,
) -> None:
    """The default grant is none: offering any capability is refused; offering none takes a
    task that needs none, never one that needs a capability."""
    needs_gpu = queued(server, unique("gpu"))
    name, agent = granted_agent(server)
    before = ledger_rows(server.db)
    refused(
        agent.post("/v1/claims", json={"capabilities": ["gpu"], "lease_seconds": 60}),
        403,
        "CAPABILITY_NOT_GRANTED",
    )
    assert ledger_rows(server.db) == before
    answer = agent.post(
        "/v1/claims", json={"capabilities": [], "lease_seconds": 60, "task_id": needs_gpu}
    )
    refused(answer, 409, "CAPABILITY_MISSING")
    plain = queued(server)
    answer = agent.post(
        "/v1/claims", json={"capabilities": [], "lease_seconds": 60, "task_id": plain}
    )
    assert answer.status_code == 200, answer.text
    assert task(server.db, plain)["claimed_by"] == name


def test_a_granted_subset_claims_and_the_grant_is_sealed_and_listed(server: ApiServer) -> None:
    python = unique("python")
    task_id = queued(server, python)
    name, agent = granted_agent(server, python, "gpu")
    answer = agent.post(
        "/v1/claims", json={"capabilities": [python], "lease_seconds": 60, "task_id": task_id}
    )
    assert answer.status_code == 200, answer.text
    with Database(server.db) as opened:
        (listed,) = [view for view in list_tokens(opened) if view["name"] == name]
        report = verify_log(opened)
    assert report.intact, report.public()
    assert (listed["capabilities"], listed["grant"]) == (sorted([python, "gpu"]), "listed")
    (payload,) = [
        json.loads(text)
        for (text,) in rows(
            server.db,
            "SELECT payload_json FROM events WHERE event_type = 'API_TOKEN_ISSUED'"
            " AND payload_json LIKE ?",
            (f'%"{name}"%',),
        )
    ]
    assert payload == {"name": name, "roles": ["agent"], "capabilities": sorted([python, "gpu"])}
    whoami = agent.get("/v1/whoami").json()
    assert whoami == {"name": name, "roles": ["agent"], "capabilities": sorted([python, "gpu"])}


def test_worker_over_the_api_cannot_lie_its_way_to_a_governed_repository(
    tmp_path: Path,
) -> None:
    """A governed task needs the runtime capability; an agent granted only `python` runs
    `worker --api --capability <it>`: refused at its first claim, the task stays QUEUED and
    the repository is byte for byte as it was."""
    db = tmp_path / "ledger.db"
    with ApiServer(db) as server:
        bare, base = make_repository(tmp_path)
        register(db, bare)
        governed_task(db, "task-governed", binding("task-governed", base))
        token = server.token_file(tmp_path, "liar", "agent", capabilities=["python"])
        before = repository_files(bare)
        worked = run_cli(
            "--db",
            "/nonexistent/no.db",
            "worker",
            "--api",
            server.url,
            "--token-file",
            str(token),
            "--agent-id",
            "liar",
            "--capability",
            CAPABILITY,
            "--exec",
            AGENT,
            "--once",
        )
        assert worked.returncode != 0
        assert "CAPABILITY_NOT_GRANTED" in worked.stderr
        assert repository_files(bare) == before
        assert events_of(db, "task-governed")[-1] != "TASK_CLAIMED"
        assert task(db, "task-governed")["status"] == "QUEUED"


# -- forged or widened grants -------------------------------------------------------------


@pytest.mark.parametrize(
    "flags",
    [
        pytest.param(["--capability", "gpu secret"], id="not-a-name"),
        pytest.param(["--capability", ""], id="empty-name"),
        pytest.param(["--capability", "gpu", "--any-capability"], id="list-and-any"),
    ],
)
def test_token_issue_refuses_a_bad_grant_and_writes_nothing(
    tmp_path: Path, flags: list[str]
) -> None:
    db = tmp_path / "ledger.db"
    cli("--db", str(db), "init")
    before = ledger_rows(db)
    answer = run_cli("--db", str(db), "token", "issue", "w1", "--role", "agent", *flags)
    assert answer.returncode != 0
    assert "FIELDS_INVALID" in answer.stderr
    assert ledger_rows(db) == before


def test_a_grant_widened_by_hand_is_reported_by_verify(tmp_path: Path) -> None:
    db = tmp_path / "ledger.db"
    with Database(db) as opened:
        issue_token(opened, "w1", ["agent"], capabilities=["python"])
    with sqlite3.connect(db) as con:
        con.execute("""UPDATE api_tokens SET capabilities_json = '["gpu.secret","python"]'""")
    con.close()
    with Database(db) as opened:
        report = verify_log(opened)
    assert not report.intact
    assert {(f.code, f.table, f.key) for f in report.findings} == {
        ("STATE_MISMATCH", "api_tokens", "w1")
    }


def test_a_token_from_before_grants_has_no_ceiling_and_says_so(tmp_path: Path) -> None:
    """A row issued before 0.x migration 0012 holds NULL: its seal, taken without the column,
    still proves it while it is NULL (and not once a value is written there by hand); the
    token authenticates with no ceiling and `token list` says why."""
    columns = {
        "name": "old-agent",
        "roles_json": '["agent"]',
        "token_sha256": "a" * 64,
        "status": "ACTIVE",
        "revision": 1,
        "created_at": "2026-11-30T12:00:00.000Z",
        "updated_at": "2026-11-30T12:00:00.000Z",
    }
    sealed = row_digest(API_TOKENS, "old-agent", columns)
    legacy = {**columns, "capabilities_json": None}
    assert stored_row_state(SEALED_TABLES[API_TOKENS], legacy, sealed) == ("old-agent", sealed)
    widened = {**columns, "capabilities_json": '["gpu.secret"]'}
    assert stored_row_state(SEALED_TABLES[API_TOKENS], widened, sealed)[1] != sealed

    db = tmp_path / "ledger.db"
    with Database(db) as opened:
        token = issue_token(opened, "old-agent", ["agent"])["token"]
    with sqlite3.connect(db) as con:
        con.execute("UPDATE api_tokens SET capabilities_json = NULL")
    con.close()
    with Database(db) as opened:
        principal = authenticate(opened, token)
        (view,) = list_tokens(opened)
    assert principal is not None and principal.grant is None
    assert (view["capabilities"], view["grant"]) == (None, "before-grants")
    listed = json.loads(cli("--db", str(db), "token", "list"))
    assert listed[0]["grant"] == "before-grants"


# -- self-review ----------------------------------------------------------------------------


def submitted_by(server: ApiServer, agent: httpx.Client, capability: str) -> str:
    task_id = queued(server, capability)
    claim = agent.post(
        "/v1/claims",
        json={"capabilities": [capability], "lease_seconds": 300, "task_id": task_id},
    )
    assert claim.status_code == 200, claim.text
    answer = agent.post(
        f"/v1/tasks/{task_id}/result",
        json={
            "lease_token": claim.json()["lease_token"],
            "result": {"ok": True},
            "idempotency_key": unique("s"),
        },
    )
    assert answer.status_code == 200, answer.text
    return task_id


def verdict(task_id: str) -> dict[str, Any]:
    return {"decision": "SUCCEEDED", "reason": "looks right to me", "idempotency_key": task_id}


def test_an_agent_that_is_also_a_reviewer_cannot_verify_its_own_result(
    server: ApiServer,
) -> None:
    capability = unique("cap")
    name = unique("dual")
    dual = server.client(token=server.issue(name, "agent", "reviewer", capabilities=[capability]))
    task_id = submitted_by(server, dual, capability)
    before = ledger_rows(server.db)
    detail = refused(
        dual.post(f"/v1/tasks/{task_id}/verification", json=verdict(task_id)), 403, "SELF_REVIEW"
    )
    assert name in detail
    assert ledger_rows(server.db) == before
    # Another reviewer judges it.
    answer = server.client("reviewer").post(
        f"/v1/tasks/{task_id}/verification", json=verdict(task_id)
    )
    assert answer.status_code == 200, answer.text
    assert task(server.db, task_id)["status"] == "SUCCEEDED"


def test_a_reviewer_token_reissued_under_the_authors_name_cannot_verify(
    server: ApiServer,
) -> None:
    """The author's agent token is revoked and its name issued again as a reviewer: the name,
    not the token, wrote the result, so it is still SELF_REVIEW."""
    capability = unique("cap")
    name, agent = granted_agent(server, capability)
    task_id = submitted_by(server, agent, capability)
    cli("--db", str(server.db), "token", "revoke", name)
    reviewer = server.client(token=server.issue(name, "reviewer"))
    before = ledger_rows(server.db)
    refused(
        reviewer.post(f"/v1/tasks/{task_id}/verification", json=verdict(task_id)),
        403,
        "SELF_REVIEW",
    )
    assert ledger_rows(server.db) == before


def test_review_over_the_api_with_the_authors_token_does_not_judge(tmp_path: Path) -> None:
    """`worker --api` and `review --api` under one agent+reviewer token: the review's verdict
    is refused SELF_REVIEW and the task stays SUBMITTED, until another reviewer's round."""
    db = tmp_path / "ledger.db"
    with ApiServer(db) as server:
        create(db, "task-self")
        dual = server.token_file(tmp_path, "dual", "agent", "reviewer")
        other = server.token_file(tmp_path, "r1", "reviewer")
        base = ["--db", "/nonexistent/no.db"]
        api = ["--api", server.url, "--token-file"]
        worked = run_cli(
            *base, "worker", *api, str(dual), "--agent-id", "dual", "--exec", AGENT, "--once"
        )
        assert worked.returncode == 0, worked.stderr
        own = run_cli(*base, "review", *api, str(dual), "--exec", REVIEWER)
        (review,) = json.loads(own.stdout)["reviews"]
        assert (review["outcome"], review["error_code"]) == ("verify_failed", "SELF_REVIEW")
        assert task(db, "task-self")["status"] == "SUBMITTED"
        assert "TASK_VERIFIED" not in event_types(db, "task-self")
        honest = run_cli(*base, "review", *api, str(other), "--exec", REVIEWER)
        assert honest.returncode == 0, honest.stderr
        (review,) = json.loads(honest.stdout)["reviews"]
        assert review["outcome"] == "verified"


def test_a_local_review_judges_under_its_name_and_never_its_own_result(tmp_path: Path) -> None:
    """`review --db` named nobody, so its verdicts were never held to SELF_REVIEW: the worker's
    own name could review the worker's result. Now it names its reviewer (`--as`, required),
    and the core refuses a verdict on a result that name submitted."""
    db = tmp_path / "ledger.db"
    create(db, "task-local")

    def run(*argv: str) -> CliResult:
        return run_cli("--db", str(db), *argv)

    worked = run("worker", "--agent-id", "dual", "--exec", AGENT, "--once")
    assert worked.returncode == 0, worked.stderr
    before = ledger_rows(db)
    anonymous = run("review", "--exec", REVIEWER)
    assert anonymous.returncode == 2 and anonymous.stderr.startswith("USAGE_INVALID: --as")
    assert ledger_rows(db) == before
    own = run("review", "--as", "dual", "--exec", REVIEWER)
    (review,) = json.loads(own.stdout)["reviews"]
    assert (review["outcome"], review["error_code"]) == ("verify_failed", "SELF_REVIEW")
    assert own.returncode == 1
    assert task(db, "task-local")["status"] == "SUBMITTED"
    assert "TASK_VERIFIED" not in event_types(db, "task-local")
    honest = run("review", "--as", "r1", "--exec", REVIEWER)
    assert honest.returncode == 0, honest.stderr
    (review,) = json.loads(honest.stdout)["reviews"]
    assert review["outcome"] == "verified"
    with pytest.raises(LedgerError, match=r"^FIELDS_INVALID: reviewer"):
        review_submitted(db, REVIEWER)  # the library names its reviewer too
    with Database(db) as opened:
        assert verify_log(opened).intact


def test_review_as_beside_api_must_be_the_tokens_name(tmp_path: Path) -> None:
    db = tmp_path / "ledger.db"
    with ApiServer(db) as server:
        token = server.token_file(tmp_path, "r1", "reviewer")
        api = ["--db", "/nonexistent/no.db", "review", "--api", server.url]
        other = run_cli(
            *api, "--token-file", str(token), "--as", "someone-else", "--exec", REVIEWER
        )
        assert other.returncode == 2, other.stderr
        assert other.stderr.startswith("AGENT_MISMATCH: --as")
        assert "'r1'" in other.stderr and "'someone-else'" in other.stderr
        same = run_cli(*api, "--token-file", str(token), "--as", "r1", "--exec", REVIEWER)
        assert same.returncode == 0, same.stderr


# -- the library, for a caller that names a grant or a reviewer -----------------------------


def test_the_library_holds_a_named_grant_and_a_named_reviewer(tmp_path: Path) -> None:
    db = tmp_path / "ledger.db"
    create(db, "task-lib", required_capabilities=["gpu.secret"])
    with TaskLedger(db) as ledger:
        before = ledger_rows(db)
        for claim in (
            lambda: ledger.claim(
                agent_id="w", capabilities=["gpu.secret"], lease_seconds=60, grant=["python"]
            ),
            lambda: ledger.claim_many(
                agent_id="w", capabilities=["gpu.secret"], lease_seconds=60, limit=2, grant=[]
            ),
        ):
            with pytest.raises(LedgerError) as refusal:
                claim()
            assert refusal.value.code == "CAPABILITY_NOT_GRANTED"
            assert str(refusal.value).startswith("CAPABILITY_NOT_GRANTED")
            assert ledger_rows(db) == before
        claimed = ledger.claim(
            agent_id="w", capabilities=["gpu.secret"], lease_seconds=60, grant=["gpu.secret"]
        )
        assert claimed is not None
        ledger.submit_result(
            "task-lib", lease_token=claimed["lease_token"], result={}, idempotency_key="s"
        )
        before = ledger_rows(db)
        with pytest.raises(LedgerError, match=r"^SELF_REVIEW"):
            ledger.verify("task-lib", reviewer="w", **verdict("v1"))
        with pytest.raises(LedgerError, match=r"^SELF_REVIEW"):
            ledger.verify_results([{"task_id": "task-lib", **verdict("v2")}], reviewer="w")
        assert ledger_rows(db) == before
        judged = ledger.verify("task-lib", reviewer="someone-else", **verdict("v3"))
        assert judged["status"] == "SUCCEEDED"


def test_the_core_claim_decision_holds_the_grant_before_it_looks_for_work() -> None:
    """With nothing to claim the decision answers None; an offer beyond the grant is refused
    all the same (the shell cannot skip the check by finding no task)."""
    state = TaskState(task=None, tail=LogTail.read(1, [], []))
    request = ClaimRequest.from_mapping(
        {"agent_id": "w", "capabilities": ["gpu.secret", "python"], "lease_seconds": 60}
    )
    now = Timestamp.parse("2026-12-01T12:00:00Z")
    lease = "L" * 43
    assert decide_claim(state, request, now=now, lease_token=lease, actor=ACTOR) is None
    assert decide_claim(state, request, now=now, lease_token=lease, grant=None, actor=ACTOR) is None
    with pytest.raises(LedgerError) as refusal:
        decide_claim(
            state, request, now=now, lease_token=lease, grant=frozenset({"python"}), actor=ACTOR
        )
    assert refusal.value.code == "CAPABILITY_NOT_GRANTED"
    assert "gpu.secret" in refusal.value.detail
