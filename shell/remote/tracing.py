"""The API client's side of a trace: a client span for each request sent under a current span.
Apart from `aios_ledger.shell.tracing` because it needs httpx, which local commands never import.
"""

from __future__ import annotations

from typing import Any

import httpx
from aios_ledger.shell.tracing import current_tracer


def traced_transport(transport: httpx.BaseTransport | None) -> httpx.BaseTransport | None:
    """`transport` (None: httpx's own), sending `traceparent` while tracing is on."""
    if current_tracer() is None:
        return transport
    return TracedTransport(transport or httpx.HTTPTransport())


class TracedTransport(httpx.BaseTransport):
    """An httpx transport that sends each request under a current span with a client span and
    its `traceparent`; one outside any span (a claim's poll) goes out in no trace."""

    def __init__(self, inner: httpx.BaseTransport) -> None:
        self._inner = inner

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        tracer = current_tracer()
        if tracer is None:
            return self._inner.handle_request(request)
        from opentelemetry import trace as api
        from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

        if not api.get_current_span().get_span_context().is_valid:
            return self._inner.handle_request(request)
        url = request.url
        attributes: dict[str, Any] = {
            "http.request.method": request.method,
            "server.address": url.host,
            "url.full": str(url.copy_with(query=None)),
        }
        if url.port is not None:
            attributes["server.port"] = url.port
        with tracer.start_as_current_span(
            request.method, kind=api.SpanKind.CLIENT, attributes=attributes
        ) as span:
            TraceContextTextMapPropagator().inject(request.headers)
            response = self._inner.handle_request(request)
            span.set_attribute("http.response.status_code", response.status_code)
            if response.status_code >= 400:
                span.set_attribute("error.type", str(response.status_code))
                span.set_status(api.StatusCode.ERROR)
            return response

    def close(self) -> None:
        self._inner.close()
