"""Read requests of the task ledger; a limit out of range is refused, never clamped, so that a
caller learns it instead of silently getting less."""

from __future__ import annotations

from typing import Annotated

import attrs
from aios_ledger.core.kinds import Between, Identifier
from aios_ledger.core.structuring import Structured
from aios_ledger.core.tasks.transitions import TaskStatus

MAX_LIST = 10_000
DEFAULT_LIST = 100


@attrs.frozen
class TaskReadRequest(Structured):
    """One task (its row, or its events)."""

    task_id: Identifier


@attrs.frozen
class TaskListRequest(Structured):
    """Tasks of one status in claim order (every status: oldest first), at most `limit`."""

    status: TaskStatus | None = None
    limit: Annotated[int, Between(1, MAX_LIST)] = DEFAULT_LIST
