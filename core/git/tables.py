"""The governed writes' sealed tables (`core.log.tables`)."""

from aios_ledger.core.git.records import (
    GOVERNED_REPOSITORIES,
    GOVERNED_WRITES,
    REPOSITORY_SETTINGS_CHANGES,
    WRITER_LEASES,
    GovernedWriteRow,
    ProposalRow,
    RepositoryRow,
    RepositorySettingsChangeRow,
    ScanChargeRow,
    WriterLeaseRow,
)
from aios_ledger.core.git.settings import MIGRATED_DEFAULTS
from aios_ledger.core.log.rows import AGENT_SCAN_CHARGES, TASK_PROPOSALS
from aios_ledger.core.log.tables import SealedTable

# In the order a copy writes them, the one the target's foreign keys need.
TABLES = (
    SealedTable(
        GOVERNED_REPOSITORIES,
        "name",
        RepositoryRow,
        later_defaults={**MIGRATED_DEFAULTS, "remote_url": None},
        insert="governed_repository_insert",
    ),
    SealedTable(
        REPOSITORY_SETTINGS_CHANGES,
        "idempotency_key",
        RepositorySettingsChangeRow,
        insert="repository_settings_change_insert",
    ),
    SealedTable(
        TASK_PROPOSALS,
        "proposal_id",
        ProposalRow,
        insert="task_proposal_insert",
        of_task="of_task_by_task_id",
        delete="delete_archived_proposals",
    ),
    SealedTable(
        AGENT_SCAN_CHARGES,
        "charge_id",
        ScanChargeRow,
        insert="agent_scan_charge_insert",
        of_task="of_task_by_task_id",
        delete="delete_archived_scan_charges",
    ),
    SealedTable(WRITER_LEASES, "lease_id", WriterLeaseRow, insert="writer_lease_insert"),
    SealedTable(
        GOVERNED_WRITES, "idempotency_key", GovernedWriteRow, insert="governed_write_insert"
    ),
)
