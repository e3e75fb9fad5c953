"""The attestations' sealed table, as the log reads it back and the statements render it
(`core.log.tables`)."""

from aios_ledger.core.attest.records import COMMIT_ATTESTATIONS, CommitAttestationRow
from aios_ledger.core.log.tables import SealedTable

TABLES = (
    SealedTable(
        COMMIT_ATTESTATIONS,
        "idempotency_key",
        CommitAttestationRow,
        insert="commit_attestation_insert",
    ),
)
