"""aios-ledger's pure core: records, validation, digests, decisions and state tables.

Nothing here performs I/O, reads a clock, draws randomness or looks at the environment; the
shell (`aios_ledger.shell`) supplies all of those as inputs. What this module exports is the
contract another program builds on, listed and described in `docs/api.md` (a test holds the
two equal); everything else is internal to its module.
"""

from aios_ledger.core.api.tokens import (
    ApiTokenAnswer,
    ApiTokenRow,
    TokenIssueRequest,
    TokenRevokeRequest,
    TokenState,
    decide_issue_token,
    decide_revoke_token,
)
from aios_ledger.core.auxiliary.answers import (
    RecoveryAnswer,
    SpawnAnswer,
)
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
from aios_ledger.core.auxiliary.queries import (
    AuxiliaryRunListRequest,
)
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
    AuxiliaryRunError,
    AuxiliaryRunState,
)
from aios_ledger.core.digests import (
    canonical_json,
    digest_bytes,
    digest_json,
    is_digest,
    sha256_hex,
)
from aios_ledger.core.errors import (
    InitialExecutionProjectionError,
    LedgerError,
)
from aios_ledger.core.git.answers import (
    ProposalAnswer,
    RepositoryAnswer,
    WriteAnswer,
)
from aios_ledger.core.git.decisions import (
    OutcomeState,
    ProposalState,
    RepositoryState,
    WriteState,
    decide_record_proposal,
    decide_register_repository,
    decide_write_intent,
    decide_write_outcome,
)
from aios_ledger.core.git.records import (
    GovernedWriteRow,
    ProposalRow,
    RepositoryRow,
    WriterLeaseRow,
)
from aios_ledger.core.git.requests import (
    ProposalRecord,
    RegisterRepositoryRequest,
    WriteOutcome,
    WriteRequest,
)
from aios_ledger.core.jsonvalue import (
    JsonObject,
    JsonValue,
)
from aios_ledger.core.log.adoption import (
    AdoptionAnswer,
    AdoptionSealRequest,
    AdoptionState,
    decide_adoption_seals,
)
from aios_ledger.core.log.export import (
    EXPORT_SCHEMA,
    ChainTips,
    verify_export_lines,
)
from aios_ledger.core.log.records import (
    EventRow,
    SealedRow,
    SealRow,
)
from aios_ledger.core.log.rows import STATE_TABLES, RowImage
from aios_ledger.core.log.seals import (
    GENESIS_SEAL,
    LEDGER_CHAIN,
    ChainTip,
    chain_of,
)
from aios_ledger.core.log.tail import (
    AppendedEvent,
    EventAppend,
    LogTail,
)
from aios_ledger.core.log.verification import (
    CHAIN_GAP,
    CONTENT_CHANGED,
    EVENT_REMOVED,
    EVENT_REORDERED,
    EVENT_SWAPPED,
    EXPORT_INVALID,
    FINDING_CODES,
    FORGED_EVENT,
    HEAD_MISMATCH,
    HEAD_SCHEMA,
    STATE_MISMATCH,
    UNSEALED_EVENT,
    ChainLink,
    Finding,
    LedgerHead,
    LogVerifier,
    VerificationReport,
)
from aios_ledger.core.plan import (
    Decision,
    Replay,
    WritePlan,
)
from aios_ledger.core.projection.answers import (
    BindingAnswer,
    ProjectionAnswer,
)
from aios_ledger.core.projection.bindings import (
    BINDING_REGISTERED,
    BindingState,
    decide_register_binding,
)
from aios_ledger.core.projection.decisions import (
    PROJECTION_EVENT,
    InitialExecutionProjectionRequest,
    ProjectionCommand,
    ProjectionState,
    ResolverCall,
    SourceCaptureProjectionRecoveryRequest,
    decide_projection,
    prepare_projection,
)
from aios_ledger.core.projection.envelopes import (
    ENVELOPE_SCHEMA,
    GOVERNANCE_FLAGS,
    GovernedExecutionBinding,
    project_execution_envelope,
    verify_execution_envelope,
)
from aios_ledger.core.projection.records import (
    BindingRow,
)
from aios_ledger.core.runs.answers import (
    RunAnswer,
    RunEventAnswer,
)
from aios_ledger.core.runs.evidence import (
    EVIDENCE_SNAPSHOT_SCHEMA_V1,
    RUN_CREATED,
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
from aios_ledger.core.runs.records import (
    RunEventRow,
    RunRow,
)
from aios_ledger.core.statements import (
    SqlWrite,
    Statement,
    StatementKind,
)
from aios_ledger.core.tasks.answers import (
    CancelAnswer,
    ClaimAnswer,
    CreateAnswer,
    EventView,
    ExpireAnswer,
    HeartbeatAnswer,
    RetryAnswer,
    SubmitAnswer,
    TaskSummary,
    TaskView,
    VerifyAnswer,
)
from aios_ledger.core.tasks.backoff import (
    RetryPolicy,
    retry_delay_ms,
)
from aios_ledger.core.tasks.decisions import (
    RESULT_SUBMITTED,
    TASK_CANCELLED,
    TASK_CLAIMED,
    TASK_CREATED,
    TASK_HEARTBEAT,
    TASK_LEASE_EXPIRED,
    TASK_REQUEUED,
    TASK_VERIFIED,
    ExpiryState,
    TaskState,
    decide_cancel,
    decide_claim,
    decide_create,
    decide_expire,
    decide_heartbeat,
    decide_retry,
    decide_submit,
    decide_task,
    decide_verify,
    first_claimable,
    refuse_ungranted,
)
from aios_ledger.core.tasks.history import (
    HistoryEntry,
    task_history,
)
from aios_ledger.core.tasks.modes import (
    VerificationMode,
    VerifyDecision,
)
from aios_ledger.core.tasks.queries import (
    TaskListRequest,
    TaskReadRequest,
)
from aios_ledger.core.tasks.records import (
    IdempotencyRow,
    TaskRow,
)
from aios_ledger.core.tasks.requests import (
    CancelRequest,
    ClaimBatchRequest,
    ClaimRequest,
    ExpireRequest,
    HeartbeatRequest,
    RetryRequest,
    SubmitRequest,
    TaskCreateCommand,
    TaskCreateRequest,
    VerifyRequest,
    lease_token_sha256,
)
from aios_ledger.core.tasks.results import (
    RESULT_CONTRACTS,
)
from aios_ledger.core.tasks.transitions import (
    ABSENT,
    TASK_TRANSITIONS,
    TERMINAL_STATUSES,
    TaskOperation,
    TaskStatus,
    next_task_status,
)
from aios_ledger.core.timestamps import (
    Timestamp,
)

__all__ = [
    "ProposalAnswer",
    "RepositoryAnswer",
    "WriteAnswer",
    "OutcomeState",
    "ProposalState",
    "RepositoryState",
    "WriteState",
    "decide_record_proposal",
    "decide_register_repository",
    "decide_write_intent",
    "decide_write_outcome",
    "GovernedWriteRow",
    "ProposalRow",
    "RepositoryRow",
    "WriterLeaseRow",
    "ProposalRecord",
    "RegisterRepositoryRequest",
    "WriteOutcome",
    "WriteRequest",
    # records: rows the ledger reads, and the records built from them
    "TaskRow",
    "IdempotencyRow",
    "EventRow",
    "RunRow",
    "RunEventRow",
    "AuxiliaryRunRow",
    "AuxiliaryRunSnapshot",
    "AuxiliaryRunOutput",
    "EvidenceSnapshot",
    "ExecutionTarget",
    "ExecutionFrame",
    "AuxiliaryCapabilityProfile",
    "AuxiliaryRunSpec",
    "CheckedSpawn",
    "GovernedExecutionBinding",
    "ResolverCall",
    # requests: strict records structured from untrusted mappings
    "TaskCreateRequest",
    "TaskCreateCommand",
    "ClaimRequest",
    "ClaimBatchRequest",
    "HeartbeatRequest",
    "SubmitRequest",
    "VerifyRequest",
    "CancelRequest",
    "RetryRequest",
    "RetryPolicy",
    "ExpireRequest",
    "TaskReadRequest",
    "TaskListRequest",
    "RunCreateRequest",
    "RunEventAppendRequest",
    "RunReadRequest",
    "RunEventsRequest",
    "EvidenceReadRequest",
    "AuxiliaryRunListRequest",
    "AuxiliaryTransitionRequest",
    "AuxiliaryStopRequest",
    "RecoverInterruptedRequest",
    "InitialExecutionProjectionRequest",
    "SourceCaptureProjectionRecoveryRequest",
    "ProjectionCommand",
    "AdoptionSealRequest",
    # states: everything one decision reads
    "TaskState",
    "ExpiryState",
    "RunCreateState",
    "RunState",
    "AuxiliaryRowState",
    "UnfinishedRunsState",
    "ProjectionState",
    "BindingRow",
    "BindingState",
    "AdoptionState",
    "ApiTokenRow",
    "TokenState",
    "TokenIssueRequest",
    "TokenRevokeRequest",
    # decisions and what an embedder needs to feed them
    "decide_create",
    "decide_claim",
    "decide_heartbeat",
    "decide_submit",
    "decide_verify",
    "decide_cancel",
    "decide_retry",
    "decide_expire",
    "decide_task",
    "decide_create_run",
    "decide_append_run_event",
    "decide_spawn",
    "decide_transition",
    "decide_stop",
    "decide_recover_interrupted",
    "decide_projection",
    "decide_register_binding",
    "decide_adoption_seals",
    "decide_issue_token",
    "decide_revoke_token",
    "prepare_projection",
    "first_claimable",
    "refuse_ungranted",
    "task_history",
    "retry_delay_ms",
    "check_spawn",
    "check_output",
    "build_evidence_snapshot",
    "lease_token_sha256",
    "next_task_status",
    # answers: the shapes decisions and reads build
    "TaskSummary",
    "CreateAnswer",
    "ClaimAnswer",
    "HeartbeatAnswer",
    "SubmitAnswer",
    "VerifyAnswer",
    "CancelAnswer",
    "RetryAnswer",
    "ExpireAnswer",
    "TaskView",
    "EventView",
    "HistoryEntry",
    "RunAnswer",
    "RunEventAnswer",
    "SpawnAnswer",
    "RecoveryAnswer",
    "ProjectionAnswer",
    "BindingAnswer",
    "AdoptionAnswer",
    "ApiTokenAnswer",
    # plans and statements
    "Decision",
    "WritePlan",
    "Replay",
    "SqlWrite",
    "Statement",
    "StatementKind",
    # log and seals: tails, chains, verification, export
    "LogTail",
    "ChainTip",
    "EventAppend",
    "AppendedEvent",
    "chain_of",
    "GENESIS_SEAL",
    "LEDGER_CHAIN",
    "LogVerifier",
    "VerificationReport",
    "Finding",
    "LedgerHead",
    "ChainLink",
    "ChainTips",
    "SealRow",
    "SealedRow",
    "RowImage",
    "STATE_TABLES",
    "verify_export_lines",
    "EXPORT_SCHEMA",
    "HEAD_SCHEMA",
    "FINDING_CODES",
    "CHAIN_GAP",
    "CONTENT_CHANGED",
    "EVENT_REMOVED",
    "EVENT_REORDERED",
    "EVENT_SWAPPED",
    "EXPORT_INVALID",
    "FORGED_EVENT",
    "HEAD_MISMATCH",
    "STATE_MISMATCH",
    "UNSEALED_EVENT",
    # digests, envelopes and JSON
    "canonical_json",
    "sha256_hex",
    "digest_bytes",
    "digest_json",
    "is_digest",
    "project_execution_envelope",
    "verify_execution_envelope",
    "ENVELOPE_SCHEMA",
    "GOVERNANCE_FLAGS",
    "RESULT_CONTRACTS",
    "JsonValue",
    "JsonObject",
    # errors
    "LedgerError",
    "InitialExecutionProjectionError",
    "AuxiliaryRunError",
    # enums, tables, constants and event types
    "TaskStatus",
    "TaskOperation",
    "VerifyDecision",
    "VerificationMode",
    "AuxiliaryRunState",
    "AuxiliaryRunMode",
    "ABSENT",
    "TASK_TRANSITIONS",
    "TERMINAL_STATUSES",
    "TRANSITIONS",
    "AUXILIARY_SNAPSHOT_SCHEMA_V1",
    "EVIDENCE_SNAPSHOT_SCHEMA_V1",
    "DEFAULT_MAX_OUTPUT_BYTES",
    "MAX_FRAME_DEPTH",
    "TASK_CREATED",
    "TASK_CLAIMED",
    "TASK_HEARTBEAT",
    "RESULT_SUBMITTED",
    "TASK_VERIFIED",
    "TASK_LEASE_EXPIRED",
    "TASK_CANCELLED",
    "TASK_REQUEUED",
    "PROJECTION_EVENT",
    "BINDING_REGISTERED",
    "RUN_CREATED",
    "AUXILIARY_RUN_SPAWNED",
    # time
    "Timestamp",
]
