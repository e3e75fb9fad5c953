"""The connections `serve` accepts: a bound on their number, and on the time and size of a
request's head.

uvicorn bounds neither, so a client that never finishes its headers (slowloris) could hold
connections as long as it liked. After a 431 the server reads on, discarding, for
`LINGER_SECONDS`, because closing with unread bytes would reset the connection and the client
could lose the answer.
"""

from __future__ import annotations

import asyncio

from aios_ledger.core.jsonvalue import dumps_canonical
from aios_ledger.shell.api.problems import PROBLEM_TYPE, problem_document
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

# How long a refused connection's further bytes are read and discarded before it is closed.
LINGER_SECONDS = 2.0


def _refusal(code: str, reason: str, detail: str, *extra_headers: str) -> bytes:
    """A whole response carrying the problem `code`, after which the connection is closed."""
    document = problem_document(code, detail)
    body = dumps_canonical(document).encode()
    head = (
        f"HTTP/1.1 {document['status']} {reason}\r\n"
        f"content-type: {PROBLEM_TYPE}\r\n"
        f"content-length: {len(body)}\r\n"
        + "".join(f"{header}\r\n" for header in extra_headers)
        + "connection: close\r\n\r\n"
    )
    return head.encode("ascii") + body


def guarded_protocol(
    *, header_timeout: float, max_connections: int, max_header_bytes: int
) -> type[HttpToolsProtocol]:
    """uvicorn's `HttpToolsProtocol` with the header timeout and the two limits above."""
    refusal = _refusal(
        "TOO_MANY_CONNECTIONS",
        "Service Unavailable",
        f"the server holds {max_connections} connections already (its --max-connections): "
        "try again shortly, or close connections this client does not use",
        "retry-after: 1",
    )
    too_large = _refusal(
        "HEADERS_TOO_LARGE",
        "Request Header Fields Too Large",
        f"the request line and headers are over {max_header_bytes} bytes (the server's "
        "--max-header-bytes)",
    )

    class GuardedHttpToolsProtocol(HttpToolsProtocol):
        _head_timer: asyncio.TimerHandle | None = None
        # A request's head has begun (or the connection is new) and is not complete yet.
        _in_head = True
        # A request's head is complete and its body is not yet all received.
        _in_body = False
        # Bytes received since the last head was complete, while a head was awaited.
        _head_bytes = 0
        # Refused: what arrives now is discarded, unparsed, until the connection closes.
        _refused = False
        _linger_timer: asyncio.TimerHandle | None = None

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
            if self._refused:
                return
            room = max(0, max_header_bytes - self._head_bytes)
            if self._awaiting_head() and len(data) > room:
                # Only what the limit leaves room for: a head still incomplete then is over it.
                if room:
                    self._feed(data[:room])
                if self.transport.is_closing():
                    return
                if self._awaiting_head():
                    self._refuse_head()
                    return
                data = data[room:]
            self._feed(data)

        def _feed(self, data: bytes) -> None:
            super().data_received(data)
            if self.transport.is_closing():
                return  # refused by the parser (400)
            if self._awaiting_head():
                self._head_bytes += len(data)
                self._arm_head_timer()  # part of a head, or bytes before a new request's
            elif self._draining():
                self._arm_head_timer()  # the rest of the body must come as soon as a head
            else:
                self._disarm_head_timer()

        def on_message_begin(self) -> None:
            self._in_head = True
            super().on_message_begin()

        def on_headers_complete(self) -> None:
            self._in_head = False
            self._in_body = True
            self._head_bytes = 0
            super().on_headers_complete()

        def on_message_complete(self) -> None:
            if self._draining():
                self._disarm_head_timer()  # the next head's time starts at its first byte
            self._in_body = False
            super().on_message_complete()

        def connection_lost(self, exc: Exception | None) -> None:
            self._disarm_head_timer()
            if self._linger_timer is not None:
                self._linger_timer.cancel()
            super().connection_lost(exc)

        def _awaiting_head(self) -> bool:
            """A head has begun and is not complete, or no request is being answered."""
            cycle = self.cycle
            if self._in_head:
                return True
            return not self._in_body and (cycle is None or cycle.response_complete)

        def _draining(self) -> bool:
            """Answered before its body was all in: the rest is discarded, no next head."""
            cycle = self.cycle
            return self._in_body and cycle is not None and cycle.response_complete

        def _refuse_head(self) -> None:
            """Answer 431 and close; close only while a pipelined response is still being
            written, as the answer would land inside it."""
            self._disarm_head_timer()
            cycle = self.cycle
            if cycle is not None and not cycle.response_complete:
                self.transport.close()
                return
            self.transport.write(too_large)
            if not self.transport.can_write_eof():
                self.transport.close()
                return
            self.transport.write_eof()  # once the answer is sent; the client reads it, then EOF
            self._refused = True
            self._linger_timer = self.loop.call_later(LINGER_SECONDS, self.transport.close)

        def _arm_head_timer(self) -> None:
            if self._head_timer is None and not self.transport.is_closing():
                self._head_timer = self.loop.call_later(header_timeout, self._head_timed_out)

        def _disarm_head_timer(self) -> None:
            if self._head_timer is not None:
                self._head_timer.cancel()
                self._head_timer = None

        def _head_timed_out(self) -> None:
            self._head_timer = None
            if (self._awaiting_head() or self._draining()) and not self.transport.is_closing():
                self.transport.close()

    return GuardedHttpToolsProtocol
