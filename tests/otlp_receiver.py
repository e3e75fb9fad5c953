"""An OTLP/HTTP trace receiver on a loopback port, for tests whose processes export their spans
the OTel way (`OTEL_EXPORTER_OTLP_ENDPOINT=receiver.url`): `POST /v1/traces` bodies are decoded
with the OTLP protobufs and kept, one `ReceivedSpan` per span, with the service that sent it."""

from __future__ import annotations

import http.server
import threading
from types import TracebackType
from typing import Any

import attrs
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)
from opentelemetry.proto.common.v1.common_pb2 import AnyValue

SPAN_KINDS = {1: "INTERNAL", 2: "SERVER", 3: "CLIENT", 4: "PRODUCER", 5: "CONSUMER"}


def _value(value: AnyValue) -> Any:
    kind = value.WhichOneof("value")
    return None if kind is None else getattr(value, kind)


@attrs.frozen
class ReceivedSpan:
    service: str
    name: str
    kind: str
    trace_id: int
    span_id: int
    parent_span_id: int | None
    attributes: dict[str, Any]
    links: tuple[tuple[int, int], ...]


class OtlpReceiver:
    def __init__(self) -> None:
        self.spans: list[ReceivedSpan] = []
        self._lock = threading.Lock()
        receiver = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers["Content-Length"]))
                if self.path == "/v1/traces":
                    receiver._keep(ExportTraceServiceRequest.FromString(body))
                    answer = ExportTraceServiceResponse().SerializeToString()
                    self.send_response(200)
                else:
                    answer = b""
                    self.send_response(404)
                self.send_header("Content-Type", "application/x-protobuf")
                self.send_header("Content-Length", str(len(answer)))
                self.end_headers()
                self.wfile.write(answer)

            def log_message(self, format: str, *args: Any) -> None:
                pass  # the test's output is the spans, not an access log

        self._server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}"
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    def _keep(self, request: ExportTraceServiceRequest) -> None:
        received = []
        for resource_spans in request.resource_spans:
            resource = {a.key: _value(a.value) for a in resource_spans.resource.attributes}
            for scope_spans in resource_spans.scope_spans:
                for span in scope_spans.spans:
                    parent = int.from_bytes(span.parent_span_id, "big") or None
                    received.append(
                        ReceivedSpan(
                            service=str(resource.get("service.name")),
                            name=span.name,
                            kind=SPAN_KINDS.get(span.kind, str(span.kind)),
                            trace_id=int.from_bytes(span.trace_id, "big"),
                            span_id=int.from_bytes(span.span_id, "big"),
                            parent_span_id=parent,
                            attributes={a.key: _value(a.value) for a in span.attributes},
                            links=tuple(
                                (
                                    int.from_bytes(link.trace_id, "big"),
                                    int.from_bytes(link.span_id, "big"),
                                )
                                for link in span.links
                            ),
                        )
                    )
        with self._lock:
            self.spans.extend(received)

    def received(self) -> list[ReceivedSpan]:
        with self._lock:
            return list(self.spans)

    def __enter__(self) -> OtlpReceiver:
        self._thread.start()
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self._server.shutdown()
        self._server.server_close()
