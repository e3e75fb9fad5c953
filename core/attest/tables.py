"""The attestations' sealed table, as the log reads it back (`core.log.tables`)."""

from aios_ledger.core.attest.records import CommitAttestationRow
from aios_ledger.core.log.rows import COMMIT_ATTESTATIONS
from aios_ledger.core.log.tables import SealedTable

SEALED_TABLES: tuple[SealedTable, ...] = (
    SealedTable(COMMIT_ATTESTATIONS, "idempotency_key", CommitAttestationRow),
)
