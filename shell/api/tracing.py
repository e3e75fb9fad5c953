"""The server's spans: `TraceMiddleware` continues a request's W3C `traceparent` with a server
span by the HTTP conventions, under which the ledger's spans of its writes are made.

A request without a `traceparent` makes no server span, so the polls of idle workers leave no
trace of their own.
"""

from __future__ import annotations

from typing import Any

from aios_ledger.shell.tracing import current_tracer
from starlette.types import ASGIApp, Message, Receive, Scope, Send

TRACE_HEADERS = (b"traceparent", b"tracestate")
SERVER_ERROR = 500


class TraceMiddleware:
    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        tracer = current_tracer()
        if tracer is None or scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        carrier = {
            name.decode("latin-1"): value.decode("latin-1")
            for name, value in scope["headers"]
            if name in TRACE_HEADERS
        }
        if "traceparent" not in carrier:
            await self.app(scope, receive, send)
            return
        from opentelemetry import trace as api
        from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

        parent = TraceContextTextMapPropagator().extract(carrier)
        if not api.get_current_span(parent).get_span_context().is_valid:
            await self.app(scope, receive, send)  # a malformed traceparent continues nothing
            return
        method = str(scope["method"])
        answered: dict[str, int] = {}

        async def sending(message: Message) -> None:
            if message["type"] == "http.response.start":
                answered["status"] = int(message["status"])
            await send(message)

        attributes: dict[str, Any] = {
            "http.request.method": method,
            "url.path": str(scope["path"]),
            "url.scheme": str(scope.get("scheme", "http")),
        }
        with tracer.start_as_current_span(
            method, context=parent, kind=api.SpanKind.SERVER, attributes=attributes
        ) as span:
            await self.app(scope, receive, sending)
            route = getattr(scope.get("route"), "path", None)
            if isinstance(route, str):
                span.update_name(f"{method} {route}")
                span.set_attribute("http.route", route)
            status = answered.get("status")
            if status is not None:
                span.set_attribute("http.response.status_code", status)
                if status >= SERVER_ERROR:
                    span.set_attribute("error.type", str(status))
                    span.set_status(api.StatusCode.ERROR)
