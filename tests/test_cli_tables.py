"""Every table the command line draws, at every width from a phone's terminal to a wide one:
an id, a timestamp, an event type or a code is never split across lines (it appears whole, or
an id shortened in the middle with an ellipsis), prose wraps at spaces only, no line is wider
than the terminal, and a terminal too narrow for the columns gets one record per block."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from typing import Any

import pytest
from aios_ledger.shell.console import (
    COLUMN_KINDS,
    aux_runs_view,
    column_widths,
    events_view,
    history_view,
    render,
    shorten_middle,
    status_view,
    task_view,
    tasks_view,
)

TASK_ID = "tsk_01HZX7Q3RM5N8WQ2KVB4"
OTHER_TASK = "tsk_01HZX7Q3RM5N8WQ2ZZZ9"  # the same start: a shortened id keeps its end
AGENT = "demo-worker-0427"
WHEN = "2030-01-02T03:04:05.123Z"
LATER = "2030-01-02T03:09:59.987Z"
LONG_EVENT = "TASK_INITIAL_EXECUTION_PROJECTION_AUTHORIZED"
REASON = "the upload test still fails on the second run"
GOAL = "Fix the flaky upload test in the storage layer before the release"

TASKS = [
    {
        "task_id": task_id,
        "goal": GOAL,
        "instructions": "i",
        "status": "SUBMITTED",
        "priority": 5,
        "attempt": 2,
        "max_attempts": 3,
        "claimed_by": AGENT,
        "updated_at": WHEN,
        "metadata": {"scope": {"project": "p"}},
    }
    for task_id in (TASK_ID, OTHER_TASK)
]
EVENTS = [
    {
        "event_id": 70001,
        "task_id": TASK_ID,
        "agent_id": AGENT,
        "event_type": event_type,
        "payload": {"lease_seconds": 60},
        "created_at": WHEN,
    }
    for event_type in ("TASK_CREATED", LONG_EVENT, "GOVERNED_WRITE_APPLIED")
]
HISTORY = [
    {
        "time": LATER,
        "event": "TASK_VERIFIED",
        "agent": AGENT,
        "attempt": 2,
        "decision": "NEEDS_REWORK",
        "next_state": "QUEUED",
        "reason": REASON,
    }
]
AUX = [
    {
        "id": "aux_01HZX7Q3RM5N8WQ2KVB4XYZ",
        "state": "FAILED",
        "kind": "review",
        "mode": "tool_free",
        "target": {"session_id": f"task:{TASK_ID}", "run_id": f"{TASK_ID}@2"},
        "updated_at_ms": 1_900_000_000_000,
        "error_code": "OUTPUT_SCHEMA_MISMATCH",
    }
]
STATUS = {
    "now": WHEN,
    "tasks": {"QUEUED": 2, "CLAIMED": 1, "SUBMITTED": 0, "SUCCEEDED": 4, "FAILED": 0},
    "total": 7,
    "oldest_queued": {"task_id": TASK_ID, "priority": 0, "created_at": WHEN},
    "leases_expired": [{"task_id": TASK_ID, "claimed_by": AGENT, "lease_expires_at": WHEN}],
    "leases_expiring_within_seconds": 60,
    "leases_expiring": [{"task_id": OTHER_TASK, "claimed_by": AGENT, "lease_expires_at": LATER}],
    "last_events": EVENTS,
    "spend": {
        "by_task": [
            {
                "task_id": TASK_ID,
                "reports": 3,
                "input_tokens": 120000,
                "output_tokens": 4500,
                "cost_micros": 1_250_000,
                "currency": "USD",
                "over_budget": 0,
            }
        ]
    },
}

# What each view draws, and the values in it that must never be split.
VIEWS: dict[str, tuple[Callable[[Any], Any], Any, tuple[str, ...]]] = {
    "task list": (tasks_view, TASKS, (TASK_ID, OTHER_TASK, AGENT, WHEN, "SUBMITTED")),
    "task show": (task_view, TASKS[0], (TASK_ID, AGENT, WHEN, "SUBMITTED")),
    "events": (
        events_view,
        EVENTS,
        (AGENT, WHEN, "TASK_CREATED", LONG_EVENT, "GOVERNED_WRITE_APPLIED"),
    ),
    "task history": (
        history_view,
        HISTORY,
        (LATER, "TASK_VERIFIED", AGENT, "NEEDS_REWORK", "QUEUED"),
    ),
    "aux list": (
        aux_runs_view,
        AUX,
        ("aux_01HZX7Q3RM5N8WQ2KVB4XYZ", "OUTPUT_SCHEMA_MISMATCH", "2030-03-17T17:46:40.000Z"),
    ),
    "status": (
        status_view,
        STATUS,
        (TASK_ID, OTHER_TASK, AGENT, WHEN, LATER, LONG_EVENT, "TASK_CREATED", "SUCCEEDED"),
    ),
}
PROSE = [*GOAL.split(), *REASON.split()]
WIDTHS = (24, 32, 40, 48, 60, 72, 80, 100, 120, 160, 220)
_TOKEN = re.compile(r"[^\s│┃|┏┓┗┛┡┩└┘┳┻╇┴━─]+")


def _tokens(drawn: str) -> list[str]:
    return [token.rstrip(":") for token in _TOKEN.findall(drawn)]


def _shortened_forms(token: str, whole: str) -> bool:
    """`token` is `whole` shortened with an ellipsis: its start, then `…`, then its end."""
    head, ellipsis, tail = token.partition("…")
    return bool(ellipsis) and whole.startswith(head) and whole.endswith(tail)


def _check_unsplit(drawn: str, atoms: Iterable[str], width: int) -> None:
    tokens = _tokens(drawn)
    assert max(len(line) for line in drawn.splitlines()) <= width, drawn
    for atom in atoms:
        whole = any(atom == token or atom in token.split("/") for token in tokens)
        shortened = any(_shortened_forms(token, atom) for token in tokens)
        assert whole or shortened, f"{atom} is neither whole nor shortened at {width}:\n{drawn}"
        for token in tokens:
            cut = token != atom and len(token) >= 3 and token in atom and "…" not in token
            # a fragment of the atom on a line of its own is the atom split across lines
            assert not (cut and not any(token == other for other in _ATOMS)), (
                f"{atom} split ({token!r}) at width {width}:\n{drawn}"
            )


_ATOMS = {atom for _, _, atoms in VIEWS.values() for atom in atoms} | set(PROSE)


@pytest.mark.parametrize("name", VIEWS)
@pytest.mark.parametrize("width", WIDTHS)
def test_no_table_splits_an_id_a_timestamp_or_a_code(name: str, width: int) -> None:
    view, value, atoms = VIEWS[name]
    drawn = render(view(value), width=width)
    _check_unsplit(drawn, atoms, width)


@pytest.mark.parametrize("width", WIDTHS[2:])
def test_prose_wraps_at_spaces_only(width: int) -> None:
    drawn = render(tasks_view(TASKS), width=width) + render(history_view(HISTORY), width=width)
    tokens = _tokens(drawn)
    for word in PROSE:
        assert word in tokens, f"{word!r} split at width {width}:\n{drawn}"


def test_a_table_on_a_wide_terminal_one_record_per_block_on_a_narrow_one() -> None:
    wide = render(tasks_view(TASKS), width=160)
    assert "┏" in wide and wide.count(TASK_ID) == 1 and "task:" not in wide
    narrow = render(tasks_view(TASKS), width=60)
    assert "┏" not in narrow
    assert narrow.count("task:") == 2 and narrow.count("last holder:") == 2
    assert TASK_ID in narrow and OTHER_TASK in narrow  # whole ids in blocks
    assert "2 task(s)" in narrow


def test_ids_are_shortened_in_the_middle_before_the_table_gives_up() -> None:
    # Wide enough for the table only once the ids give up their middles.
    drawn = render(aux_runs_view(AUX), width=130)
    assert "┏" in drawn and "aux_01HZX7Q3RM5N8WQ2KVB4XYZ" not in drawn
    assert any(_shortened_forms(token, "aux_01HZX7Q3RM5N8WQ2KVB4XYZ") for token in _tokens(drawn))
    assert "OUTPUT_SCHEMA_MISMATCH" in drawn and "2030-03-17T17:46:40.000Z" in drawn  # whole


def test_the_width_plan_gives_up_prose_first_then_ids() -> None:
    prose, ident, code = COLUMN_KINDS["prose"], COLUMN_KINDS["id"], COLUMN_KINDS["code"]
    kinds = (ident, code, prose)
    assert column_widths(kinds, (20, 12, 30), (11, 12, 6), 62) == [20, 12, 30]
    assert column_widths(kinds, (20, 12, 30), (11, 12, 6), 40) == [20, 12, 8]
    assert column_widths(kinds, (20, 12, 30), (11, 12, 6), 30) == [12, 12, 6]
    assert column_widths(kinds, (20, 12, 30), (11, 12, 6), 28) is None
    assert shorten_middle("tsk_01HZX7Q3RM5N8WQ2KVB4", 11) == "tsk_0…2KVB4"
    assert shorten_middle("short", 11) == "short"
