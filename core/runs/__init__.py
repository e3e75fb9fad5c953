"""Runs and their events, and the bounded, digest-pinned evidence read from them."""

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
