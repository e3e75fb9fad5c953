"""The task page (`/tasks/{task_id}`): the task's whole record and the actions on it by role.

Each action is the API's own request record, built from the form and applied through the same
store, so the console can do nothing the API would refuse.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from aios_ledger.core.actors import OWNER
from aios_ledger.core.git.decisions import governed_writable
from aios_ledger.core.tasks.modes import VerifyDecision
from aios_ledger.core.tasks.offers import open_operations, operation_roles
from aios_ledger.core.tasks.requests import CancelRequest, RetryRequest, VerifyRequest
from aios_ledger.core.tasks.transitions import TaskStatus
from aios_ledger.shell.api.app import READERS, whole_number
from aios_ledger.shell.api.governed import write_task_branch
from aios_ledger.shell.web.console import Page, Rendered, Visit, new_idempotency_key, see_other
from aios_ledger.shell.web.task_record import (
    RUN_TEXT_LIMIT,
    RUN_TEXT_SHOWN,
    read_task_record,
    shown_document,
)
from starlette.responses import Response

OWNERS = frozenset({OWNER})
ACTIONS = ("verify", "retry", "cancel")
DECISIONS = tuple(decision.value for decision in VerifyDecision)
# A timeline reason's characters shown: the whole is the history's JSON, a link away.
REASON_SHOWN = 160
VERDICT_FIELDS = ("decision", "reason", "expected_result_digest")


def envelope(task: Any) -> dict[str, Any] | None:
    """The task's execution envelope (`metadata.execution`), or None."""
    metadata = task["metadata"]
    execution = metadata.get("execution") if isinstance(metadata, dict) else None
    return execution if isinstance(execution, dict) else None


def task_page(visit: Visit) -> Rendered:
    task_id, before = visit.path("task_id"), whole_number(visit.query("before"), "before")
    record = visit.backend.read_now(lambda stores: read_task_record(stores, task_id, before))
    status, viewer = record.task["status"], visit.viewer
    task_result, execution = record.task["result"], envelope(record.task)
    digest = None if execution is None else execution.get("execution_digest")
    applied = any(write["type"] == "GOVERNED_WRITE_APPLIED" for write in record.writes)
    allowed = open_operations(status, viewer.principal.roles)
    offered = {action: action in allowed for action in ACTIONS}
    offered["write"] = (
        viewer.may(OWNERS) and governed_writable(status) and bool(record.proposals) and not applied
    )
    return Rendered(
        "task.html",
        {
            "task": record.task,
            "record": record,
            "result_json": None if task_result is None else shown_document(task_result),
            "envelope_json": None if execution is None else shown_document(execution),
            "envelope_digest": digest if isinstance(digest, str) else None,
            "history": record.history,
            "reason_shown": REASON_SHOWN,
            "run_text_shown": RUN_TEXT_SHOWN,
            "run_text_limit": RUN_TEXT_LIMIT,
            "reasons_cut": any(
                len(entry["reason"] or "") > REASON_SHOWN for entry in record.history
            ),
            "offered": offered,
            "decisions": DECISIONS,
            "keys": {
                action: new_idempotency_key(action) for action, shown in offered.items() if shown
            },
        },
    )


def _back(task_id: str) -> Response:
    return see_other(f"/tasks/{task_id}")


def _operation(
    route: str, operation: str, record: Any, *names: str, as_reviewer: bool = False
) -> Page:
    """A task operation's POST, for the roles the API allows it: its request `record` from the
    form's `names`, applied as the API's route applies it; `as_reviewer`: the session's token
    name judges, as the API's token's does."""

    def act(visit: Visit) -> Response:
        task_id = visit.path("task_id")
        fields = {name: visit.form[name] for name in names if name in visit.form}
        if as_reviewer:
            fields["agent_id"] = visit.viewer.principal.name
        key = visit.form.get("idempotency_key", "")
        request = record.from_mapping({"task_id": task_id, "idempotency_key": key, **fields})
        answer = visit.backend.write_now(lambda stores: stores.tasks.apply(request))
        if answer["status"] == TaskStatus.QUEUED:
            visit.backend.announce_work()  # the waiting claims are woken, as by the API
        return _back(task_id)

    return _action(route, f"{operation}Task", act, operation_roles(operation))


def governed_write(visit: Visit) -> Response:
    """The owner writes the verified proposal to its bound branch, as the API's route does."""
    task_id = visit.path("task_id")
    write_task_branch(visit.backend.settings, task_id, visit.form.get("idempotency_key", ""))
    return _back(task_id)


def _action(
    route: str, name: str, handler: Callable[[Visit], Response], roles: frozenset[str]
) -> Page:
    return Page(f"/tasks/{{task_id}}/{route}", name, handler, roles, methods=("POST",))


PAGES = (
    Page("/tasks/{task_id}", "taskPage", task_page, READERS),
    _operation("verification", "verify", VerifyRequest, *VERDICT_FIELDS, as_reviewer=True),
    _operation("retry", "retry", RetryRequest, "reason"),
    _operation("cancel", "cancel", CancelRequest, "reason"),
    _action("governed-write", "governedWriteTask", governed_write, OWNERS),
)
