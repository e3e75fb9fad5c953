"""The event stream's wire format (`core/api/event_stream.py`): what the server writes is what
the client's parser reads back, as the W3C event-stream interpretation reads it."""

from __future__ import annotations

import json

import pytest
from aios_ledger.core import LedgerError
from aios_ledger.core.api.event_stream import (
    KEEP_ALIVE,
    StreamedEvent,
    StreamParser,
    event_message,
    opening_message,
)


def parsed(text: str, parser: StreamParser | None = None) -> list[StreamedEvent]:
    reader = StreamParser() if parser is None else parser
    return list(reader.feed_text(text))


def test_an_event_is_one_message_its_data_one_line_of_json() -> None:
    event = {"event_id": 7, "event_type": "TASK_CREATED", "payload": {"note": "a\nb\r\u2028c"}}
    text = event_message(7, "TASK_CREATED", event)
    assert text.isascii() and text.count("\n\n") == 1 and text.endswith("\n\n")
    assert [line.split(":", 1)[0] for line in text.splitlines() if line] == ["id", "event", "data"]
    (message,) = parsed(text)
    assert (message.event_id(), message.event) == (7, "TASK_CREATED")
    assert message.document() == event


def test_an_event_type_that_is_not_the_ledgers_is_sent_as_a_plain_message() -> None:
    # A legacy row's type holding a line break would otherwise end the field early.
    text = event_message(3, "legacy\nevent: forged", {"event_type": "legacy\nevent: forged"})
    (message,) = parsed(text)
    assert message.event == "message"
    assert message.document() == {"event_type": "legacy\nevent: forged"}


def test_the_opening_message_moves_the_last_id_and_dispatches_nothing() -> None:
    parser = StreamParser()
    assert parsed(opening_message(41, 1000) + KEEP_ALIVE, parser) == []
    assert (parser.last_id, parser.retry) == ("41", 1000)


def test_a_message_a_dropped_connection_cut_short_is_not_dispatched() -> None:
    parser = StreamParser()
    whole = event_message(1, "TASK_CREATED", {"n": 1})
    cut = event_message(2, "TASK_CLAIMED", {"n": 2}).rstrip("\n")  # no blank line: unfinished
    assert [m.event_id() for m in parsed(whole + cut, parser)] == [1]
    parser.reconnected()
    again = parsed(event_message(2, "TASK_CLAIMED", {"n": 2}), parser)
    assert [(m.event_id(), m.document()) for m in again] == [(2, {"n": 2})]


def test_the_parser_follows_the_fields_rules() -> None:
    # No space after the colon, a field without one, unknown fields, a bad retry, data lines.
    text = 'id:5\nretry: soon\nunknown: x\nevent\ndata:{"a":\ndata: 1}\n\n'
    parser = StreamParser()
    (message,) = parsed(text, parser)
    assert (message.last_id, message.event, message.data) == ("5", "message", '{"a":\n1}')
    assert json.loads(message.data) == {"a": 1} and parser.retry is None


@pytest.mark.parametrize("last_id", ["", "x", "1" * 19, "-1"])
def test_a_message_without_an_event_id_is_a_protocol_error(last_id: str) -> None:
    with pytest.raises(LedgerError) as refused:
        StreamedEvent(last_id, "TASK_CREATED", "{}").event_id()
    assert refused.value.code == "API_PROTOCOL_ERROR"


def test_data_that_is_not_json_is_a_protocol_error() -> None:
    with pytest.raises(LedgerError) as refused:
        StreamedEvent("1", "TASK_CREATED", "{not json").document()
    assert refused.value.code == "API_PROTOCOL_ERROR"


@pytest.mark.parametrize("size", [1, 2, 3, 7])
def test_line_breaks_of_every_kind_split_anywhere_in_the_text(size: int) -> None:
    text = "id: 1\r\ndata: {}\r\n\r\nid: 2\rdata: []\r\rid: 3\ndata: 3\n\n"
    parser = StreamParser()
    chunks = [text[i : i + size] for i in range(0, len(text), size)]
    got = [m for chunk in chunks for m in parser.feed_text(chunk)]
    assert [(m.event_id(), m.document()) for m in got] == [(1, {}), (2, []), (3, 3)]
