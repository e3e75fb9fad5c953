"""Auxiliary runs: specs under a capability ceiling, their states and decisions."""

from aios_ledger.core.auxiliary.answers import RecoveryAnswer, SpawnAnswer
from aios_ledger.core.auxiliary.decisions import (
    AuxiliaryRowState,
    AuxiliaryStopRequest,
    AuxiliaryTransitionRequest,
    RecoverInterruptedRequest,
    UnfinishedRunsState,
    decide_recover_interrupted,
    decide_spawn,
    decide_stop,
    decide_transition,
)
from aios_ledger.core.auxiliary.queries import AuxiliaryRunListRequest
from aios_ledger.core.auxiliary.records import (
    AUXILIARY_SNAPSHOT_SCHEMA_V1,
    DEFAULT_MAX_OUTPUT_BYTES,
    MAX_FRAME_DEPTH,
    AuxiliaryCapabilityProfile,
    AuxiliaryRunMode,
    AuxiliaryRunOutput,
    AuxiliaryRunRow,
    AuxiliaryRunSnapshot,
    AuxiliaryRunSpec,
    CheckedSpawn,
    ExecutionFrame,
    check_output,
    check_spawn,
)
from aios_ledger.core.auxiliary.states import AUXILIARY_RUN_SPAWNED, TRANSITIONS, AuxiliaryRunState

__all__ = [
    "AuxiliaryRunRow",
    "AuxiliaryRunSnapshot",
    "AuxiliaryRunOutput",
    "ExecutionFrame",
    "AuxiliaryCapabilityProfile",
    "AuxiliaryRunSpec",
    "CheckedSpawn",
    "AuxiliaryRunListRequest",
    "AuxiliaryTransitionRequest",
    "AuxiliaryStopRequest",
    "RecoverInterruptedRequest",
    "AuxiliaryRowState",
    "UnfinishedRunsState",
    "decide_spawn",
    "decide_transition",
    "decide_stop",
    "decide_recover_interrupted",
    "check_spawn",
    "check_output",
    "SpawnAnswer",
    "RecoveryAnswer",
    "AuxiliaryRunState",
    "AuxiliaryRunMode",
    "TRANSITIONS",
    "AUXILIARY_SNAPSHOT_SCHEMA_V1",
    "DEFAULT_MAX_OUTPUT_BYTES",
    "MAX_FRAME_DEPTH",
    "AUXILIARY_RUN_SPAWNED",
]
