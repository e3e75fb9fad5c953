"""The tasks' sealed tables, as the log reads them back and the statements render them
(`core.log.tables`)."""

from aios_ledger.core.log.rows import TASK_SPEND, TASKS
from aios_ledger.core.log.tables import SealedTable
from aios_ledger.core.tasks.budgets import SpendRow
from aios_ledger.core.tasks.records import TaskRow

TASKS_TABLE = SealedTable(
    TASKS,
    "task_id",
    TaskRow,
    # `awaiting_projection` (0.x migration 0027) is 0 in every task from before it.
    later_defaults={"awaiting_projection": 0},
    insert="tasks_insert",
    history="sealed_history_of_tasks",
    in_key_order=True,
    of_task="of_task_by_task_id",
)
SPEND_TABLE = SealedTable(
    TASK_SPEND,
    "spend_key",
    SpendRow,
    insert="task_spend_insert",
    of_task="of_task_by_task_id",
    delete="delete_archived_spend",
)
