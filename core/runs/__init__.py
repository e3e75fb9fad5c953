"""Runs and their events, and the bounded, digest-pinned evidence read from them."""

import typing

if typing.TYPE_CHECKING:
    from aios_ledger.core.runs.answers import RunAnswer, RunEventAnswer
    from aios_ledger.core.runs.evidence import (
        EVIDENCE_SNAPSHOT_SCHEMA_V1,
        RUN_CREATED,
        RUN_EVENT_APPENDED,
        EvidenceReadRequest,
        EvidenceSnapshot,
        ExecutionTarget,
        RunCreateRequest,
        RunCreateState,
        RunEventAppendRequest,
        RunEventsRequest,
        RunReadRequest,
        RunState,
        build_evidence_snapshot,
        decide_append_run_event,
        decide_create_run,
    )
    from aios_ledger.core.runs.records import RunEventRow, RunRow

__all__ = [
    "RunRow",
    "RunEventRow",
    "EvidenceSnapshot",
    "ExecutionTarget",
    "RunCreateRequest",
    "RunEventAppendRequest",
    "RunReadRequest",
    "RunEventsRequest",
    "EvidenceReadRequest",
    "RunCreateState",
    "RunState",
    "decide_create_run",
    "decide_append_run_event",
    "build_evidence_snapshot",
    "RunAnswer",
    "RunEventAnswer",
    "EVIDENCE_SNAPSHOT_SCHEMA_V1",
    "RUN_CREATED",
    "RUN_EVENT_APPENDED",
]

if not typing.TYPE_CHECKING:

    def __getattr__(name: str) -> object:
        """Each public name, loaded on first use (PEP 562): the core's modules import each
        other's across its subpackages, so a package that imported all of its modules as it is
        imported would close import cycles. The imports above, for type checkers, are these."""
        if name not in __all__:
            raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
        from aios_ledger.core.runs.answers import RunAnswer, RunEventAnswer  # noqa: F401
        from aios_ledger.core.runs.evidence import (  # noqa: F401
            EVIDENCE_SNAPSHOT_SCHEMA_V1,
            RUN_CREATED,
            RUN_EVENT_APPENDED,
            EvidenceReadRequest,
            EvidenceSnapshot,
            ExecutionTarget,
            RunCreateRequest,
            RunCreateState,
            RunEventAppendRequest,
            RunEventsRequest,
            RunReadRequest,
            RunState,
            build_evidence_snapshot,
            decide_append_run_event,
            decide_create_run,
        )
        from aios_ledger.core.runs.records import RunEventRow, RunRow  # noqa: F401

        loaded = locals()
        globals().update({export: loaded[export] for export in __all__})
        return loaded[name]

    def __dir__() -> list[str]:
        return sorted({*globals(), *__all__})
