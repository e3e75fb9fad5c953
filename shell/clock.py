"""The system clock and the configured owner authorization: inputs the core never reads itself."""

from __future__ import annotations

import os
from collections.abc import Callable
from datetime import UTC, datetime

from aios_ledger.core import format_timestamp

Clock = Callable[[], datetime]
AUTHORIZATION_ENV = "AIOS_AGENT_TASK_INITIAL_EXECUTION_PROJECTION_AUTHORIZATION_ID"


def system_clock() -> datetime:
    return datetime.now(UTC)


def now_text(clock: Clock) -> str:
    return format_timestamp(clock())


def configured_authorization() -> str | None:
    value = os.environ.get(AUTHORIZATION_ENV, "").strip()
    return value or None
