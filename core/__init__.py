"""aios-ledger's pure core: records, validation, digests, decisions and state tables.

Nothing here performs I/O, reads a clock, draws randomness or looks at the environment; the
shell (`aios_ledger.shell`) supplies all of those as inputs.
"""

from .bindings import BINDING_REGISTERED, decide_register_binding, envelope_from_binding
from .digests import canonical_json, digest_bytes, digest_json, is_digest, sha256_hex
from .errors import InitialExecutionProjectionError, LedgerError
from .event_seals import GENESIS_SEAL, LEDGER_CHAIN, SealedEvent, chain_of, seal_of
from .execution import (
    ACTIONS,
    ENVELOPE_SCHEMA,
    GOVERNANCE_FLAGS,
    GovernedExecutionBinding,
    governance_flags_set,
    project_execution_envelope,
    verify_execution_envelope,
)
from .jsonvalue import JsonObject, JsonValue, check_json, loads_document, loads_object
from .migrations import (
    LEGACY_EVENT_COLUMNS,
    LEGACY_TASK_COLUMNS,
    CatalogueView,
    Migration,
    MigrationPlan,
    parse_migration,
    plan_migrations,
)
from .plan import (
    Decision,
    EventAppend,
    Replay,
    SqlWrite,
    WritePlan,
    first_answer,
    replay_or_conflict,
    request_digest,
)
from .projection import (
    PROJECTION_EVENT,
    InitialExecutionProjectionRequest,
    ProjectionState,
    ResolverCall,
    SourceCaptureProjectionRecoveryRequest,
    decide_projection,
    prepare_projection,
    runtime_input_of,
)
from .records import TASK_STATUSES, TERMINAL_STATUSES, EventRow, IdempotencyRow, TaskRow
from .result_contracts import check_schema_well_formed, contract_violations, require_contract
from .timestamps import add_seconds, format_timestamp, normalise_timestamp, parse_timestamp

__all__ = [
    "BINDING_REGISTERED",
    "decide_register_binding",
    "envelope_from_binding",
    "ACTIONS",
    "ENVELOPE_SCHEMA",
    "GENESIS_SEAL",
    "GOVERNANCE_FLAGS",
    "LEDGER_CHAIN",
    "LEGACY_EVENT_COLUMNS",
    "LEGACY_TASK_COLUMNS",
    "PROJECTION_EVENT",
    "TASK_STATUSES",
    "TERMINAL_STATUSES",
    "CatalogueView",
    "Decision",
    "EventAppend",
    "EventRow",
    "GovernedExecutionBinding",
    "IdempotencyRow",
    "InitialExecutionProjectionError",
    "InitialExecutionProjectionRequest",
    "JsonObject",
    "JsonValue",
    "LedgerError",
    "Migration",
    "MigrationPlan",
    "ProjectionState",
    "Replay",
    "ResolverCall",
    "SealedEvent",
    "SourceCaptureProjectionRecoveryRequest",
    "SqlWrite",
    "TaskRow",
    "WritePlan",
    "add_seconds",
    "canonical_json",
    "chain_of",
    "check_json",
    "check_schema_well_formed",
    "contract_violations",
    "decide_projection",
    "digest_bytes",
    "digest_json",
    "first_answer",
    "format_timestamp",
    "governance_flags_set",
    "is_digest",
    "loads_document",
    "loads_object",
    "normalise_timestamp",
    "parse_migration",
    "parse_timestamp",
    "plan_migrations",
    "prepare_projection",
    "project_execution_envelope",
    "replay_or_conflict",
    "request_digest",
    "require_contract",
    "runtime_input_of",
    "seal_of",
    "sha256_hex",
    "verify_execution_envelope",
]
