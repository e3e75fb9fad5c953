"""OpenTelemetry traces: one trace per task attempt, across the server, the worker and the
reviewer (docs/observability.md).

Off by default, and then free: nothing of OpenTelemetry is imported and every hook is one test
of a module global. `start_tracing` turns it on only when the standard `OTEL_*` environment asks
for an exporter; unlike the SDK, an unset exporter with no OTLP endpoint stays off, so that no
ledger sends traces to localhost by surprise. The SDK is an extra
(`pip install 'aios-ledger[otel]'`): asking for traces without it is `TRACING_UNAVAILABLE`.

Every process derives an attempt's trace id from (task id, attempt)
(`core.traces.AttemptTrace`), so the spans of the worker, the reviewer, the ledger's writes and
the server's requests join one trace without passing ids around; a `traceparent` still links
the API client's calls and the agent's command (`TRACEPARENT`) to the span they run under.
"""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from aios_ledger.core import LedgerError
from aios_ledger.core.jsonvalue import loads_object
from aios_ledger.core.traces import AttemptTrace, attempt_of_write, model_usage_attributes

if TYPE_CHECKING:
    from opentelemetry.context import Context
    from opentelemetry.trace import Span, Tracer, TracerProvider

INSTRUMENTATION = "aios_ledger"
EXPORTERS = ("otlp", "console", "none")
OTLP_PROTOCOL = "http/protobuf"
OTLP_ENDPOINTS = ("OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
OTLP_PROTOCOLS = ("OTEL_EXPORTER_OTLP_PROTOCOL", "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL")
# The environment variable an agent's command reads its parent span from (the name the OTel
# specification's environment-variable carriers use).
TRACEPARENT_ENV = "TRACEPARENT"
TASKS_COLLECTION = "tasks"


class _Switch:
    """The tracer while tracing is on; None: off, and no hook does anything."""

    tracer: Tracer | None = None
    # The SDK provider `start_tracing` made, which `stop_tracing` flushes and shuts down.
    started: Any = None


_switch = _Switch()


def requested_exporters(environ: Mapping[str, str]) -> tuple[str, ...]:
    """The span exporters the environment asks for (none: tracing stays off); a name this
    ledger does not export to is `TRACING_CONFIG_INVALID`."""
    if environ.get("OTEL_SDK_DISABLED", "").strip().lower() == "true":
        return ()
    listed = environ.get("OTEL_TRACES_EXPORTER")
    names: tuple[str, ...]
    if listed is None:
        endpoint = any(environ.get(name, "").strip() for name in OTLP_ENDPOINTS)
        names = ("otlp",) if endpoint else ()
    else:
        names = tuple(name.strip().lower() for name in listed.split(",") if name.strip())
    unknown = [name for name in names if name not in EXPORTERS]
    if unknown:
        raise LedgerError(
            "TRACING_CONFIG_INVALID",
            f"OTEL_TRACES_EXPORTER names {unknown[0][:40]!r}: this ledger exports spans with "
            f"{', '.join(EXPORTERS)}",
        )
    for name in OTLP_PROTOCOLS:
        protocol = environ.get(name, OTLP_PROTOCOL).strip().lower()
        if "otlp" in names and protocol != OTLP_PROTOCOL:
            raise LedgerError(
                "TRACING_CONFIG_INVALID",
                f"{name} is {protocol[:40]!r}: this ledger sends OTLP as {OTLP_PROTOCOL} only "
                "(the OTLP/HTTP endpoint, port 4318 by default)",
            )
    return tuple(dict.fromkeys(name for name in names if name != "none"))


def start_tracing(service_name: str, environ: Mapping[str, str] = os.environ) -> bool:
    """Turn tracing on when `environ` asks for it (see the module), exporting as
    `service_name` unless `OTEL_SERVICE_NAME` names the service; whether it is on."""
    exporters = requested_exporters(environ)
    if not exporters:
        return False
    try:
        from opentelemetry.sdk.resources import SERVICE_NAME, Resource
        from opentelemetry.sdk.trace import TracerProvider as SdkTracerProvider
        from opentelemetry.sdk.trace.export import BatchSpanProcessor, ConsoleSpanExporter
    except ImportError:
        raise LedgerError(
            "TRACING_UNAVAILABLE",
            "the environment asks for traces (OTEL_TRACES_EXPORTER or an OTLP endpoint), but "
            "the OpenTelemetry SDK is not installed: pip install 'aios-ledger[otel]', or unset "
            "them",
        ) from None
    named = {} if environ.get("OTEL_SERVICE_NAME") else {SERVICE_NAME: service_name}
    provider = SdkTracerProvider(resource=Resource.create(named))
    for name in exporters:
        if name == "otlp":
            from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

            provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter()))
        else:
            provider.add_span_processor(BatchSpanProcessor(ConsoleSpanExporter()))
    enable_tracing(provider)
    _switch.started = provider
    return True


def stop_tracing() -> None:
    """Flush and shut down what `start_tracing` started, and trace no more: a command that ends
    leaves no exporter behind in a process that goes on (a program calling `main(argv)`)."""
    provider, _switch.started = _switch.started, None
    if provider is not None:
        disable_tracing()
        provider.shutdown()


def enable_tracing(provider: TracerProvider) -> None:
    """Trace through `provider` from now on (a library caller's own, or `start_tracing`'s)."""
    # Here, not at the top: importing importlib.metadata costs every process of the command
    # line, and this runs only when tracing is turned on.
    from importlib.metadata import version

    _switch.tracer = provider.get_tracer(INSTRUMENTATION, version("aios-ledger"))


def disable_tracing() -> None:
    """No more spans from now on (what a process that never enabled tracing has)."""
    _switch.tracer = None


def tracing_enabled() -> bool:
    return _switch.tracer is not None


def current_tracer() -> Tracer | None:
    return _switch.tracer


def _in_attempt(trace: AttemptTrace) -> tuple[Context | None, list[Any]]:
    """The parent context of a span of `trace`, and its links: the current span when it is
    in that trace already; otherwise the attempt's root, linked to the current span (a claim
    of whatever task comes first, a create a caller traced in a trace of its own)."""
    from opentelemetry import trace as api

    current = api.get_current_span().get_span_context()
    if current.is_valid and current.trace_id == trace.trace_id:
        return None, []
    root = api.SpanContext(
        trace.trace_id,
        trace.root_span_id,
        is_remote=True,
        trace_flags=api.TraceFlags(api.TraceFlags.SAMPLED),
    )
    links = [api.Link(current)] if current.is_valid else []
    return api.set_span_in_context(api.NonRecordingSpan(root)), links


def attempt_attributes(task_id: str, attempt: int) -> dict[str, Any]:
    return {"aios.task.id": task_id, "aios.task.attempt": attempt}


@contextlib.contextmanager
def attempt_span(
    name: str,
    task_id: str,
    attempt: int,
    *,
    kind: str = "INTERNAL",
    attributes: Mapping[str, Any] | None = None,
) -> Iterator[Span | None]:
    """A span of attempt `attempt` of `task_id` around the block, current in it; None (and
    nothing made) while tracing is off. `kind`: a `SpanKind` name."""
    tracer = _switch.tracer
    if tracer is None:
        yield None
        return
    from opentelemetry.trace import SpanKind

    context, links = _in_attempt(AttemptTrace.of(task_id, attempt))
    with tracer.start_as_current_span(
        name,
        context=context,
        kind=SpanKind[kind],
        attributes={**attempt_attributes(task_id, attempt), **(attributes or {})},
        links=links,
    ) as span:
        yield span


@contextlib.contextmanager
def child_span(
    name: str, *, kind: str = "INTERNAL", attributes: Mapping[str, Any] | None = None
) -> Iterator[Span | None]:
    """A child of the current span around the block (an attempt's agent run, its proposal);
    None, and nothing made, while tracing is off or outside any span."""
    tracer = _switch.tracer
    if tracer is None:
        yield None
        return
    from opentelemetry import trace as api

    if not api.get_current_span().get_span_context().is_valid:
        yield None
        return
    with tracer.start_as_current_span(
        name, kind=api.SpanKind[kind], attributes=dict(attributes or {})
    ) as span:
        yield span


def write_started() -> int | None:
    """The time a ledger write starts, for `record_writes` (None while tracing is off)."""
    return None if _switch.tracer is None else time.time_ns()


def record_span(
    name: str, task_id: str, attempt: int, *, started: int, kind: str, attributes: Mapping[str, Any]
) -> None:
    """A span of attempt `attempt` of `task_id` from `started` (`write_started`) to now, made
    once what it is about is known (the task a claim took, the attempt a write acted on)."""
    tracer = _switch.tracer
    if tracer is None:
        return
    from opentelemetry.trace import SpanKind

    context, links = _in_attempt(AttemptTrace.of(task_id, attempt))
    span = tracer.start_span(
        name,
        context=context,
        kind=SpanKind[kind],
        attributes={**attempt_attributes(task_id, attempt), **attributes},
        links=links,
        start_time=started,
    )
    span.end()


def record_writes(operation: str, answers: Sequence[Any], *, started: int, db_system: str) -> None:
    """One span per task a ledger write answered for (a batch's, a claim's), from `started` to
    now, each in the trace of the attempt the write belongs to, named as the database
    conventions name a client operation (`claim tasks`)."""
    if _switch.tracer is None:
        return
    for answer in answers:
        if not isinstance(answer, Mapping) or not isinstance(answer.get("task_id"), str):
            continue
        attempt = answer.get("attempt")
        if type(attempt) is not int:
            continue
        attributes: dict[str, Any] = {
            "db.system.name": db_system,
            "db.operation.name": operation,
            "db.collection.name": TASKS_COLLECTION,
            "aios.task.status": str(answer.get("status")),
        }
        if isinstance(answer.get("claimed_by"), str):
            attributes["aios.agent.id"] = answer["claimed_by"]
        if isinstance(answer.get("idempotent"), bool):
            attributes["aios.idempotent_replay"] = answer["idempotent"]
        record_span(
            f"{operation} {TASKS_COLLECTION}",
            answer["task_id"],
            attempt_of_write(operation, attempt),
            started=started,
            kind="CLIENT",
            attributes=attributes,
        )


def traceparent_environment() -> dict[str, str]:
    """`TRACEPARENT` of the current span, for a child process's environment (an agent's
    command, a review command); empty while tracing is off or outside any span."""
    if _switch.tracer is None:
        return {}
    from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

    carrier: dict[str, str] = {}
    TraceContextTextMapPropagator().inject(carrier)
    value = carrier.get("traceparent")
    return {} if value is None else {TRACEPARENT_ENV: value}


class AgentRun:
    """The span of an agent's command (the GenAI conventions' `invoke_agent`), a child of the
    current span from its start to its exit: its `TRACEPARENT` goes into the command's
    environment, and its end reads the exit status and the model usage the command's output
    reports. Without tracing (or outside any span) it makes nothing."""

    def __init__(self, span: Span | None) -> None:
        self._span = span

    @classmethod
    def start(cls, agent_id: str) -> AgentRun:
        tracer = _switch.tracer
        if tracer is None:
            return cls(None)
        from opentelemetry import trace as api

        if not api.get_current_span().get_span_context().is_valid:
            return cls(None)
        attributes = {"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": agent_id}
        return cls(
            tracer.start_span(
                f"invoke_agent {agent_id}", kind=api.SpanKind.CLIENT, attributes=attributes
            )
        )

    def environment(self) -> dict[str, str]:
        """`TRACEPARENT` of the agent's span, for its command's environment."""
        if self._span is None:
            return {}
        from opentelemetry import trace as api
        from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

        carrier: dict[str, str] = {}
        TraceContextTextMapPropagator().inject(carrier, api.set_span_in_context(self._span))
        return {TRACEPARENT_ENV: carrier["traceparent"]}

    def end(self, exit_status: int | None, *, ended_by: str | None, output: bytes) -> None:
        """The command exited with `exit_status` (None: it never started), or was ended by the
        worker (`ended_by`: why); `output` is what it printed on stdout."""
        span = self._span
        if span is None:
            return
        from opentelemetry.trace import StatusCode

        if exit_status is not None:
            span.set_attribute("process.exit.code", exit_status)
        failure = ended_by or (
            "spawn_failed" if exit_status is None else None if exit_status == 0 else "exit_status"
        )
        if failure is None:
            try:
                span.set_attributes(model_usage_attributes(loads_object(output, what="stdout")))
            except LedgerError:
                failure = "invalid_output"
        if failure is not None:
            span.set_attribute("error.type", failure)
            span.set_status(StatusCode.ERROR)
        span.end()
