"""`GET /v1/events/stream`: the ledger's events as they are sealed, as server-sent events.

A stream follows the Merkle tree's leaves, which are in integration order (commit order on
SQLite; on PostgreSQL the order the integrator appended them, unlike event ids), so a client
resuming from its `Last-Event-ID` loses and repeats nothing; on PostgreSQL an event reaches
streams once integrated (the integration lag), and a stream opens after a pass, so what
committed before it opened is behind its start. No stream holds a transaction: one `EventFeed`
per server reads the head (the tree's size) when a server of the ledger announces events
written or integrated (LISTEN/NOTIFY on PostgreSQL, so across processes), and every
`poll_seconds` besides, for writers that announce nothing (the command line); each stream
re-checks its caller's token as it reads, so a revoked token ends it within one poll.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Iterator
from typing import TYPE_CHECKING, Any

import attrs
from aios_ledger.core import LedgerError
from aios_ledger.core.api.event_stream import KEEP_ALIVE, event_message, opening_message
from aios_ledger.core.log.records import EventRow
from aios_ledger.core.tasks.answers import event_view
from aios_ledger.shell.api.principals import request_principal
from aios_ledger.shell.db.run import Connection, fetch_all, fetch_one, fetch_value
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import StreamingResponse
from starlette.types import Receive, Scope, Send

if TYPE_CHECKING:
    from aios_ledger.shell.api.backend import ApiSettings, Backend, Stores

LOG = logging.getLogger("aios_ledger.api")

EVENT_STREAM_TYPE = "text/event-stream"
LAST_EVENT_ID = "last-event-id"
# Events read at once: the most a stream holds that its client has not taken yet.
PAGE = 200
# How long a client waits before it reconnects (the stream's `retry:` field).
RETRY_MILLISECONDS = 1000


def read_head(conn: Connection) -> int:
    return int(fetch_value(conn, "event_stream_head"))


def stream_start(conn: Connection, after: int | None) -> tuple[int, int]:
    """The leaf a stream starts after and the event id it stands after (`after`, else the
    head; 0: the log's beginning)."""
    if after == 0:
        return -1, 0
    if after is not None:
        row = fetch_one(conn, "merkle_leaf_of_event", {"event_id": after})
        if row is None:
            raise LedgerError(
                "EVENT_NOT_FOUND",
                f"no event {after} in this ledger: resume from an id this stream sent "
                "(0: from the first event)",
            )
        return int(row["leaf_index"]), after
    leaf = read_head(conn) - 1
    if leaf < 0:
        return -1, 0
    return leaf, int(fetch_value(conn, "event_stream_leaf_event", {"leaf_index": leaf}))


def stream_page(
    conn: Connection, after_leaf: int, task_id: str | None
) -> tuple[list[dict[str, Any]], int, int]:
    """The next events after `after_leaf`, the leaf the next read starts after, and the head
    they were read under."""
    size = read_head(conn)
    params: dict[str, Any] = {"after_leaf": after_leaf, "size": size, "limit": PAGE}
    if task_id is None:
        rows = fetch_all(conn, "event_stream_page", params)
    else:
        rows = fetch_all(conn, "event_stream_page_for_task", {**params, "task_id": task_id})
    # A short page read everything up to the head (a filtered one skipped other tasks' events).
    reached = int(rows[-1]["leaf_index"]) if len(rows) == PAGE else max(after_leaf, size - 1)
    return rows, reached, size


class EventFeed:
    """The head every open stream of one server waits on (see the module)."""

    def __init__(self, backend: Backend, poll_seconds: float) -> None:
        self._backend = backend
        self._poll_seconds = poll_seconds
        self.head = -1  # the tree's size at the last poll (-1: not read yet)
        self.closing = False
        self._wakes: set[asyncio.Event] = set()
        self._poller: asyncio.Task[None] | None = None
        # Set when events were announced; its loop's, for the listener's thread to set it in.
        self._announced = asyncio.Event()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._listening = False

    @contextlib.contextmanager
    def subscribed(self) -> Iterator[asyncio.Event]:
        """A stream's wake-up, set when the head moves or the server shuts down."""
        wake = asyncio.Event()
        self._wakes.add(wake)
        loop = asyncio.get_running_loop()
        poller = self._poller
        # One poll per server; a new one for a new event loop (a test client's, per request).
        if poller is None or poller.done() or poller.get_loop() is not loop:
            self._announced = asyncio.Event()
            self._loop = loop
            self._poller = loop.create_task(self._poll())
        if not self._listening:
            self._listening = True
            self._backend.listen_for_events(self._heard)
        try:
            yield wake
        finally:
            self._wakes.discard(wake)

    def _heard(self) -> None:
        """From the listener's thread: read the head now."""
        loop, announced = self._loop, self._announced
        if loop is not None:
            with contextlib.suppress(RuntimeError):  # its loop closed: nobody streams there
                loop.call_soon_threadsafe(announced.set)

    async def _poll(self) -> None:
        announced = self._announced
        while self._wakes and not self.closing:
            # Cleared before the head is read: an announcement after this is read next time.
            announced.clear()
            try:
                head = await self._backend.read(lambda stores: stores.db.read(read_head))
            except LedgerError as refused:  # the streams wait; the next poll tries again
                LOG.warning("the event stream's head could not be read: %s", refused)
            else:
                if head != self.head:
                    self.head = head
                    self._wake_all()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(announced.wait(), self._poll_seconds)

    def close(self) -> None:
        """End every open stream now; one opened after this ends at once, told to come back."""
        self.closing = True
        self._wake_all()
        self._heard()  # the poll ends now, not after its interval

    def _wake_all(self) -> None:
        for wake in self._wakes:
            wake.set()


@attrs.define
class EventStream:
    """One client's stream: its cursor, its caller, and the messages it writes."""

    request: Request
    backend: Backend
    feed: EventFeed
    roles: frozenset[str]
    task_id: str | None
    after_leaf: int  # the leaf the next read starts after
    start_id: int
    typed: bool = True
    seen: int = -1  # the head this stream has read everything under (-1: nothing yet)
    disconnected: bool = False
    wake: asyncio.Event | None = None

    def disconnect(self) -> None:
        self.disconnected = True
        if self.wake is not None:
            self.wake.set()

    async def messages(self, settings: ApiSettings) -> AsyncIterator[bytes]:
        loop = asyncio.get_running_loop()
        ends_at = loop.time() + settings.stream_max_seconds
        with self.feed.subscribed() as wake:
            self.wake = wake
            yield opening_message(self.start_id, RETRY_MILLISECONDS).encode()
            keep_alive_at = loop.time() + settings.stream_keepalive_seconds
            while True:
                wake.clear()
                now = loop.time()
                if self.feed.closing or self.disconnected or now >= ends_at:
                    return
                due = now >= keep_alive_at
                if due or self.seen < 0 or self.feed.head > self.seen:
                    if not await self._still_allowed():
                        return
                    async for page in self._pages():
                        yield page
                    if due:
                        yield KEEP_ALIVE.encode()
                        keep_alive_at = loop.time() + settings.stream_keepalive_seconds
                    continue
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(wake.wait(), min(keep_alive_at, ends_at) - now)

    async def _still_allowed(self) -> bool:
        """Whether the caller's credential still resolves to a reader (not revoked since)."""
        principal = await run_in_threadpool(request_principal, self.request, self.backend)
        return principal is not None and not principal.roles.isdisjoint(self.roles)

    async def _pages(self) -> AsyncIterator[bytes]:
        """The events committed since the last read, a page once the client took the last."""
        while not (self.feed.closing or self.disconnected):
            rows, self.after_leaf, size = await self.backend.read(self._next_page)
            if rows:
                yield "".join(_message(row, typed=self.typed) for row in rows).encode()
            if self.after_leaf >= size - 1:
                self.seen = size
                return

    def _next_page(self, stores: Stores) -> tuple[list[dict[str, Any]], int, int]:
        after, task_id = self.after_leaf, self.task_id
        return stores.db.read(lambda conn: stream_page(conn, after, task_id))


def _message(row: dict[str, Any], *, typed: bool) -> str:
    view = event_view(EventRow.from_row(row))
    return event_message(view["event_id"], view["event_type"], view, typed=typed)


class EventStreamResponse(StreamingResponse):
    """The stream's answer; a client that takes nothing within the send timeout is
    disconnected."""

    def __init__(self, stream: EventStream, settings: ApiSettings) -> None:
        super().__init__(
            stream.messages(settings),
            media_type=EVENT_STREAM_TYPE,
            headers={"Cache-Control": "no-store", "X-Accel-Buffering": "no"},
        )
        self._stream = stream
        self._send_timeout = settings.stream_send_timeout

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        await send(
            {"type": "http.response.start", "status": self.status_code, "headers": self.raw_headers}
        )
        listener = asyncio.get_running_loop().create_task(self._listen(receive))
        messages = self.body_iterator
        assert isinstance(messages, AsyncIterator)
        try:
            async for chunk in messages:
                try:
                    async with asyncio.timeout(self._send_timeout):
                        await send({"type": "http.response.body", "body": chunk, "more_body": True})
                except TimeoutError:
                    # Left incomplete, the response's connection is closed by the server.
                    LOG.warning(
                        "an event stream's client took nothing for %s s: disconnected (it "
                        "resumes with its Last-Event-ID)",
                        self._send_timeout,
                    )
                    return
            await send({"type": "http.response.body", "body": b"", "more_body": False})
        except OSError:
            return  # the client went away (ASGI 2.4: sending to a closed connection)
        finally:
            listener.cancel()
            closing = getattr(messages, "aclose", None)
            if closing is not None:
                await closing()

    async def _listen(self, receive: Receive) -> None:
        while (await receive())["type"] != "http.disconnect":
            pass
        self._stream.disconnect()


async def open_stream(
    request: Request,
    backend: Backend,
    feed: EventFeed,
    *,
    roles: frozenset[str],
    after: int | None,
    task_id: str | None,
    typed: bool = True,
) -> EventStreamResponse:
    """The stream after event `after` (None: from the head), its refusals raised before it
    starts; `typed` False sends every event as a plain `message`."""

    def start(stores: Stores) -> tuple[int, int]:
        if task_id is not None:
            stores.tasks.get(task_id)  # a mistyped id is TASK_NOT_FOUND, not a silent stream
        if backend.integrator is not None:
            # What committed before the stream opened is behind its start, not sent as new.
            backend.integrator.catch_up()
        return stores.db.read(lambda conn: stream_start(conn, after))

    begins = await backend.read(start)
    stream = EventStream(request, backend, feed, roles, task_id, *begins, typed=typed)
    return EventStreamResponse(stream, backend.settings)
