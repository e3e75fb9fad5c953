"""The auxiliary runs' sealed table, as the log reads it back and the statements render it
(`core.log.tables`)."""

from aios_ledger.core.auxiliary.records import AuxiliaryRunRow
from aios_ledger.core.log.rows import AUXILIARY_RUNS
from aios_ledger.core.log.tables import SealedTable

TABLES = (
    SealedTable(
        AUXILIARY_RUNS,
        "aux_id",
        AuxiliaryRunRow,
        insert="restore_auxiliary_run",
        # The reviews of the task's attempt runs.
        of_task="of_task_by_session",
        delete="delete_archived_auxiliary_runs",
    ),
)
