"""The tamper-evident log: seals, verification and exports."""

from aios_ledger.core.log.adoption import (
    AdoptionAnswer,
    AdoptionSealRequest,
    AdoptionState,
    decide_adoption_seals,
)
from aios_ledger.core.log.export import EXPORT_SCHEMA, ChainTips, verify_export_lines
from aios_ledger.core.log.merkle import (
    ConsistencyProof,
    InclusionProof,
    TreeHead,
    parse_proof,
    verify_consistency,
    verify_inclusion,
)
from aios_ledger.core.log.records import SealedRow
from aios_ledger.core.log.rows import RowImage
from aios_ledger.core.log.seals import GENESIS_SEAL, LEDGER_CHAIN
from aios_ledger.core.log.tail import EventAppend
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
    MERKLE_MISMATCH,
    STATE_MISMATCH,
    UNSEALED_EVENT,
    ChainLink,
    Finding,
    LedgerHead,
    LogVerifier,
    VerificationReport,
)

__all__ = [
    "AdoptionSealRequest",
    "AdoptionState",
    "decide_adoption_seals",
    "AdoptionAnswer",
    "EventAppend",
    "GENESIS_SEAL",
    "LEDGER_CHAIN",
    "LogVerifier",
    "VerificationReport",
    "Finding",
    "LedgerHead",
    "ChainLink",
    "ChainTips",
    "SealedRow",
    "RowImage",
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
    "MERKLE_MISMATCH",
    "TreeHead",
    "InclusionProof",
    "ConsistencyProof",
    "verify_inclusion",
    "verify_consistency",
    "parse_proof",
]
