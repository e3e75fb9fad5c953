"""One trace per task attempt across processes: a real `serve`, a real `worker --api` and a real
`review --api`, each exporting its spans over OTLP/HTTP to a receiver in the test (configured the
OTel way, by the environment alone), take a task through a rework (attempt 1 reworked, attempt 2
accepted); the spans of each attempt meet in the trace its ids are derived from, and nothing else
is traced. With tracing off, nothing is exported and the agent gets no `TRACEPARENT`."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from aios_ledger.core.traces import AttemptTrace
from aios_ledger.shell import LedgerClient
from api_server import ServeProcess
from otlp_receiver import OtlpReceiver, ReceivedSpan
from test_worker_e2e import REVIEWER, task, wait_until_due

# Each test takes a task through two attempts with three kinds of process: a minute or more.
pytestmark = pytest.mark.slow

TASK = "task-traced"
AGENT_NAME = "agent-otel"
SERVICES = {"aios-ledger-serve", "aios-ledger-worker", "aios-ledger-review"}
# The agent records the TRACEPARENT it was given, reports its model usage and works as the
# example agent does (the example reviewer asks for the changelog on attempt 1).
AGENT_SOURCE = """
import json, os, sys
claim = json.load(sys.stdin)
with open(sys.argv[1], "a") as seen:
    seen.write(json.dumps([claim["attempt"], os.environ.get("TRACEPARENT")]) + "\\n")
changed = ["NOTES.md"] if claim["attempt"] == 1 else ["NOTES.md", "CHANGELOG.md"]
for name in changed:
    print(f"edited {name}", file=sys.stderr)
usage = {"input_tokens": 100 * claim["attempt"], "output_tokens": 7}
json.dump({"status": "SUCCEEDED", "summary": "edited", "usage": usage}, sys.stdout)
"""


@pytest.fixture
def receiver() -> Iterator[OtlpReceiver]:
    with OtlpReceiver() as running:
        yield running


def run(*argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "aios_ledger.shell.cli", "--db", "/nonexistent/no.db", *argv],
        capture_output=True,
        text=True,
        timeout=120,
    )


def take_task_through_a_rework(tmp_path: Path) -> list[list[object]]:
    """Create, work, review, twice, through a real server; what the agent was given."""
    seen = tmp_path / "traceparents.jsonl"
    agent = tmp_path / "agent.py"
    agent.write_text(AGENT_SOURCE)
    with ServeProcess(tmp_path / "ledger.db") as server:
        owner = LedgerClient(server.url, server.issue("owner-otel", "owner"))
        owner.create_task(
            {
                "task_id": TASK,
                "goal": "traced",
                "instructions": "do it",
                "success_criteria": [{"id": "done", "description": "it is done"}],
                "required_capabilities": [],
                "constraints": {},
                "metadata": {},
                "priority": 0,
                "max_attempts": 3,
                "retry": {"base_seconds": 1, "max_seconds": 1},
            },
            idempotency_key="create-traced",
        )
        owner.close()
        worker = server.token_file(tmp_path, AGENT_NAME, "agent")
        reviewer = server.token_file(tmp_path, "reviewer-otel", "reviewer")
        for attempt in (1, 2):
            worked = run(
                "worker",
                *("--api", server.url, "--token-file", str(worker), "--once"),
                *("--exec", f"{sys.executable} {agent} {seen}"),
            )
            assert worked.returncode == 0, worked.stderr
            assert f"attempt {attempt}: submitted" in worked.stderr
            reviewed = run(
                "review",
                *("--api", server.url, "--token-file", str(reviewer), "--exec", REVIEWER),
            )
            assert reviewed.returncode == 0, reviewed.stderr
            wait_until_due(server.db, TASK)
        server.stop()  # its last spans are flushed as it exits
        assert task(server.db, TASK)["status"] == "SUCCEEDED"
    return [json.loads(line) for line in seen.read_text().splitlines()]


def by_name(spans: list[ReceivedSpan], name: str) -> ReceivedSpan:
    found = [span for span in spans if span.name == name]
    assert len(found) == 1, (name, sorted(span.name for span in spans))
    return found[0]


def test_each_attempt_is_one_trace_across_the_server_worker_and_reviewer(
    tmp_path: Path, receiver: OtlpReceiver, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", receiver.url)
    monkeypatch.setenv("OTEL_BSP_SCHEDULE_DELAY", "50")
    given = take_task_through_a_rework(tmp_path)
    spans = receiver.received()
    traces = {attempt: AttemptTrace.of(TASK, attempt) for attempt in (1, 2)}
    # Every span exported belongs to one of the two attempts: idle polls trace nothing.
    assert {span.trace_id for span in spans} == {trace.trace_id for trace in traces.values()}
    for attempt, trace in traces.items():
        mine = [span for span in spans if span.trace_id == trace.trace_id]
        assert {span.service for span in mine} == SERVICES
        assert {
            span.attributes["aios.task.attempt"]
            for span in mine
            if "aios.task.id" in span.attributes
        } == {attempt}
        # The worker's attempt hangs under the attempt's derived root; its agent under it.
        work = by_name(mine, "process task")
        assert (work.service, work.kind, work.parent_span_id) == (
            "aios-ledger-worker",
            "CONSUMER",
            trace.root_span_id,
        )
        assert work.attributes["aios.agent.id"] == AGENT_NAME
        assert work.attributes["aios.worker.outcome"] == "submitted"
        agent = by_name(mine, f"invoke_agent {AGENT_NAME}")
        assert agent.parent_span_id == work.span_id
        assert agent.attributes["gen_ai.operation.name"] == "invoke_agent"
        assert agent.attributes["gen_ai.usage.input_tokens"] == 100 * attempt
        assert agent.attributes["gen_ai.usage.output_tokens"] == 7
        assert agent.attributes["process.exit.code"] == 0
        assert [attempt, f"00-{trace.trace_id:032x}-{agent.span_id:016x}-01"] in given
        # The submit: the worker's client span, the server's continuing it, the ledger's write.
        served = by_name(mine, "POST /v1/tasks/{task_id}/result")
        assert (served.service, served.kind) == ("aios-ledger-serve", "SERVER")
        assert served.attributes["http.route"] == "/v1/tasks/{task_id}/result"
        assert served.attributes["http.response.status_code"] == 200
        sent = next(span for span in mine if span.span_id == served.parent_span_id)
        assert (sent.service, sent.kind, sent.name) == ("aios-ledger-worker", "CLIENT", "POST")
        submitted = by_name(mine, "submit tasks")
        assert submitted.parent_span_id == served.span_id
        assert submitted.attributes["db.system.name"] == "sqlite"
        assert submitted.attributes["db.operation.name"] == "submit"
        assert submitted.attributes["aios.task.status"] == "SUBMITTED"
        # The claim took whatever task came first: its span is the attempt's, from the server.
        claimed = by_name(mine, "claim tasks")
        assert (claimed.service, claimed.parent_span_id) == (
            "aios-ledger-serve",
            trace.root_span_id,
        )
        assert claimed.attributes["aios.agent.id"] == AGENT_NAME
        # The review, its verdict sent under it and written by the server, in the same trace.
        review = by_name(mine, "review task")
        assert (review.service, review.parent_span_id) == ("aios-ledger-review", trace.root_span_id)
        decision = "NEEDS_REWORK" if attempt == 1 else "SUCCEEDED"
        assert review.attributes["aios.review.decision"] == decision
        verified = by_name(mine, "verify tasks")
        assert verified.service == "aios-ledger-serve"
        assert by_name(mine, "POST /v1/tasks/{task_id}/verification").parent_span_id in {
            span.span_id for span in mine if span.service == "aios-ledger-review"
        }
    # The create prepared the first attempt, as the server wrote it.
    created = by_name([s for s in spans if s.trace_id == traces[1].trace_id], "create tasks")
    assert (created.service, created.attributes["aios.task.attempt"]) == ("aios-ledger-serve", 1)


def test_with_tracing_off_nothing_is_exported_and_the_agent_gets_no_traceparent(
    tmp_path: Path, receiver: OtlpReceiver, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The endpoint is there, and the SDK switched off, as OTEL_SDK_DISABLED says.
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", receiver.url)
    monkeypatch.setenv("OTEL_SDK_DISABLED", "true")
    given = take_task_through_a_rework(tmp_path)
    assert given == [[1, None], [2, None]]
    assert receiver.received() == []
