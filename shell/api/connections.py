"""The connections `serve` accepts: a bound on their number, and on the time a request's head
may take to arrive.

uvicorn bounds neither (its keep-alive timeout runs only after a response, and
`limit_concurrency` counts a connection but answers only once a request's head is complete),
so a client that opens connections and never finishes their headers (slowloris) would hold
them, and the descriptors behind them, for as long as it likes. `guarded_protocol` is uvicorn's
own httptools protocol (its C parser, the one uvicorn picks when httptools is installed: about
10% more lifecycles/s than its h11 protocol in bench part 8, same run) with two rules added:

- a request's head (request line and headers) must be complete within `header_timeout`
  seconds of its first byte, or of the connection's opening, or the connection is closed
  (at any point between requests: a trickle of bytes does not extend it);
- beyond `max_connections` open connections, a new one is answered 503
  `TOO_MANY_CONNECTIONS` (a problem document, `Connection: close`) and closed before anything
  of it is read.

A body's time is bounded by the app itself (`ApiSettings.body_timeout`); idle keep-alive
connections by uvicorn's `timeout_keep_alive`.
"""

from __future__ import annotations

import asyncio

from aios_ledger.core.jsonvalue import dumps_canonical
from aios_ledger.shell.api.problems import PROBLEM_TYPE, problem_document
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol


def _too_many_connections(limit: int) -> bytes:
    document = problem_document(
        "TOO_MANY_CONNECTIONS",
        f"the server holds {limit} connections already (its --max-connections): "
        "try again shortly, or close connections this client does not use",
    )
    body = dumps_canonical(document).encode()
    head = (
        f"HTTP/1.1 {document['status']} Service Unavailable\r\n"
        f"content-type: {PROBLEM_TYPE}\r\n"
        f"content-length: {len(body)}\r\n"
        "retry-after: 1\r\n"
        "connection: close\r\n\r\n"
    )
    return head.encode("ascii") + body


def guarded_protocol(*, header_timeout: float, max_connections: int) -> type[HttpToolsProtocol]:
    """uvicorn's `HttpToolsProtocol` with the header timeout and the connection limit above."""
    refusal = _too_many_connections(max_connections)

    class GuardedHttpToolsProtocol(HttpToolsProtocol):
        _head_timer: asyncio.TimerHandle | None = None
        # A request's head has begun (or the connection is new) and is not complete yet.
        _in_head = True

        def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
            # The count includes connections being refused right now, which are gone at once.
            over = len(self.connections) >= max_connections
            super().connection_made(transport)
            if over:
                transport.write(refusal)
                transport.close()
                return
            self._arm_head_timer()

        def data_received(self, data: bytes) -> None:
            super().data_received(data)
            if self._awaiting_head():
                self._arm_head_timer()  # part of a head, or bytes before a new request's
            else:
                self._disarm_head_timer()

        def on_message_begin(self) -> None:
            self._in_head = True
            super().on_message_begin()

        def on_headers_complete(self) -> None:
            self._in_head = False
            super().on_headers_complete()

        def connection_lost(self, exc: Exception | None) -> None:
            self._disarm_head_timer()
            super().connection_lost(exc)

        def _awaiting_head(self) -> bool:
            """A head has begun and is not complete, or no request is being answered (bytes
            between requests that begin none, such as blank lines, count as a head's)."""
            cycle = self.cycle
            return self._in_head or cycle is None or cycle.response_complete

        def _arm_head_timer(self) -> None:
            if self._head_timer is None and not self.transport.is_closing():
                self._head_timer = self.loop.call_later(header_timeout, self._head_timed_out)

        def _disarm_head_timer(self) -> None:
            if self._head_timer is not None:
                self._head_timer.cancel()
                self._head_timer = None

        def _head_timed_out(self) -> None:
            self._head_timer = None
            if self._awaiting_head() and not self.transport.is_closing():
                self.transport.close()

    return GuardedHttpToolsProtocol
