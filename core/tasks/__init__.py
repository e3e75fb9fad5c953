"""The task lifecycle: requests, the transition table, results and decisions."""

from aios_ledger.core.tasks.answers import HolderView, TaskDetail
from aios_ledger.core.tasks.backoff import retry_delay_ms
from aios_ledger.core.tasks.budgets import (
    BUDGET_EXCEEDED,
    Money,
    SpendRow,
    TaskBudget,
    Usage,
    over_budget,
)
from aios_ledger.core.tasks.decisions import first_claimable, refuse_ungranted
from aios_ledger.core.tasks.history import named_attempt, task_history
from aios_ledger.core.tasks.operations import decide_task
from aios_ledger.core.tasks.results import RESULT_CONTRACTS
from aios_ledger.core.tasks.transitions import (
    ABSENT,
    RESULT_SUBMITTED,
    TASK_CANCELLED,
    TASK_CLAIMED,
    TASK_CREATED,
    TASK_HEARTBEAT,
    TASK_LEASE_EXPIRED,
    TASK_REQUEUED,
    TASK_TRANSITIONS,
    TASK_VERIFIED,
    TERMINAL_STATUSES,
    TaskOperation,
    next_task_status,
)

__all__ = [
    "first_claimable",
    "refuse_ungranted",
    "task_history",
    "retry_delay_ms",
    "next_task_status",
    "RESULT_CONTRACTS",
    "TaskOperation",
    "ABSENT",
    "TASK_TRANSITIONS",
    "TERMINAL_STATUSES",
    "TASK_CREATED",
    "TASK_CLAIMED",
    "TASK_HEARTBEAT",
    "RESULT_SUBMITTED",
    "TASK_VERIFIED",
    "TASK_LEASE_EXPIRED",
    "TASK_CANCELLED",
    "TASK_REQUEUED",
    "decide_task",
    "BUDGET_EXCEEDED",
    "Money",
    "SpendRow",
    "TaskBudget",
    "Usage",
    "over_budget",
    "named_attempt",
    "HolderView",
    "TaskDetail",
]
