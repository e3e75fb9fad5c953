"""RFC 3339 UTC timestamps in one fixed format.

The ledger stores times as text (`2026-08-20T00:00:00Z`, as the older runtime did) and SQL
compares them as text, which is only correct when every value has the same precision. So every
timestamp the ledger writes has whole seconds, and every time it reads is parsed, not trusted.

Parsing, formatting and lease arithmetic are pure functions of immutable values, and one
transition repeats them on the same few values (the clock's second, a lease length), so their
results are memoised.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from functools import lru_cache

from aios_ledger.core.errors import LedgerError

_FORMAT = "%Y-%m-%dT%H:%M:%SZ"
_MAX_TEXT = 40
_MEMO = 4096


_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_SECOND = timedelta(seconds=1)


def format_timestamp(moment: datetime) -> str:
    if moment.tzinfo is None or moment.utcoffset() is None:
        raise LedgerError("CLOCK_NOT_UTC", f"{moment!r} has no timezone")
    # Whole seconds since the epoch (exact: timedelta floor division) key the memo.
    return _format_epoch_second((moment - _EPOCH) // _SECOND)


@lru_cache(maxsize=_MEMO)
def _format_epoch_second(seconds: int) -> str:
    return (_EPOCH + timedelta(seconds=seconds)).strftime(_FORMAT)


def parse_timestamp(text: str, *, field: str = "timestamp") -> datetime:
    if not isinstance(text, str) or len(text) > _MAX_TEXT:
        raise LedgerError("TIMESTAMP_INVALID", f"{field} must be RFC 3339 text")
    try:
        return _parse_utc(text)
    except ValueError as exc:
        raise LedgerError("TIMESTAMP_INVALID", f"{field} {text!r} is not RFC 3339") from exc
    except _NoOffset:
        raise LedgerError("TIMESTAMP_INVALID", f"{field} {text!r} has no UTC offset") from None


class _NoOffset(Exception):
    pass


@lru_cache(maxsize=_MEMO)
def _parse_utc(text: str) -> datetime:
    """Only successes are memoised (`lru_cache` does not keep exceptions)."""
    moment = datetime.fromisoformat(text.replace("Z", "+00:00"))
    if moment.tzinfo is None:
        raise _NoOffset
    return moment.astimezone(UTC)


def normalise_timestamp(text: str, *, field: str = "timestamp") -> str:
    return format_timestamp(parse_timestamp(text, field=field))


@lru_cache(maxsize=_MEMO)
def add_seconds(moment_text: str, seconds: int) -> str:
    return format_timestamp(parse_timestamp(moment_text) + timedelta(seconds=seconds))
