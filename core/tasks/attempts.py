"""The runs the ledger names itself: attempt N of task T records evidence in run `T@N`, created by
its claim; nobody else may (`RUN_ID_RESERVED`), or an agent could take it first."""

from __future__ import annotations

import re

import attrs
from aios_ledger.core.errors import LedgerError
from aios_ledger.core.log.rows import RUNS, RowImage, row_image

EVIDENCE_SESSION_PREFIX = "task:"
REVIEW_PREFIX = "review:"
# `T@N`, the form `evidence_run` gives, whatever T is (a task id may itself hold `@`).
_ATTEMPT_RUN = re.compile(r".+@[0-9]+")


def evidence_session(task_id: str) -> str:
    return f"{EVIDENCE_SESSION_PREFIX}{task_id}"


def evidence_run(task_id: str, attempt: int) -> str:
    return f"{task_id}@{attempt}"


def evidence_prompt(attempt: int) -> str:
    return f"attempt {attempt}"


def evidence_task(session_id: str) -> str | None:
    """The task whose evidence session `session_id` is, or None for any other session."""
    if not session_id.startswith(EVIDENCE_SESSION_PREFIX):
        return None
    return session_id.removeprefix(EVIDENCE_SESSION_PREFIX)


def is_reserved_session(session_id: str) -> bool:
    return session_id.startswith((EVIDENCE_SESSION_PREFIX, REVIEW_PREFIX))


def is_reserved_run(run_id: str) -> bool:
    return run_id.startswith(REVIEW_PREFIX) or _ATTEMPT_RUN.fullmatch(run_id) is not None


def refuse_reserved(session_id: str, run_id: str) -> None:
    """RUN_ID_RESERVED for a run in one of the ledger's own forms."""
    if is_reserved_session(session_id) or is_reserved_run(run_id):
        raise LedgerError(
            "RUN_ID_RESERVED",
            f"run {run_id!r} in session {session_id!r} has a form the ledger reserves "
            f"(run 'TASK@N', sessions '{EVIDENCE_SESSION_PREFIX}*' and '{REVIEW_PREFIX}*'): "
            "an attempt's evidence run is created by its claim; its holder appends to it. "
            "Choose another run id in your own session",
        )


@attrs.frozen
class RunIdentity:
    """The columns of a `runs` row that never change, which its `RUN_CREATED` seal covers."""

    run_id: str
    session_id: str
    prompt: str
    created_at: str

    def image(self) -> RowImage:
        return row_image(RUNS, self.run_id, attrs.asdict(self))
