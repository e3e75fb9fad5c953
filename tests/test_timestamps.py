"""`Timestamp`: the ledger's one time value, and the one text form it is stored in."""

from __future__ import annotations

import copy
import pickle
from datetime import UTC, datetime, timedelta, timezone

import pytest
from aios_ledger.core import LedgerError, Timestamp
from hypothesis import given
from hypothesis import strategies as st

AWARE = st.datetimes(
    min_value=datetime(1, 1, 2),
    max_value=datetime(9999, 12, 30),
    timezones=st.sampled_from([UTC, timezone(timedelta(hours=2)), timezone(-timedelta(hours=9))]),
)


def test_any_offset_is_read_as_utc_in_the_one_form() -> None:
    moment = Timestamp.parse("2026-09-01T12:00:00+02:00")
    assert moment.text == str(moment) == "2026-09-01T10:00:00.000Z"
    assert moment == Timestamp.parse("2026-09-01T10:00:00Z")  # the older whole-second form
    assert Timestamp.parse("0999-01-01T00:00:00Z").text == "0999-01-01T00:00:00.000Z"


def test_milliseconds_are_kept_in_the_text() -> None:
    moment = Timestamp.from_datetime(datetime(2026, 8, 20, 0, 0, 59, 999_999, tzinfo=UTC))
    assert moment.epoch_ms % 1000 == 999
    assert moment.text == "2026-08-20T00:00:59.999Z"
    assert moment.plus_seconds(1).text == "2026-08-20T00:01:00.999Z"
    assert Timestamp.from_epoch_ms(moment.epoch_ms) == moment
    assert moment.to_datetime() == datetime(2026, 8, 20, 0, 0, 59, 999_000, tzinfo=UTC)


@pytest.mark.parametrize(
    "text", ["2026-08-20T00:00:00", "2026-08-20", "yesterday", "", "2026-13-01T00:00:00Z", 7, None]
)
def test_text_without_an_offset_or_not_rfc3339_is_refused(text: object) -> None:
    for _ in range(2):  # a refusal is never memoised as an answer
        with pytest.raises(LedgerError) as refused:
            Timestamp.parse(text, field="deadline")
        assert refused.value.code == "TIMESTAMP_INVALID"
        assert "deadline" in refused.value.detail


def test_a_naive_clock_is_refused() -> None:
    with pytest.raises(LedgerError) as refused:
        Timestamp.from_datetime(datetime(2026, 8, 20))
    assert refused.value.code == "CLOCK_NOT_UTC"


@pytest.mark.parametrize("value", [True, 1.5, "0", 10**20, -(10**20)])
def test_only_milliseconds_of_four_digit_years_are_timestamps(value: object) -> None:
    with pytest.raises(LedgerError, match="TIMESTAMP_INVALID"):
        Timestamp.from_epoch_ms(value)  # type: ignore[arg-type]


def test_a_timestamp_is_a_frozen_value() -> None:
    moment = Timestamp.parse("2026-08-20T00:00:00Z")
    with pytest.raises(AttributeError):
        moment.text = "2026-08-20T00:00:01Z"  # type: ignore[misc]
    assert pickle.loads(pickle.dumps(moment)) == moment == copy.deepcopy(moment)
    assert {moment: 1}[Timestamp.parse("2026-08-20T02:00:00+02:00")] == 1
    assert moment != moment.text  # a value, never equal to text


@given(AWARE, AWARE)
def test_text_order_never_contradicts_time_order(first: datetime, second: datetime) -> None:
    a, b = Timestamp.from_datetime(first), Timestamp.from_datetime(second)
    assert len(a.text) == len(b.text) == len("2026-08-20T00:00:00.000Z")
    if a < b:
        assert a.text <= b.text
    assert (a <= b) == (a.epoch_ms <= b.epoch_ms)
    assert Timestamp.parse(a.text).text == a.text
    assert Timestamp.parse(first.isoformat()) == a
