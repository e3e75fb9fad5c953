"""Governed writes to git, purely: which repositories are governed, what a proposal's facts
are, and when the ledger may move a branch (decisions over rows the shell read from SQL and
descriptions it read from git)."""

import typing

if typing.TYPE_CHECKING:
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

if not typing.TYPE_CHECKING:

    def __getattr__(name: str) -> object:
        """Each public name, loaded on first use (PEP 562): the core's modules import each
        other's across its subpackages, so a package that imported all of its modules as it is
        imported would close import cycles. The imports above, for type checkers, are these."""
        if name not in __all__:
            raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
        from aios_ledger.core.git.answers import (  # noqa: F401
            ProposalAnswer,
            RepositoryAnswer,
            RepositorySettingsAnswer,
            ScanChargeAnswer,
            WriteAnswer,
        )
        from aios_ledger.core.git.decisions import (  # noqa: F401
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
        from aios_ledger.core.git.records import (  # noqa: F401
            GovernedWriteRow,
            ProposalRow,
            RepositoryRow,
            RepositorySettingsChangeRow,
            ScanChargeRow,
            WriterLeaseRow,
        )
        from aios_ledger.core.git.requests import (  # noqa: F401
            ProposalRecord,
            RegisterRepositoryRequest,
            RepositorySettingsRequest,
            ScanCharge,
            WriteOutcome,
            WriteRequest,
        )
        from aios_ledger.core.git.settings import (  # noqa: F401
            AgentScanSpend,
            RepositorySettings,
            SettingsChange,
            admit_scan,
        )

        loaded = locals()
        globals().update({export: loaded[export] for export in __all__})
        return loaded[name]

    def __dir__() -> list[str]:
        return sorted({*globals(), *__all__})
