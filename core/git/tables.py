"""The governed writes' sealed tables, as the log reads them back (`core.log.tables`)."""

from aios_ledger.core.git.records import (
    GovernedWriteRow,
    ProposalRow,
    RepositoryRow,
    RepositorySettingsChangeRow,
    ScanChargeRow,
    WriterLeaseRow,
)
from aios_ledger.core.git.settings import MIGRATED_DEFAULTS
from aios_ledger.core.log.rows import (
    AGENT_SCAN_CHARGES,
    GOVERNED_REPOSITORIES,
    GOVERNED_WRITES,
    REPOSITORY_SETTINGS_CHANGES,
    TASK_PROPOSALS,
    WRITER_LEASES,
)
from aios_ledger.core.log.tables import SealedTable

SEALED_TABLES: tuple[SealedTable, ...] = (
    SealedTable(GOVERNED_REPOSITORIES, "name", RepositoryRow, later_defaults=MIGRATED_DEFAULTS),
    SealedTable(TASK_PROPOSALS, "proposal_id", ProposalRow),
    SealedTable(WRITER_LEASES, "lease_id", WriterLeaseRow),
    SealedTable(GOVERNED_WRITES, "idempotency_key", GovernedWriteRow),
    SealedTable(REPOSITORY_SETTINGS_CHANGES, "idempotency_key", RepositorySettingsChangeRow),
    SealedTable(AGENT_SCAN_CHARGES, "charge_id", ScanChargeRow),
)
