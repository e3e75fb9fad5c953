"""The tasks' sealed tables, as the log reads them back (`core.log.tables`)."""

from aios_ledger.core.log.rows import TASK_SPEND, TASKS
from aios_ledger.core.log.tables import SealedTable
from aios_ledger.core.tasks.budgets import SpendRow
from aios_ledger.core.tasks.records import TaskRow

SEALED_TABLES: tuple[SealedTable, ...] = (
    # `awaiting_projection` (migration 0027) is 0 in every task from before it.
    SealedTable(TASKS, "task_id", TaskRow, later_defaults={"awaiting_projection": 0}),
    SealedTable(TASK_SPEND, "spend_key", SpendRow),
)
