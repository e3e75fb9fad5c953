"""The states of an auxiliary run and its one transition table, `TRANSITIONS`, mapping each allowed
(from, to) pair to its event; the SQL guards only enforce what the table allowed."""

from __future__ import annotations

import enum
from collections.abc import Mapping
from types import MappingProxyType

from aios_ledger.core.errors import AuxiliaryRunError

AUXILIARY_RUN_SPAWNED = "AUXILIARY_RUN_SPAWNED"


class AuxiliaryRunState(enum.StrEnum):
    PENDING = "PENDING"
    RUNNING = "RUNNING"
    COMPLETED = "COMPLETED"
    FAILED = "FAILED"
    CANCELLED = "CANCELLED"

    @property
    def is_terminal(self) -> bool:
        return not any(source is self for source, _ in TRANSITIONS)


_S = AuxiliaryRunState

TRANSITIONS: Mapping[tuple[AuxiliaryRunState, AuxiliaryRunState], str] = MappingProxyType(
    {
        (_S.PENDING, _S.RUNNING): "AUXILIARY_RUN_STARTED",
        (_S.PENDING, _S.FAILED): "AUXILIARY_RUN_FAILED",
        (_S.PENDING, _S.CANCELLED): "AUXILIARY_RUN_CANCELLED",
        (_S.RUNNING, _S.COMPLETED): "AUXILIARY_RUN_COMPLETED",
        (_S.RUNNING, _S.FAILED): "AUXILIARY_RUN_FAILED",
        (_S.RUNNING, _S.CANCELLED): "AUXILIARY_RUN_CANCELLED",
    }
)

INITIAL_STATE = AuxiliaryRunState.PENDING


def transition_event(source: AuxiliaryRunState, target: AuxiliaryRunState) -> str:
    """The event a move appends, or `INVALID_TRANSITION` when the table does not allow it."""
    event = TRANSITIONS.get((source, target))
    if event is None:
        raise AuxiliaryRunError(
            "INVALID_TRANSITION", f"an auxiliary run cannot move from {source} to {target}"
        )
    return event


def parse_state(value: object) -> AuxiliaryRunState:
    if isinstance(value, str):
        try:
            return AuxiliaryRunState(value)
        except ValueError:
            pass
    raise AuxiliaryRunError.invalid_field("state", f"{value!r} is not an auxiliary run state")


def transition_table() -> dict[str, list[str]]:
    """The table as plain data (for people, golden files and the command line)."""
    table: dict[str, list[str]] = {state.value: [] for state in AuxiliaryRunState}
    for source, target in TRANSITIONS:
        table[source.value].append(target.value)
    return table
