"""Exponential backoff before a failed task's next attempt, plus up to 25 % drawn by the shell, so
that the core stays deterministic and tasks that failed together do not return together."""

from __future__ import annotations

from typing import Annotated

import attrs
from aios_ledger.core.errors import LedgerError
from aios_ledger.core.kinds import Between
from aios_ledger.core.structuring import FieldRefused
from aios_ledger.core.timestamps import Timestamp

DEFAULT_RETRY_BASE_SECONDS = 10
DEFAULT_RETRY_MAX_SECONDS = 3600
MAX_RETRY_SECONDS = 7 * 24 * 3600
JITTER_SHARE = 0.25

RetrySeconds = Annotated[int, Between(1, MAX_RETRY_SECONDS)]


def _at_least_base(policy: RetryPolicy, _: attrs.Attribute[int], value: int) -> None:
    if value < policy.base_seconds:
        raise FieldRefused(f"max_seconds ({value}) must be at least base_seconds")


@attrs.frozen
class RetryPolicy:
    """A task's backoff: the first retry waits `base_seconds`, each next one twice as long, up
    to `max_seconds` (before the spread)."""

    base_seconds: RetrySeconds = DEFAULT_RETRY_BASE_SECONDS
    max_seconds: RetrySeconds = attrs.field(
        default=DEFAULT_RETRY_MAX_SECONDS, validator=_at_least_base
    )


def require_jitter(jitter: object) -> float:
    """The shell's draw, checked: a float in [0, 1)."""
    if type(jitter) is not float or not 0.0 <= jitter < 1.0:
        raise LedgerError("JITTER_INVALID", f"jitter must be a float in [0, 1), got {jitter!r}")
    return jitter


def retry_delay_ms(policy: RetryPolicy, retry: int, jitter: float) -> int:
    """The wait before the `retry`-th retry (1 for the first), in milliseconds."""
    doublings = min(max(retry, 1) - 1, 62)  # past 2^62 every policy is at its maximum anyway
    capped = min(policy.max_seconds, policy.base_seconds << doublings)
    spread = capped * 1000 * JITTER_SHARE * require_jitter(jitter)
    return max(policy.base_seconds * 1000, capped * 1000 + int(spread))


def retry_not_before(policy: RetryPolicy, retry: int, jitter: float, now: Timestamp) -> Timestamp:
    """When the `retry`-th retry may be claimed, rounded up so as never to cut the wait."""
    due = Timestamp.from_epoch_ms(now.epoch_ms + retry_delay_ms(policy, retry, jitter))
    stored = Timestamp.parse(due.text)
    return stored if stored.epoch_ms >= due.epoch_ms else stored.plus_seconds(1)
