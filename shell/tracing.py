"""OpenTelemetry traces: one trace per task attempt, across the server, the worker and the
reviewer (docs/observability.md).

Off by default, and then free: nothing of OpenTelemetry is imported and every hook is one test
of a module global; unlike the SDK, an unset exporter with no OTLP endpoint stays off, so no
ledger sends traces to localhost by surprise. Every process derives an attempt's trace id from
(task id, attempt), so the spans of all its processes join one trace without passing ids around.
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
# Where an agent's command reads its parent span from, as OTel's environment carriers name it.
TRACEPARENT_ENV = "TRACEPARENT"
TASKS_COLLECTION = "tasks"


class _Switch:
    """The tracer while tracing is on; None: off, and no hook does anything."""

    tracer: Tracer | None = None
    # The SDK provider `start_tracing` made, which `stop_tracing` flushes and shuts down.
    started: Any = None


_switch = _Switch()


def requested_exporters(environ: Mapping[str, str]) -> tuple[str, ...]:
    """The span exporters the environment asks for; none: tracing stays off."""
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
    """Turn tracing on when `environ` asks for it; answers whether it is on."""
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
    """Flush and shut down what `start_tracing` started, so that a command run by `main(argv)`
    leaves no exporter behind in a process that goes on."""
    provider, _switch.started = _switch.started, None
    if provider is not None:
        disable_tracing()
        provider.shutdown()


def enable_tracing(provider: TracerProvider) -> None:
    """Trace through `provider` from now on (a library caller's own, or `start_tracing`'s)."""
    # Here, not at the top: importlib.metadata is slow to import.
    from importlib.metadata import version

    _switch.tracer = provider.get_tracer(INSTRUMENTATION, version("aios-ledger"))


def disable_tracing() -> None:
    _switch.tracer = None


def tracing_enabled() -> bool:
    return _switch.tracer is not None


def current_tracer() -> Tracer | None:
    return _switch.tracer


def _in_attempt(trace: AttemptTrace) -> tuple[Context | None, list[Any]]:
    """The parent context of a span of `trace`, and its links: the current span when it is in
    that trace already, else the attempt's root, linked to the current span."""
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


def _attempt_options(
    task_id: str, attempt: int, kind: str, attributes: Mapping[str, Any] | None
) -> dict[str, Any]:
    """The options of a span of attempt `attempt` of `task_id`; `kind` is a `SpanKind` name."""
    from opentelemetry.trace import SpanKind

    context, links = _in_attempt(AttemptTrace.of(task_id, attempt))
    shown = {"aios.task.id": task_id, "aios.task.attempt": attempt, **(attributes or {})}
    return {"context": context, "kind": SpanKind[kind], "attributes": shown, "links": links}


@contextlib.contextmanager
def attempt_span(
    name: str,
    task_id: str,
    attempt: int,
    *,
    kind: str = "INTERNAL",
    attributes: Mapping[str, Any] | None = None,
) -> Iterator[Span | None]:
    """A span of the attempt around the block, current in it; None while tracing is off."""
    tracer = _switch.tracer
    if tracer is None:
        yield None
        return
    options = _attempt_options(task_id, attempt, kind, attributes)
    with tracer.start_as_current_span(name, **options) as span:
        yield span


@contextlib.contextmanager
def child_span(
    name: str, *, kind: str = "INTERNAL", attributes: Mapping[str, Any] | None = None
) -> Iterator[Span | None]:
    """A child of the current span around the block; None while tracing is off or outside any
    span."""
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
    """A span of the attempt from `started` to now, made once what it is about is known (the
    task a claim took, the attempt a write acted on)."""
    tracer = _switch.tracer
    if tracer is not None:
        options = _attempt_options(task_id, attempt, kind, attributes)
        tracer.start_span(name, start_time=started, **options).end()


def record_writes(operation: str, answers: Sequence[Any], *, started: int, db_system: str) -> None:
    """One span per task a ledger write answered for, in the trace of the attempt the write
    belongs to, named as the database conventions name a client operation."""
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
    """`TRACEPARENT` of the current span, for a child process's environment; empty while
    tracing is off or outside any span."""
    return {} if _switch.tracer is None else _traceparent(None)


def _traceparent(context: Context | None) -> dict[str, str]:
    from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

    carrier: dict[str, str] = {}
    TraceContextTextMapPropagator().inject(carrier, context)
    value = carrier.get("traceparent")
    return {} if value is None else {TRACEPARENT_ENV: value}


class AgentRun:
    """The span of an agent's command (the GenAI conventions' `invoke_agent`), from its start to
    its exit; without tracing, or outside any span, it makes nothing."""

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

        return _traceparent(api.set_span_in_context(self._span))

    def end(self, exit_status: int | None, *, ended_by: str | None, output: bytes) -> None:
        """`exit_status` is None for a command that never started; `ended_by` says why the
        worker ended it."""
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
