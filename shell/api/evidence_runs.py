"""Who may write a task's evidence run through the API: the agent that holds the task.

A worker records each attempt's evidence in the run `core/work.py` names for it: session
`task:<task_id>`, run `<task_id>@<attempt>` (`evidence_session`, `evidence_run`), where `review`
reads it. Those runs are not in the agent's own session, so besides the rule that an agent's
runs are those of its session (its token's name), an agent may create, and append to, the
evidence run of the attempt it holds now: the task is CLAIMED by the token's name, at that
attempt. Anything else stays NOT_RUN_OWNER / FORBIDDEN.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from aios_ledger.core import LedgerError
from aios_ledger.core.work import evidence_run, evidence_session

if TYPE_CHECKING:
    from aios_ledger.shell.api.backend import Stores

EVIDENCE_PREFIX = evidence_session("")


def holds_evidence_run(stores: Stores, agent: str, session_id: str, run_id: object) -> bool:
    """Whether `agent` holds the attempt whose evidence run is `session_id`/`run_id`."""
    if not session_id.startswith(EVIDENCE_PREFIX) or not isinstance(run_id, str):
        return False
    task_id = session_id.removeprefix(EVIDENCE_PREFIX)
    try:
        task = stores.tasks.get(task_id)
    except LedgerError:
        return False
    return (
        task["status"] == "CLAIMED"
        and task["claimed_by"] == agent
        and run_id == evidence_run(task_id, int(task["attempt"]))
    )
