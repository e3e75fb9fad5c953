"""Governed writes to git, purely: which repositories are governed, what a proposal's facts are, and
when the ledger may move a branch."""

from aios_ledger.core.git.answers import (
    ProposalAnswer,
    RepositoryAnswer,
    RepositorySettingsAnswer,
    ScanChargeAnswer,
    WriteAnswer,
)
from aios_ledger.core.git.decisions import (
    OutcomeState,
    ProposalState,
    RepositorySettingsState,
    RepositoryState,
    ScanChargeState,
    WriteState,
    decide_change_repository_settings,
    decide_charge_scan,
    decide_record_proposal,
    decide_register_repository,
    decide_write_intent,
    decide_write_outcome,
)
from aios_ledger.core.git.records import (
    GovernedWriteRow,
    ProposalRow,
    RepositoryRow,
    RepositorySettingsChangeRow,
    ScanChargeRow,
    WriterLeaseRow,
)
from aios_ledger.core.git.requests import (
    ProposalRecord,
    RegisterRepositoryRequest,
    RepositorySettingsRequest,
    ScanCharge,
    WriteOutcome,
    WriteRequest,
)
from aios_ledger.core.git.settings import (
    AgentScanSpend,
    RepositorySettings,
    SettingsChange,
    admit_scan,
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
    "RepositorySettingsChangeRow",
    "ScanChargeRow",
    "RepositorySettingsRequest",
    "RepositorySettings",
    "SettingsChange",
    "AgentScanSpend",
    "ScanCharge",
    "admit_scan",
    "RepositorySettingsState",
    "ScanChargeState",
    "decide_change_repository_settings",
    "decide_charge_scan",
    "RepositorySettingsAnswer",
    "ScanChargeAnswer",
]
