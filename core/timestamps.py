"""RFC 3339 UTC timestamps in one fixed format.

The ledger stores times as text (`2026-08-20T00:00:00Z`, as the older runtime did) and SQL
compares them as text, which is only correct when every value has the same precision. So every
timestamp the ledger writes has whole seconds, and every time it reads is parsed, not trusted.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from .errors import LedgerError

_FORMAT = "%Y-%m-%dT%H:%M:%SZ"


def format_timestamp(moment: datetime) -> str:
    if moment.tzinfo is None or moment.utcoffset() is None:
        raise LedgerError("CLOCK_NOT_UTC", f"{moment!r} has no timezone")
    return moment.astimezone(UTC).strftime(_FORMAT)


def parse_timestamp(text: str, *, field: str = "timestamp") -> datetime:
    if not isinstance(text, str) or len(text) > 40:
        raise LedgerError("TIMESTAMP_INVALID", f"{field} must be RFC 3339 text")
    try:
        moment = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError as exc:
        raise LedgerError("TIMESTAMP_INVALID", f"{field} {text!r} is not RFC 3339") from exc
    if moment.tzinfo is None:
        raise LedgerError("TIMESTAMP_INVALID", f"{field} {text!r} has no UTC offset")
    return moment.astimezone(UTC)


def normalise_timestamp(text: str, *, field: str = "timestamp") -> str:
    return format_timestamp(parse_timestamp(text, field=field))


def add_seconds(moment_text: str, seconds: int) -> str:
    return format_timestamp(parse_timestamp(moment_text) + timedelta(seconds=seconds))
