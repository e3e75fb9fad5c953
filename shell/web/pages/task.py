"""The task page (`/tasks/{task_id}`): its status, its envelope's digest and its timeline from
the sealed events (who, when, attempt, kind, reason); and the owner's action on it, cancel
(`POST /tasks/{task_id}/cancel`), which the page shows only to an owner and the server refuses
to anyone else (the Page's roles)."""

from __future__ import annotations

from typing import Any

from aios_ledger.core.api.tokens import OWNER
from aios_ledger.core.tasks.requests import CancelRequest
from aios_ledger.core.tasks.transitions import TaskStatus
from aios_ledger.shell.api.app import READERS
from aios_ledger.shell.web.console import Page, Rendered, Visit, new_idempotency_key, see_other

OWNERS = frozenset({OWNER})
# The statuses a task can be cancelled from (the core decides; the page only offers it there).
CANCELLABLE = frozenset(
    {TaskStatus.QUEUED, TaskStatus.CLAIMED, TaskStatus.SUBMITTED, TaskStatus.PAUSED}
)


def envelope_digest(task: Any) -> str | None:
    """The `execution_digest` of the task's execution envelope (`metadata.execution`, as the
    governed projection writes it), or None for a task without one."""
    metadata = task["metadata"]
    execution = metadata.get("execution") if isinstance(metadata, dict) else None
    digest = execution.get("execution_digest") if isinstance(execution, dict) else None
    return digest if isinstance(digest, str) else None


def task_page(visit: Visit) -> Rendered:
    task_id = visit.path("task_id")

    def read(stores: Any) -> tuple[Any, Any]:
        return stores.tasks.get(task_id), stores.tasks.history(task_id)

    task, history = visit.backend.read_now(read)
    return Rendered(
        "task.html",
        {
            "task": task,
            "envelope_digest": envelope_digest(task),
            "history": history,
            "may_cancel": visit.viewer.may(OWNERS) and task["status"] in CANCELLABLE,
            "owners": OWNERS,
            "cancel_key": new_idempotency_key("cancel"),
        },
    )


def cancel_task(visit: Visit) -> Any:
    """The owner cancels the task, with the form's reason and idempotency key (a form sent
    twice is one cancel), as `POST /v1/tasks/{task_id}/cancel` does."""
    task_id = visit.path("task_id")
    request = CancelRequest.from_mapping(
        {
            "task_id": task_id,
            "reason": visit.form.get("reason", ""),
            "idempotency_key": visit.form.get("idempotency_key", ""),
        }
    )
    visit.backend.write_now(lambda s: s.tasks.apply(request))
    return see_other(f"/tasks/{task_id}")


PAGES = (
    Page("/tasks/{task_id}", "taskPage", task_page, READERS),
    Page("/tasks/{task_id}/cancel", "cancelTask", cancel_task, OWNERS, methods=("POST",)),
)
