"""Who may write a task's evidence run through the API: the agent that holds the task.

A worker records each attempt's evidence in the run `core/tasks/attempts.py` names for it:
session `task:<task_id>`, run `<task_id>@<attempt>` (`evidence_session`, `evidence_run`), which
the attempt's claim creates and `review` reads. Nobody creates runs in those forms
(RUN_ID_RESERVED); an agent appends to the evidence run of the attempt it holds now: the task
is CLAIMED by the token's name, at that attempt (the store then checks the claim's lease token
and its expiry). Anything else is NOT_RUN_OWNER.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from aios_ledger.core import LedgerError
from aios_ledger.core.tasks.attempts import evidence_run, evidence_task

if TYPE_CHECKING:
    from aios_ledger.shell.api.backend import Stores


def holds_evidence_run(stores: Stores, agent: str, session_id: str, run_id: str) -> bool:
    """Whether `agent` holds the attempt whose evidence run is `session_id`/`run_id`."""
    task_id = evidence_task(session_id)
    if task_id is None:
        return False
    try:
        task = stores.tasks.get(task_id)
    except LedgerError:
        return False
    return (
        task["status"] == "CLAIMED"
        and task["claimed_by"] == agent
        and run_id == evidence_run(task_id, int(task["attempt"]))
    )
