"""The ledger's time. SQL compares times as text, so `Timestamp.text` is the one form written, to
the millisecond so that moments of one second keep their order; decisions refuse any other `now`."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from functools import lru_cache, total_ordering
from typing import Any, final

from aios_ledger.core.errors import LedgerError

FRACTION_DIGITS = 3
_TEXT_UNIT_MS = 10 ** (3 - FRACTION_DIGITS)  # the stored text's resolution, in milliseconds
_MAX_TEXT = 40
_MEMO = 4096

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_MILLISECOND = timedelta(milliseconds=1)
# Years 1 to 9999: what RFC 3339 (and `datetime`) can write, four digits wide.
_FIRST_MS = (datetime(1, 1, 1, tzinfo=UTC) - _EPOCH) // _MILLISECOND
_LAST_MS = (datetime(9999, 12, 31, 23, 59, 59, 999_000, tzinfo=UTC) - _EPOCH) // _MILLISECOND


@final
@total_ordering
class Timestamp:
    """A moment in UTC to the millisecond, immutable and ordered; `str()` is its stored text."""

    __slots__ = ("_epoch_ms", "_text")
    _epoch_ms: int
    _text: str | None

    def __init__(self, epoch_ms: int) -> None:
        if type(epoch_ms) is not int or not _FIRST_MS <= epoch_ms <= _LAST_MS:
            raise LedgerError(
                "TIMESTAMP_INVALID", f"{epoch_ms!r} is not a millisecond of the years 1 to 9999"
            )
        # Plain slot stores: a refusing `__setattr__` would cost more than the constructor.
        self._epoch_ms = epoch_ms
        self._text = None  # formatted when first asked for: a time read to be compared never is

    @property
    def epoch_ms(self) -> int:
        return self._epoch_ms

    @property
    def text(self) -> str:
        """The form the ledger stores and compares: `2026-08-20T00:00:00.000Z`."""
        text = self._text
        if text is None:
            text = self._text = _text_of_unit(self._epoch_ms // _TEXT_UNIT_MS)
        return text

    @classmethod
    def from_epoch_ms(cls, epoch_ms: int) -> Timestamp:
        return cls(epoch_ms)

    @classmethod
    def from_datetime(cls, moment: datetime) -> Timestamp:
        """An aware datetime (naive: `CLOCK_NOT_UTC`), cut to the millisecond."""
        try:
            # Only an aware datetime subtracts from the aware epoch; anything else raises TypeError.
            since_epoch = moment - _EPOCH
        except TypeError:
            raise LedgerError(
                "CLOCK_NOT_UTC", f"{moment!r} is not a datetime with a timezone"
            ) from None
        if type(since_epoch) is not timedelta:
            raise LedgerError("CLOCK_NOT_UTC", f"{moment!r} is not a datetime with a timezone")
        return cls(since_epoch // _MILLISECOND)

    @classmethod
    def parse(cls, text: object, *, field: str = "timestamp") -> Timestamp:
        """RFC 3339 text with an offset; anything else is `TIMESTAMP_INVALID`, naming `field`."""
        if not isinstance(text, str) or len(text) > _MAX_TEXT:
            raise LedgerError("TIMESTAMP_INVALID", f"{field} must be RFC 3339 text")
        try:
            return _parse(text)
        except ValueError as exc:
            raise LedgerError("TIMESTAMP_INVALID", f"{field} {text!r} is not RFC 3339") from exc
        except _NoOffset:
            raise LedgerError("TIMESTAMP_INVALID", f"{field} {text!r} has no UTC offset") from None
        except LedgerError as refused:
            raise LedgerError("TIMESTAMP_INVALID", f"{field}: {refused.detail}") from None

    def plus_seconds(self, seconds: int) -> Timestamp:
        return Timestamp(self.epoch_ms + seconds * 1000)

    def to_datetime(self) -> datetime:
        return _EPOCH + self.epoch_ms * _MILLISECOND

    def __str__(self) -> str:
        return self.text

    def __repr__(self) -> str:
        return f"Timestamp({self.text!r}, epoch_ms={self.epoch_ms})"

    def __reduce__(self) -> tuple[type[Timestamp], tuple[int]]:
        return Timestamp, (self.epoch_ms,)

    def __hash__(self) -> int:
        return hash(self._epoch_ms)

    def __eq__(self, other: object) -> bool:
        if type(other) is not Timestamp:
            return NotImplemented
        return self._epoch_ms == other._epoch_ms

    def __lt__(self, other: Timestamp) -> bool:
        if type(other) is not Timestamp:
            return NotImplemented
        return self._epoch_ms < other._epoch_ms


def require_timestamp(now: Any, *, field: str = "now") -> Timestamp:
    """`now` if it is exactly a `Timestamp`, else `TIMESTAMP_INVALID`."""
    if type(now) is not Timestamp:
        raise LedgerError(
            "TIMESTAMP_INVALID", f"{field} must be a Timestamp, got {type(now).__name__}"
        )
    return now


@lru_cache(maxsize=_MEMO)
def _text_of_unit(units: int) -> str:
    epoch_ms = units * _TEXT_UNIT_MS
    moment = _EPOCH + epoch_ms * _MILLISECOND
    # Formatted by hand: `strftime("%Y")` does not pad years before 1000 on every platform.
    text = (
        f"{moment.year:04d}-{moment.month:02d}-{moment.day:02d}"
        f"T{moment.hour:02d}:{moment.minute:02d}:{moment.second:02d}"
    )
    if FRACTION_DIGITS:
        text += "." + f"{epoch_ms % 1000:03d}"[:FRACTION_DIGITS]
    return text + "Z"


class _NoOffset(Exception):
    pass


@lru_cache(maxsize=_MEMO)
def _parse(text: str) -> Timestamp:
    """Only successes are memoised (`lru_cache` does not keep exceptions)."""
    moment = datetime.fromisoformat(text.replace("Z", "+00:00"))
    if moment.utcoffset() is None:
        raise _NoOffset
    return Timestamp((moment - _EPOCH) // _MILLISECOND)
