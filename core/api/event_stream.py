"""The event stream's wire format (W3C server-sent events, HTML's "Server-sent events"
section), both ways: the messages `GET /v1/events/stream` writes, and the parser the client
reads them with.

A ledger event is one message: `id:` its event id (what a reconnecting client sends back as
`Last-Event-ID`), `event:` its type, `data:` the event as `GET /v1/tasks/{id}/events` gives it,
as one line of JSON (untyped, `?typed=false`, a message has no `event:`: a browser dispatches
every one as `message`) (JSON text never holds a raw line break: they are escaped). A message with
an `id:` and no data moves a client's last event id without an event (the stream's opening one
says where it starts, so that a client that drops before any event resumes from there); a
comment line (`:`) keeps an idle connection open.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator

import attrs
from aios_ledger.core.errors import LedgerError

# An `event:` field names the event's type when it is one of the ledger's (UPPER_SNAKE); any
# other text (a legacy row adopted as it was) is sent as a plain `message`, its type in data.
_EVENT_TYPE = re.compile(r"[A-Z][A-Z0-9_]{0,99}")
PLAIN_MESSAGE = "message"
# The stream's line breaks: CRLF, LF or CR, and nothing else.
_LINE_END = re.compile(r"\r\n|\r|\n")
# A line longer than this is not the stream's (an event is at most the ledger's payload
# bound): the parser refuses it rather than buffer without end.
MAX_LINE_CHARS = 8 * 1024 * 1024


def event_message(event_id: int, event_type: str, data: object, *, typed: bool = True) -> str:
    """One event's message: `id`, `event` and the event as one line of JSON. Untyped
    (`typed=False`: the stream's `?typed=false`) it has no `event:` field, so that a browser's
    EventSource dispatches every event as a plain `message` (its `onmessage`), whatever its
    type (which its data holds): a listener needs no list of the ledger's event types."""
    # ASCII: U+2028, U+0085 and their like stay escaped, for the clients that split lines on
    # them too (Python's `str.splitlines`, httpx's `iter_lines`); the JSON is the same.
    line = json.dumps(data, separators=(",", ":"), ensure_ascii=True, allow_nan=False)
    if not typed:
        return f"id: {event_id}\ndata: {line}\n\n"
    kind = event_type if _EVENT_TYPE.fullmatch(event_type) else PLAIN_MESSAGE
    return f"id: {event_id}\nevent: {kind}\ndata: {line}\n\n"


def opening_message(start_id: int, retry_milliseconds: int) -> str:
    """The stream's first message: how long a client waits before it reconnects, and the
    event id it stands after (a message without data: no event is dispatched)."""
    return f"retry: {retry_milliseconds}\nid: {start_id}\n\n"


KEEP_ALIVE = ": keep-alive\n\n"


@attrs.frozen
class StreamedEvent:
    """A dispatched message: its last event id (as sent, text), its type and its data."""

    last_id: str
    event: str
    data: str

    def event_id(self) -> int:
        """The message's id as a ledger event id (`API_PROTOCOL_ERROR` if it is not one)."""
        if not self.last_id.isascii() or not self.last_id.isdigit() or len(self.last_id) > 18:
            raise LedgerError("API_PROTOCOL_ERROR", "a stream message without an event id")
        return int(self.last_id)

    def document(self) -> object:
        try:
            return json.loads(self.data)
        except ValueError:
            raise LedgerError("API_PROTOCOL_ERROR", "a stream message's data is not JSON") from None


@attrs.define
class StreamParser:
    """The event-stream interpretation: `feed_text(text)` takes the stream's text as it
    arrives and gives the messages it completes (`feed(line)`: one line, without its break).
    `last_id` is the last event id so far (a message without data moves it too); `retry` the
    reconnection time the server asked for (milliseconds; None: none asked)."""

    last_id: str = ""
    retry: int | None = None
    _event: str = ""
    _data: list[str] = attrs.field(factory=list)
    _pending: str = ""  # the start of a line whose break has not come yet

    def feed_text(self, text: str) -> Iterator[StreamedEvent]:
        buffer, start = self._pending + text, 0
        for end in _LINE_END.finditer(buffer):
            if end.group() == "\r" and end.end() == len(buffer):
                break  # perhaps the first half of a CRLF: wait for what follows
            yield from self.feed(buffer[start : end.start()])
            start = end.end()
        self._pending = buffer[start:]
        if len(self._pending) > MAX_LINE_CHARS:
            raise LedgerError("API_PROTOCOL_ERROR", "a stream line longer than any event")

    def feed(self, line: str) -> Iterator[StreamedEvent]:
        if len(line) > MAX_LINE_CHARS:
            raise LedgerError("API_PROTOCOL_ERROR", "a stream line longer than any event")
        if not line:
            yield from self._dispatch()
            return
        if line.startswith(":"):
            return  # a comment: the keep-alive
        name, colon, value = line.partition(":")
        if colon and value.startswith(" "):
            value = value[1:]
        if name == "data":
            self._data.append(value)
        elif name == "event":
            self._event = value
        elif name == "id" and "\0" not in value:
            self.last_id = value
        elif name == "retry" and value.isascii() and value.isdigit():
            self.retry = int(value)

    def reconnected(self) -> None:
        """A new connection: a message the last one left unfinished is dropped (its event is
        sent again after the last id)."""
        self._data, self._event, self._pending = [], "", ""

    def _dispatch(self) -> Iterator[StreamedEvent]:
        data, event = self._data, self._event or PLAIN_MESSAGE
        self._data, self._event = [], ""
        if data:
            yield StreamedEvent(self.last_id, event, "\n".join(data))
