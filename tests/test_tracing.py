"""Traces in one process: which trace an attempt's spans belong to (core), which environment turns
tracing on, the ledger's spans of its writes exported to an in-memory exporter, and, with tracing
off, nothing of OpenTelemetry even imported. Across processes: test_tracing_processes.py."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from aios_ledger.core import LedgerError
from aios_ledger.core.traces import AttemptTrace, attempt_of_write, model_usage_attributes
from aios_ledger.shell import TaskLedger
from aios_ledger.shell.db.connection import Database
from aios_ledger.shell.governed.writes import governed_write
from aios_ledger.shell.tracing import (
    disable_tracing,
    enable_tracing,
    requested_exporters,
    tracing_enabled,
)
from cli_runner import run_cli
from git_support import binding, make_repository, register, verified_proposal
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

TASK_FIELDS = {"goal": "g", "instructions": "do it", "success_criteria": ["ok"]}


def test_an_attempts_trace_is_derived_from_the_task_and_the_attempt_alone() -> None:
    first = AttemptTrace.of("task-1", 1)
    assert first == AttemptTrace.of("task-1", 1)
    others = [
        AttemptTrace.of("task-1", 2),
        AttemptTrace.of("task-2", 1),
        AttemptTrace.of("task-11", 1),
    ]
    assert len({trace.trace_id for trace in [first, *others]}) == 4
    assert 0 < first.trace_id < 2**128 and 0 < first.root_span_id < 2**64
    assert first.traceparent == f"00-{first.trace_id:032x}-{first.root_span_id:016x}-01"
    # Text no identifier rule would let in still has a trace (spans never refuse a write).
    assert AttemptTrace.of("\ud800", 0).trace_id > 0


@pytest.mark.parametrize(
    ("operation", "attempt", "traced"),
    [
        ("create", 0, 1),
        ("claim", 1, 1),
        ("heartbeat", 1, 1),
        ("submit", 1, 1),
        ("verify", 1, 1),  # a rework leaves the task QUEUED: still attempt 1's verdict
        ("release", 2, 2),
        ("expire", 2, 2),
        ("retry", 2, 3),
        ("pause", 1, 2),
        ("resume", 1, 2),
        ("cancel", 0, 1),
        ("cancel", 2, 2),
    ],
)
def test_a_write_belongs_to_the_attempt_it_acts_on_or_prepares(
    operation: str, attempt: int, traced: int
) -> None:
    assert attempt_of_write(operation, attempt) == traced


@pytest.mark.parametrize(
    ("result", "attributes"),
    [
        (
            {"usage": {"input_tokens": 120, "output_tokens": 30, "model": "gpt-x"}},
            {
                "gen_ai.usage.input_tokens": 120,
                "gen_ai.usage.output_tokens": 30,
                "gen_ai.request.model": "gpt-x",
            },
        ),
        ({"usage": {"input_tokens": 0}}, {"gen_ai.usage.input_tokens": 0}),
        ({"summary": "no usage"}, {}),
        ([1, 2], {}),
        ({"usage": "lots"}, {}),
        ({"usage": {"input_tokens": -1, "output_tokens": True, "model": 7}}, {}),
        ({"usage": {"input_tokens": 2**63, "output_tokens": 1.5, "model": ""}}, {}),
        ({"usage": {"model": "m" * 257}}, {}),
        ({"usage": {"model": "line\nbreak"}}, {}),
    ],
)
def test_only_well_formed_model_usage_becomes_genai_attributes(
    result: object, attributes: dict[str, object]
) -> None:
    assert model_usage_attributes(result) == attributes


@pytest.mark.parametrize(
    ("environ", "exporters"),
    [
        ({}, ()),
        ({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4318"}, ("otlp",)),
        ({"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://c:4318/v1/traces"}, ("otlp",)),
        ({"OTEL_EXPORTER_OTLP_ENDPOINT": "  "}, ()),
        ({"OTEL_TRACES_EXPORTER": "console"}, ("console",)),
        ({"OTEL_TRACES_EXPORTER": "otlp, console,otlp"}, ("otlp", "console")),
        ({"OTEL_TRACES_EXPORTER": "none", "OTEL_EXPORTER_OTLP_ENDPOINT": "http://c"}, ()),
        ({"OTEL_SDK_DISABLED": "TRUE", "OTEL_TRACES_EXPORTER": "console"}, ()),
        ({"OTEL_SDK_DISABLED": "false", "OTEL_TRACES_EXPORTER": "console"}, ("console",)),
        (
            {"OTEL_TRACES_EXPORTER": "otlp", "OTEL_EXPORTER_OTLP_PROTOCOL": "http/protobuf"},
            ("otlp",),
        ),
        # A protocol only matters to the exporter that speaks it.
        ({"OTEL_TRACES_EXPORTER": "console", "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"}, ("console",)),
    ],
)
def test_the_standard_environment_says_whether_and_where_spans_go(
    environ: dict[str, str], exporters: tuple[str, ...]
) -> None:
    assert requested_exporters(environ) == exporters


@pytest.mark.parametrize(
    "environ",
    [
        {"OTEL_TRACES_EXPORTER": "zipkin"},
        {"OTEL_TRACES_EXPORTER": "otlp", "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"},
        {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c", "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL": "grpc"},
    ],
)
def test_an_exporter_this_ledger_cannot_use_is_refused(environ: dict[str, str]) -> None:
    with pytest.raises(LedgerError) as refused:
        requested_exporters(environ)
    assert refused.value.code == "TRACING_CONFIG_INVALID"


def test_the_command_line_refuses_a_tracing_setup_it_cannot_honour(tmp_path: Path) -> None:
    answer = run_cli(
        "--db",
        tmp_path / "l.db",
        "init",
        env={"PATH": "/usr/bin:/bin", "OTEL_TRACES_EXPORTER": "jaeger"},
    )
    assert answer.returncode == 1
    assert answer.stderr.startswith("TRACING_CONFIG_INVALID")
    assert not (tmp_path / "l.db").exists()  # refused before the command ran


def test_a_command_that_ends_leaves_no_tracing_behind(tmp_path: Path) -> None:
    """`main(argv)` in a process that goes on: the spans it made are flushed when it returns,
    and nothing of its tracing (an exporter retrying a gone collector) outlives it."""
    answer = run_cli(
        "--db",
        tmp_path / "l.db",
        "init",
        env={"PATH": "/usr/bin:/bin", "OTEL_TRACES_EXPORTER": "console"},
    )
    assert answer.returncode == 0, answer.stderr
    assert not tracing_enabled()
    after = run_cli("--db", tmp_path / "l.db", "status", env={"PATH": "/usr/bin:/bin"})
    assert after.returncode == 0 and after.stderr == ""


@pytest.fixture
def exported() -> Iterator[InMemorySpanExporter]:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    enable_tracing(provider)
    try:
        yield exporter
    finally:
        disable_tracing()
        provider.shutdown()


def spans_of(exporter: InMemorySpanExporter) -> list[ReadableSpan]:
    return list(exporter.get_finished_spans())


def test_the_ledgers_writes_are_spans_of_the_attempts_they_belong_to(
    tmp_path: Path, exported: InMemorySpanExporter
) -> None:
    with TaskLedger(tmp_path / "ledger.db") as ledger:
        created = ledger.create_task(TASK_FIELDS, idempotency_key="c-1")
        task_id = created["task_id"]
        claim = ledger.claim(agent_id="agent-1", capabilities=[], lease_seconds=60)
        assert claim is not None
        token = claim["lease_token"]
        ledger.heartbeat(task_id, lease_token=token, lease_seconds=60)
        ledger.submit_result(task_id, lease_token=token, result={"s": 1}, idempotency_key="s-1")
        ledger.verify(task_id, decision="NEEDS_REWORK", reason="again", idempotency_key="v-1")
        ledger.create_task(TASK_FIELDS, idempotency_key="c-1")  # a replay is a span too
        with pytest.raises(LedgerError):  # a refusal writes nothing, and is no ledger span
            ledger.heartbeat(task_id, lease_token=token, lease_seconds=60)
    spans = spans_of(exported)
    first = AttemptTrace.of(task_id, 1)
    assert [span.name for span in spans] == [
        "create tasks",
        "claim tasks",
        "heartbeat tasks",
        "submit tasks",
        "verify tasks",
        "create tasks",
    ]
    for span in spans:
        assert span.context is not None and span.context.trace_id == first.trace_id
        assert span.parent is not None and span.parent.span_id == first.root_span_id
        assert span.kind.name == "CLIENT"
        assert span.attributes is not None
        assert span.attributes["db.system.name"] == "sqlite"
        assert span.attributes["db.collection.name"] == "tasks"
        assert span.attributes["aios.task.id"] == task_id
        assert span.attributes["aios.task.attempt"] == 1
        assert span.start_time is not None and span.end_time is not None
        assert span.start_time <= span.end_time
    attributes = [dict(span.attributes or {}) for span in spans]
    assert [a["db.operation.name"] for a in attributes][:2] == ["create", "claim"]
    assert attributes[1]["aios.agent.id"] == "agent-1"
    assert attributes[4]["aios.task.status"] == "QUEUED"
    assert (attributes[0]["aios.idempotent_replay"], attributes[5]["aios.idempotent_replay"]) == (
        False,
        True,
    )


def test_with_tracing_off_nothing_of_opentelemetry_is_even_imported(tmp_path: Path) -> None:
    program = f"""
import sys
from aios_ledger.shell import LedgerClient, TaskLedger
from aios_ledger.shell.serve.app import served_app
from aios_ledger.shell.api.backend import ApiSettings
from aios_ledger.shell.work.worker import Worker
with TaskLedger({str(tmp_path / "ledger.db")!r}) as ledger:
    created = ledger.create_task({TASK_FIELDS!r}, idempotency_key="c")
    claim = ledger.claim(agent_id="a", capabilities=[], lease_seconds=60)
    ledger.submit_result(claim["task_id"], lease_token=claim["lease_token"], result={{}},
                         idempotency_key="s")
served_app(ApiSettings(db_path={str(tmp_path / "ledger.db")!r})).state.backend.close()
LedgerClient("http://127.0.0.1:9", "token-0123456789abcdef").close()
print(sorted(name for name in sys.modules if name.startswith("opentelemetry")))
"""
    answer = subprocess.run(
        [sys.executable, "-c", program], capture_output=True, text=True, check=True
    )
    assert answer.stdout.strip() == "[]"


def test_a_governed_write_is_a_span_of_the_attempt_whose_proposal_it_lands(
    tmp_path: Path, exported: InMemorySpanExporter
) -> None:
    db = tmp_path / "ledger.db"
    bare, base = make_repository(tmp_path)
    register(db, bare)
    proposal = verified_proposal(db, "task-w", binding("task-w", base), {"a.txt": "a\n"})
    exported.clear()  # the spans of the lifecycle that led here; this test is the write
    with Database(db) as opened:
        answer = governed_write(opened, {"task_id": "task-w", "idempotency_key": "write-w"})
    (span,) = [span for span in spans_of(exported) if span.name == "governed_write"]
    trace = AttemptTrace.of("task-w", proposal["attempt"])
    assert span.context is not None and span.context.trace_id == trace.trace_id
    assert dict(span.attributes or {}) == {
        "aios.task.id": "task-w",
        "aios.task.attempt": proposal["attempt"],
        "vcs.repository.name": answer["repository"],
        "vcs.ref.head.name": "refs/heads/agent/task-w",
        "vcs.ref.head.revision": proposal["head_oid"],
        "aios.governed_write.state": "APPLIED",
        "aios.idempotent_replay": False,
    }
