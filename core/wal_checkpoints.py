"""Who copies SQLite's WAL back, and when: a helper thread's PASSIVE checkpoint never completes one,
so it copies in rounds and the writer finishes the remainder itself."""

from __future__ import annotations

import enum
from typing import NamedTuple

SYNCHRONOUS_LEVELS = ("FULL", "NORMAL")  # the ledger's durability levels (`--synchronous`)
# The levels whose log is copied in rounds; FULL keeps SQLite's own (RELIABILITY.md, "WAL growth").
ROUND_LEVELS = frozenset({"NORMAL"})
THRESHOLD_PAGES = 1000  # SQLite's own auto-checkpoint threshold
BACKLOG_FACTOR = 4
REMAINDER_PAGES = 64  # at most 256 KiB with 4 KiB pages: short enough to copy inside a commit


class CheckpointAction(enum.Enum):
    NOTHING = "NOTHING"
    HAND_OVER = "HAND_OVER"  # wake the helper for one round of copying
    CHECKPOINT_HERE = "CHECKPOINT_HERE"  # the committing writer copies, as SQLite itself would


class CheckpointStep(NamedTuple):
    action: CheckpointAction
    handed_over: bool  # a round is out (running, or done and not yet acted on)


_NOTHING = CheckpointStep(CheckpointAction.NOTHING, handed_over=False)
_WAIT = CheckpointStep(CheckpointAction.NOTHING, handed_over=True)
_HAND_OVER = CheckpointStep(CheckpointAction.HAND_OVER, handed_over=True)
_HERE = CheckpointStep(CheckpointAction.CHECKPOINT_HERE, handed_over=False)


def checkpoint_step(
    pages: int, *, handed_over: bool, copied: int | None, helper_alive: bool
) -> CheckpointStep:
    """What the commit that left `pages` frames does; allocates nothing."""
    if pages < THRESHOLD_PAGES:
        return _NOTHING  # the log is short, or was started over: a round still out is moot
    if not helper_alive or pages >= THRESHOLD_PAGES * BACKLOG_FACTOR:
        return _HERE
    if not handed_over:
        return _HAND_OVER
    if copied is None:
        return _WAIT
    return _HERE if pages - copied <= REMAINDER_PAGES else _HAND_OVER
