"""Auxiliary runs: specs under a capability ceiling, their states and decisions."""

import typing

if typing.TYPE_CHECKING:
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
    from aios_ledger.core.auxiliary.states import (
        AUXILIARY_RUN_SPAWNED,
        TRANSITIONS,
        AuxiliaryRunState,
    )

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

if not typing.TYPE_CHECKING:

    def __getattr__(name: str) -> object:
        """Each public name, loaded on first use (PEP 562): the core's modules import each
        other's across its subpackages, so a package that imported all of its modules as it is
        imported would close import cycles. The imports above, for type checkers, are these."""
        if name not in __all__:
            raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
        from aios_ledger.core.auxiliary.answers import RecoveryAnswer, SpawnAnswer  # noqa: F401
        from aios_ledger.core.auxiliary.decisions import (  # noqa: F401
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
        from aios_ledger.core.auxiliary.queries import AuxiliaryRunListRequest  # noqa: F401
        from aios_ledger.core.auxiliary.records import (  # noqa: F401
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
        from aios_ledger.core.auxiliary.states import (  # noqa: F401
            AUXILIARY_RUN_SPAWNED,
            TRANSITIONS,
            AuxiliaryRunState,
        )

        loaded = locals()
        globals().update({export: loaded[export] for export in __all__})
        return loaded[name]

    def __dir__() -> list[str]:
        return sorted({*globals(), *__all__})
