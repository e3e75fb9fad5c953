"""The system clock and the configured owner authorization: inputs the core never reads itself."""

from __future__ import annotations

import os
from collections.abc import Callable
from datetime import UTC, datetime

from aios_ledger.core import Timestamp
from aios_ledger.core.projection.decisions import AUTHORIZATION_SETTING

# A clock answers an aware datetime, read as the core's `Timestamp`.
Clock = Callable[[], datetime]
AUTHORIZATION_ENV = AUTHORIZATION_SETTING  # the core names it in its refusals


def system_clock() -> datetime:
    return datetime.now(UTC)


def read_clock(clock: Clock) -> Timestamp:
    """The clock's moment as a `Timestamp`; a naive datetime is `CLOCK_NOT_UTC`."""
    return Timestamp.from_datetime(clock())


def configured_authorization() -> str | None:
    value = os.environ.get(AUTHORIZATION_ENV, "").strip()
    return value or None
