"""aios-ledger's pure core (no I/O, clock, randomness or environment): what an embedder of the task
ledger needs in one hand; the rest is each subpackage's (`docs/api.md`)."""

from aios_ledger.core.actors import Actor
from aios_ledger.core.digests import (
    canonical_json,
    digest_bytes,
    digest_json,
    is_digest,
    sha256_hex,
)
from aios_ledger.core.envelopes import (
    GovernedExecutionBinding,
    project_execution_envelope,
    verify_execution_envelope,
)
from aios_ledger.core.errors import (
    AuxiliaryRunError,
    InitialExecutionProjectionError,
    LedgerError,
    RetryLaterError,
)
from aios_ledger.core.jsonvalue import JsonObject, JsonValue
from aios_ledger.core.log.idempotency import IdempotencyRow
from aios_ledger.core.log.plan import Decision, Replay, WritePlan
from aios_ledger.core.log.records import EventRow, SealRow
from aios_ledger.core.log.seals import ChainTip, chain_of
from aios_ledger.core.log.tail import AppendedEvent, LogTail
from aios_ledger.core.statements import SqlWrite, Statement, StatementKind
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
from aios_ledger.core.tasks.backoff import RetryPolicy
from aios_ledger.core.tasks.decisions import ExpiryState, TaskState
from aios_ledger.core.tasks.history import HistoryEntry
from aios_ledger.core.tasks.modes import VerificationMode, VerifyDecision
from aios_ledger.core.tasks.operations import (
    decide_cancel,
    decide_claim,
    decide_create,
    decide_expire,
    decide_heartbeat,
    decide_retry,
    decide_submit,
    decide_verify,
)
from aios_ledger.core.tasks.queries import TaskListRequest, TaskReadRequest
from aios_ledger.core.tasks.records import TaskRow
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
from aios_ledger.core.tasks.transitions import TaskStatus
from aios_ledger.core.timestamps import Timestamp

__all__ = [
    # records: rows the ledger reads, and the records built from them
    "TaskRow",
    "IdempotencyRow",
    "EventRow",
    "Actor",
    "GovernedExecutionBinding",
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
    # states: everything one decision reads
    "TaskState",
    "ExpiryState",
    # decisions and what an embedder needs to feed them
    "decide_create",
    "decide_claim",
    "decide_heartbeat",
    "decide_submit",
    "decide_verify",
    "decide_cancel",
    "decide_retry",
    "decide_expire",
    "lease_token_sha256",
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
    # plans and statements
    "Decision",
    "WritePlan",
    "Replay",
    "SqlWrite",
    "Statement",
    "StatementKind",
    # log and seals: the tail a state is built with, what a plan appends
    "LogTail",
    "ChainTip",
    "AppendedEvent",
    "chain_of",
    "SealRow",
    # digests, envelopes and JSON
    "canonical_json",
    "sha256_hex",
    "digest_bytes",
    "digest_json",
    "is_digest",
    "project_execution_envelope",
    "verify_execution_envelope",
    "JsonValue",
    "JsonObject",
    # errors
    "LedgerError",
    "InitialExecutionProjectionError",
    "AuxiliaryRunError",
    # enums, tables, constants and event types
    "TaskStatus",
    "VerifyDecision",
    "VerificationMode",
    # time
    "Timestamp",
    "RetryLaterError",
]
