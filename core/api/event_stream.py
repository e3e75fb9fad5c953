"""The event stream's wire format (W3C server-sent events), both ways; a message with an `id:` and
no data moves the last id, so that a client resumes where the stream began."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator

import attrs
from aios_ledger.core.errors import LedgerError

# `event:` names a ledger event type (UPPER_SNAKE); any other is a plain `message`.
_EVENT_TYPE = re.compile(r"[A-Z][A-Z0-9_]{0,99}")
PLAIN_MESSAGE = "message"
# The stream's line breaks: CRLF, LF or CR, and nothing else.
_LINE_END = re.compile(r"\r\n|\r|\n")
# A longer line is not the stream's: refused rather than buffered without end.
MAX_LINE_CHARS = 8 * 1024 * 1024


def event_message(event_id: int, event_type: str, data: object, *, typed: bool = True) -> str:
    """One event's message; untyped, so that a browser's EventSource calls `onmessage`."""
    # ASCII, for clients that also split lines on U+2028 and U+0085.
    line = json.dumps(data, separators=(",", ":"), ensure_ascii=True, allow_nan=False)
    if not typed:
        return f"id: {event_id}\ndata: {line}\n\n"
    kind = event_type if _EVENT_TYPE.fullmatch(event_type) else PLAIN_MESSAGE
    return f"id: {event_id}\nevent: {kind}\ndata: {line}\n\n"


def opening_message(start_id: int, retry_milliseconds: int) -> str:
    """The stream's first message: the reconnection delay and the event id it stands after."""
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
    """The event-stream interpretation; `last_id` and `retry` are the stream's state."""

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
        """A new connection drops an unfinished message, which is sent again."""
        self._data, self._event, self._pending = [], "", ""

    def _dispatch(self) -> Iterator[StreamedEvent]:
        data, event = self._data, self._event or PLAIN_MESSAGE
        self._data, self._event = [], ""
        if data:
            yield StreamedEvent(self.last_id, event, "\n".join(data))
