"""The checkpoint rounds at synchronous=NORMAL: who copies the log back, and when (pure core)."""

from __future__ import annotations

import pytest
from aios_ledger.core.wal_checkpoints import (
    BACKLOG_FACTOR,
    REMAINDER_PAGES,
    THRESHOLD_PAGES,
    CheckpointAction,
    CheckpointStep,
    checkpoint_step,
)
from syrupy.assertion import SnapshotAssertion

NOTHING = CheckpointAction.NOTHING
HAND_OVER = CheckpointAction.HAND_OVER
HERE = CheckpointAction.CHECKPOINT_HERE
BACKLOG = THRESHOLD_PAGES * BACKLOG_FACTOR


def step(
    pages: int, *, handed_over: bool = False, copied: int | None = None, alive: bool = True
) -> CheckpointStep:
    return checkpoint_step(pages, handed_over=handed_over, copied=copied, helper_alive=alive)


@pytest.mark.parametrize("handed_over", [False, True])
@pytest.mark.parametrize("copied", [None, 0, THRESHOLD_PAGES - 1])
def test_a_short_log_needs_nothing_and_forgets_a_round_still_out(
    handed_over: bool, copied: int | None
) -> None:
    # A round out on a log that has since started over says nothing about the new log.
    assert step(THRESHOLD_PAGES - 1, handed_over=handed_over, copied=copied) == (NOTHING, False)


def test_the_first_commit_past_the_threshold_hands_one_round_over() -> None:
    assert step(THRESHOLD_PAGES) == (HAND_OVER, True)


def test_while_the_round_runs_the_writer_goes_on() -> None:
    assert step(THRESHOLD_PAGES + 500, handed_over=True, copied=None) == (NOTHING, True)


def test_a_short_remainder_after_a_round_is_copied_by_the_writer() -> None:
    copied = THRESHOLD_PAGES + 100
    assert step(copied + REMAINDER_PAGES, handed_over=True, copied=copied) == (HERE, False)


def test_a_long_remainder_after_a_round_goes_to_another_round() -> None:
    copied = THRESHOLD_PAGES + 100
    assert step(copied + REMAINDER_PAGES + 1, handed_over=True, copied=copied) == (
        HAND_OVER,
        True,
    )


def test_a_round_that_copied_nothing_is_handed_over_again() -> None:
    assert step(THRESHOLD_PAGES + 10, handed_over=True, copied=0) == (HAND_OVER, True)


@pytest.mark.parametrize("handed_over", [False, True])
def test_without_a_helper_the_writer_copies_at_the_threshold(handed_over: bool) -> None:
    assert step(THRESHOLD_PAGES, handed_over=handed_over, alive=False) == (HERE, False)


@pytest.mark.parametrize("copied", [None, 0])
def test_at_the_backlog_bound_the_writer_copies_even_with_a_round_out(copied: int | None) -> None:
    assert step(BACKLOG, handed_over=True, copied=copied) == (HERE, False)
    assert step(BACKLOG - 1, handed_over=True, copied=None) == (NOTHING, True)


def test_a_cycle_of_rounds_ends_with_the_writer_copying_the_rest() -> None:
    """One cycle as the shell drives it: the helper's rounds fall behind less each time."""
    handed_over, copied, seen = False, None, []
    for pages, finished in [
        (999, None),
        (1003, None),  # crossed: one round
        (1011, None),  # running
        (1019, 1003),  # done at 1003: the 16 frames since are the writer's to copy
    ]:
        copied = finished if finished is not None else copied
        action, handed_over = checkpoint_step(
            pages, handed_over=handed_over, copied=copied, helper_alive=True
        )
        seen.append(action)
    assert seen == [NOTHING, HAND_OVER, NOTHING, HERE]
    assert handed_over is False


def test_the_decisions_golden(golden: SnapshotAssertion) -> None:
    grid = [
        (pages, handed_over, copied, alive)
        for pages in (0, THRESHOLD_PAGES - 1, THRESHOLD_PAGES, 1500, BACKLOG - 1, BACKLOG)
        for handed_over in (False, True)
        for copied in (None, 0, 1400, 1450)
        for alive in (True, False)
    ]
    table = [
        {
            "pages": pages,
            "handed_over": handed_over,
            "copied": copied,
            "helper_alive": alive,
            "action": action.value,
            "handed_over_after": out,
        }
        for pages, handed_over, copied, alive in grid
        for action, out in [step(pages, handed_over=handed_over, copied=copied, alive=alive)]
    ]
    assert table == golden
