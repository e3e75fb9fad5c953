"""The auxiliary runs' sealed table, as the log reads it back (`core.log.tables`)."""

from aios_ledger.core.auxiliary.records import AuxiliaryRunRow
from aios_ledger.core.log.rows import AUXILIARY_RUNS
from aios_ledger.core.log.tables import SealedTable

SEALED_TABLES: tuple[SealedTable, ...] = (SealedTable(AUXILIARY_RUNS, "aux_id", AuxiliaryRunRow),)
