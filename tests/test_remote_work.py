"""The worker (and the projection's binding resolver) through the server `serve` runs: the
same worker as `--db`, over `--api URL --token-file FILE`; the same task lifecycle and the same
evidence in the ledger, written by the server."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from aios_ledger.core import LedgerError
from aios_ledger.core.actors import ROLES
from aios_ledger.core.auxiliary import AuxiliaryRunState, AuxiliaryTransitionRequest, check_spawn
from aios_ledger.shell import LedgerClient, TaskLedger, list_auxiliary_runs
from aios_ledger.shell.api.review_routes import review_operations
from aios_ledger.shell.remote.review import RemoteAuxiliaryRuns, RemoteReview
from aios_ledger.shell.work.reviewer import review_spec
from api_server import ApiServer, HeldClock
from cli_runner import CliResult, run_cli
from test_worker_e2e import AGENT, REVIEWER, create, event_types, task


@pytest.fixture
def server(tmp_path: Path) -> Iterator[ApiServer]:
    with ApiServer(tmp_path / "ledger.db", clock=HeldClock()) as running:
        yield running


def remote(*argv: str) -> CliResult:
    """The command line (in this process) without a database: everything goes through the API."""
    return run_cli("--db", "/nonexistent/no.db", *argv)


def evidence_lines(db: Path, task_id: str, attempt: int = 1) -> list[object]:
    with TaskLedger(db):  # the file is current (migrated) before the command line reads it
        pass
    answer = run_cli("--db", db, "run", "evidence", f"task:{task_id}", f"{task_id}@{attempt}")
    assert answer.returncode == 0, answer.stderr
    return [event["payload"].get("line") for event in json.loads(answer.stdout)["events"]]


def test_worker_over_the_api_takes_a_task_end_to_end(server: ApiServer, tmp_path: Path) -> None:
    create(server.db, "task-remote-1")
    create(server.db, "task-remote-2", required_capabilities=["gpu"])
    token = server.token_file(tmp_path, "remote-agent", "agent")
    worked = remote(
        "worker",
        "--api",
        server.url,
        "--token-file",
        str(token),
        "--agent-id",
        "remote-agent",
        "--exec",
        AGENT,
        "--until-empty",
    )
    assert worked.returncode == 0, worked.stderr
    summary = json.loads(worked.stdout)
    assert [(t["task_id"], t["outcome"]) for t in summary["tasks"]] == [
        ("task-remote-1", "submitted")
    ]
    done = task(server.db, "task-remote-1")
    assert (done["status"], done["attempt"], done["claimed_by"]) == ("SUBMITTED", 1, None)
    assert event_types(server.db, "task-remote-1") == [
        "TASK_CREATED",
        "TASK_CLAIMED",
        "RESULT_SUBMITTED",
    ]
    assert task(server.db, "task-remote-2")["status"] == "QUEUED"  # a capability it lacks
    # The command's stderr became the run's evidence, written through the API.
    assert "done" in evidence_lines(server.db, "task-remote-1")
    assert token.read_text().strip() not in worked.stderr + worked.stdout


def test_worker_over_the_api_submits_a_failure_with_its_evidence(
    server: ApiServer, tmp_path: Path
) -> None:
    create(server.db, "task-remote-fail")
    token = server.token_file(tmp_path, "failing-agent", "agent")
    worked = remote(
        "worker",
        "--api",
        server.url,
        "--token-file",
        str(token),
        "--agent-id",
        "failing-agent",
        "--exec",
        "echo oops >&2; exit 3",
        "--once",
    )
    assert worked.returncode == 0, worked.stderr
    result = task(server.db, "task-remote-fail")["result"]
    assert (result["status"], result["failure"]) == ("FAILED", "exit_status")
    assert "oops" in evidence_lines(server.db, "task-remote-fail")


def test_worker_api_flags_are_checked(server: ApiServer, tmp_path: Path) -> None:
    common = ["worker", "--agent-id", "a", "--exec", "true", "--once"]
    missing = remote(*common, "--api", server.url)
    assert missing.returncode == 2 and "--token-file" in missing.stderr
    alone = remote(*common, "--token-file", str(tmp_path / "t"))
    assert alone.returncode == 2 and "--api" in alone.stderr
    absent = remote(*common, "--api", server.url, "--token-file", str(tmp_path / "none"))
    assert absent.returncode == 1 and absent.stderr.startswith("TOKEN_FILE_INVALID")
    refused = tmp_path / "refused.token"
    refused.write_text("a-token-the-server-never-issued-0123456789\n")
    stranger = remote(*common, "--api", server.url, "--token-file", str(refused))
    assert stranger.returncode == 1  # refused at start-up, not "nothing to do"
    assert stranger.stderr.startswith("UNAUTHENTICATED")


def test_only_the_holder_writes_a_tasks_evidence_run(server: ApiServer) -> None:
    create(server.db, "task-evidence")
    holder = LedgerClient(server.url, server.issue("holder", "agent"))
    other = LedgerClient(server.url, server.issue("other", "agent"))
    session, run_id = "task:task-evidence", "task-evidence@1"
    with holder, other:
        with pytest.raises(LedgerError) as refused:
            holder.create_run(session, "attempt 1", run_id=run_id)  # the claim's to create
        assert refused.value.code == "RUN_ID_RESERVED"
        claim = holder.claim(agent_id="holder", capabilities=[], lease_seconds=60)
        assert claim is not None
        token = str(claim["lease_token"])
        run = holder.get_run(run_id)  # created by the claim
        assert (run.session_id, run.prompt, run.event_count) == (session, "attempt 1", 0)
        with pytest.raises(LedgerError) as foreign:
            other.create_run(session, "attempt 1", run_id=run_id)
        assert foreign.value.code == "RUN_ID_RESERVED"
        with pytest.raises(LedgerError) as tokenless:
            holder.append_event(run_id, "stderr", {"line": "no lease"})
        assert tokenless.value.code == "LEASE_INVALID"
        event = holder.append_event(run_id, "stderr", {"line": "working"}, lease_token=token)
        assert (event.run_id, event.seq, event.payload()) == (run_id, 1, {"line": "working"})
        with pytest.raises(LedgerError) as intruder:
            other.append_event(run_id, "stderr", {"line": "forged"}, lease_token=token)
        assert intruder.value.code == "NOT_RUN_OWNER"
        assert [e.payload() for e in holder.run_events(run_id)] == [{"line": "working"}]
        assert holder.get_run(run_id).event_count == 1


def test_worker_and_reviewer_over_the_api_take_a_task_through_one_rework(
    server: ApiServer, tmp_path: Path
) -> None:
    """The local e2e test's story (test_worker_e2e), every step through the API."""
    create(server.db, "task-api-e2e", retry={"base_seconds": 1, "max_seconds": 1})
    agent = server.token_file(tmp_path, "w1", "agent")
    reviewer = server.token_file(tmp_path, "r1", "reviewer")
    # The server's clock, held, is moved past the rework's backoff (1 s) rather than waited.
    clock = server.clock
    assert isinstance(clock, HeldClock)
    clock.hold()
    for attempt in (1, 2):
        worked = remote(
            "worker",
            "--api",
            server.url,
            "--token-file",
            str(agent),
            "--agent-id",
            "w1",
            "--exec",
            AGENT,
            "--until-empty",
        )
        assert worked.returncode == 0, worked.stderr
        assert f"task task-api-e2e attempt {attempt}: submitted" in worked.stderr
        reviewed = remote(
            "review", "--api", server.url, "--token-file", str(reviewer), "--exec", REVIEWER
        )
        assert reviewed.returncode == 0, reviewed.stderr
        (review,) = json.loads(reviewed.stdout)["reviews"]
        assert review["outcome"] == "verified"
        assert review["decision"] == ("NEEDS_REWORK" if attempt == 1 else "SUCCEEDED")
        clock.advance(1.5)
    final = task(server.db, "task-api-e2e")
    assert (final["status"], final["attempt"]) == ("SUCCEEDED", 2)
    assert event_types(server.db, "task-api-e2e") == [
        "TASK_CREATED",
        "TASK_CLAIMED",
        "RESULT_SUBMITTED",
        "TASK_VERIFIED",
        "TASK_CLAIMED",
        "RESULT_SUBMITTED",
        "TASK_VERIFIED",
    ]
    # Each review is an auxiliary run in the ledger, completed, owned by the reviewer's token.
    with TaskLedger(server.db) as ledger:
        runs = list_auxiliary_runs(ledger.database, session_id="task:task-api-e2e")
    assert [(run.run_id, run.state, run.kind) for run in runs] == [
        ("task-api-e2e@1", "COMPLETED", "review"),
        ("task-api-e2e@2", "COMPLETED", "review"),
    ]
    # A second round finds nothing to review.
    again = remote("review", "--api", server.url, "--token-file", str(reviewer), "--exec", REVIEWER)
    assert again.returncode == 0 and json.loads(again.stdout)["reviews"] == []


def test_review_runs_are_driven_only_by_the_reviewer_that_spawned_them(
    server: ApiServer, tmp_path: Path
) -> None:
    """A second reviewer cannot move or stop the first one's run; an agent cannot spawn."""
    create(server.db, "task-owned")
    with TaskLedger(server.db) as ledger:
        claim = ledger.claim(agent_id="w", capabilities=[], lease_seconds=60)
        assert claim is not None
        ledger.submit_result(
            "task-owned", lease_token=claim["lease_token"], result={}, idempotency_key="s"
        )
    first = RemoteReview(LedgerClient(server.url, server.issue("rev-a", "reviewer")))
    second = LedgerClient(server.url, server.issue("rev-b", "reviewer"))
    agent = LedgerClient(server.url, server.issue("agent-x", "agent"))
    try:
        (candidate,) = first.candidates(10)
        evidence = first.evidence("task-owned", 1)
        spec = review_spec(candidate, evidence, 1, 30.0)
        store = RemoteAuxiliaryRuns(first._client)
        spawned = store.spawn(check_spawn(spec, evidence), evidence, "host:1:nonce")
        assert spawned["state"] == "PENDING"
        body = {"state": "RUNNING"}
        path = f"/v1/review-runs/{spawned['id']}/transition"
        with pytest.raises(LedgerError) as foreign:
            second.call_json("POST", path, body=body)
        assert foreign.value.code == "NOT_RUN_OWNER"
        with pytest.raises(LedgerError) as agents:
            RemoteAuxiliaryRuns(agent).spawn(check_spawn(spec, evidence), evidence, "h:1:n")
        assert agents.value.code == "FORBIDDEN"
        moved = store.move(AuxiliaryTransitionRequest(spawned["id"], AuxiliaryRunState.RUNNING))
        assert moved.state == "RUNNING" and moved.owner.startswith("host:1:nonce~")
        [listed] = first.reviews_of("task-owned", 1)
        assert listed == moved
    finally:
        first.close()
        second.close()
        agent.close()


def test_review_routes_refuse_every_other_role_and_no_token(server: ApiServer) -> None:
    tokens = {role: server.issue(f"role-{role}", role) for role in ROLES}
    for operation in review_operations():
        path = operation.path.replace("{aux_id}", "aux-none")
        body: dict[str, object] | None = {} if operation.body is not None else None
        for role, token in [*tokens.items(), (None, None)]:
            headers = {} if token is None else {"Authorization": f"Bearer {token}"}
            answer = httpx.request(operation.method, server.url + path, json=body, headers=headers)
            assert operation.roles is not None
            if role is None:
                assert answer.status_code == 401, (path, answer.text)
            elif role in operation.roles:
                assert answer.status_code not in (401, 403), (path, role, answer.text)
            else:
                assert answer.status_code == 403, (path, role, answer.text)
                assert answer.json()["code"] == "FORBIDDEN"
