"""The event stream's bound on a slow client, at the ASGI boundary (a client that takes nothing
cannot be made on loopback without megabytes of kernel buffers first): a connection that does
not take a page within the send timeout ends the stream, which leaves the feed and sends no
more; and the feed's poll runs only while a stream is open."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from aios_ledger.shell import Database, TaskLedger
from aios_ledger.shell.api.backend import ApiSettings, Backend
from aios_ledger.shell.api.stream import EventFeed, open_stream
from aios_ledger.shell.api.tokens import issue_token
from starlette.requests import Request


def scope(token: str) -> dict[str, Any]:
    return {
        "type": "http",
        "method": "GET",
        "path": "/v1/events/stream",
        "headers": [(b"authorization", f"Bearer {token}".encode())],
        "query_string": b"",
    }


def test_a_client_that_takes_no_page_within_the_send_timeout_is_disconnected(
    tmp_path: Path,
) -> None:
    path = tmp_path / "ledger.db"
    with Database(path) as db:
        ledger = TaskLedger(database=db)
        for n in range(3):
            ledger.create_task({"goal": "g", "instructions": "i"}, idempotency_key=f"k{n}")
        token = issue_token(db, "reader", ["auditor"])["token"]
    settings = ApiSettings(db_path=str(path), stream_send_timeout=0.05, stream_poll_seconds=0.01)
    backend = Backend(settings)
    feed = EventFeed(backend, settings.stream_poll_seconds)
    sent: list[dict[str, Any]] = []

    async def stalled_send(message: Any) -> None:
        sent.append(message)
        if message["type"] == "http.response.body" and len(sent) > 2:
            await asyncio.Event().wait()  # the client's window is full, and stays so

    async def receive() -> Any:
        await asyncio.Event().wait()  # the client never hangs up

    async def run() -> None:
        request = scope(token)
        response = await open_stream(
            Request(request), backend, feed, roles=frozenset({"auditor"}), after=0, task_id=None
        )
        # A bound on the wait, not a speed: without the send timeout the call never returns.
        await asyncio.wait_for(response(request, receive, stalled_send), 60)
        assert feed._wakes == set()  # the stream left the feed
        await asyncio.sleep(0.05)
        assert feed._poller is not None and feed._poller.done()  # no stream: no poll

    try:
        asyncio.run(run())
    finally:
        backend.close()
    kinds = [(m["type"], m.get("more_body")) for m in sent]
    # The head, the opening message, the page the client never took: no end of the body.
    assert kinds == [
        ("http.response.start", None),
        ("http.response.body", True),
        ("http.response.body", True),
    ]
    assert b"TASK_CREATED" in sent[2]["body"]
