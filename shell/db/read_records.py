"""The core's row records, by name, that a named read may declare it selects into (`-- returns:
RECORD`); `statements` refuses any other name at load."""

from __future__ import annotations

from collections.abc import Mapping

from aios_ledger.core.api.tokens import ApiTokenRow
from aios_ledger.core.attest.records import CommitAttestationRow
from aios_ledger.core.auxiliary.records import AuxiliaryRunRow
from aios_ledger.core.git.records import (
    GovernedWriteRow,
    ProposalRow,
    RepositoryRow,
    WriterLeaseRow,
)
from aios_ledger.core.log.idempotency import IdempotencyRow
from aios_ledger.core.log.merkle import (
    MerkleHashRow,
    MerkleTreeRow,
    PendingLeaf,
)
from aios_ledger.core.log.records import EventRow
from aios_ledger.core.log.seals import ChainTip
from aios_ledger.core.projection.records import BindingRow
from aios_ledger.core.proofs.checkpoints import CheckpointRow
from aios_ledger.core.tasks.budgets import SpendTotals
from aios_ledger.core.tasks.records import TaskRow

READ_RECORDS: Mapping[str, type] = {
    record.__name__: record
    for record in (
        ApiTokenRow,
        AuxiliaryRunRow,
        BindingRow,
        ChainTip,
        CheckpointRow,
        CommitAttestationRow,
        EventRow,
        GovernedWriteRow,
        IdempotencyRow,
        MerkleHashRow,
        MerkleTreeRow,
        PendingLeaf,
        ProposalRow,
        RepositoryRow,
        SpendTotals,
        TaskRow,
        WriterLeaseRow,
    )
}
