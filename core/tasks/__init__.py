"""The task lifecycle: requests, the transition table, results and decisions."""

import typing

if typing.TYPE_CHECKING:
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
    from aios_ledger.core.tasks.decisions import decide_task, first_claimable, refuse_ungranted
    from aios_ledger.core.tasks.history import named_attempt, task_history
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

if not typing.TYPE_CHECKING:

    def __getattr__(name: str) -> object:
        """Each public name, loaded on first use (PEP 562): the core's modules import each
        other's across its subpackages, so a package that imported all of its modules as it is
        imported would close import cycles. The imports above, for type checkers, are these."""
        if name not in __all__:
            raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
        from aios_ledger.core.tasks.answers import HolderView, TaskDetail  # noqa: F401
        from aios_ledger.core.tasks.backoff import retry_delay_ms  # noqa: F401
        from aios_ledger.core.tasks.budgets import (  # noqa: F401
            BUDGET_EXCEEDED,
            Money,
            SpendRow,
            TaskBudget,
            Usage,
            over_budget,
        )
        from aios_ledger.core.tasks.decisions import decide_task, first_claimable, refuse_ungranted  # noqa: F401
        from aios_ledger.core.tasks.history import named_attempt, task_history  # noqa: F401
        from aios_ledger.core.tasks.results import RESULT_CONTRACTS  # noqa: F401
        from aios_ledger.core.tasks.transitions import (  # noqa: F401
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

        loaded = locals()
        globals().update({export: loaded[export] for export in __all__})
        return loaded[name]

    def __dir__() -> list[str]:
        return sorted({*globals(), *__all__})
