"""`open_operations`: what a caller may ask for on a task now, as the transition table says."""

from __future__ import annotations

import pytest
from aios_ledger.core.actors import AGENT, AUDITOR, OWNER, REVIEWER, ROLES
from aios_ledger.core.tasks import TASK_TRANSITIONS
from aios_ledger.core.tasks.offers import open_operations, operation_roles
from aios_ledger.core.tasks.operations import TASK_OPERATIONS
from aios_ledger.core.tasks.transitions import TaskStatus

S = TaskStatus
EXPECTED = {
    (S.QUEUED, AGENT): {"claim"},
    (S.QUEUED, OWNER): {"cancel", "pause"},
    (S.CLAIMED, AGENT): {"heartbeat", "release", "submit"},
    (S.CLAIMED, OWNER): {"cancel"},
    (S.SUBMITTED, REVIEWER): {"verify"},
    (S.SUBMITTED, OWNER): {"cancel"},
    (S.PAUSED, OWNER): {"cancel", "resume"},
    (S.FAILED, OWNER): {"retry"},
    (S.CANCELLED, OWNER): {"retry"},
}


@pytest.mark.parametrize("status", list(TaskStatus))
@pytest.mark.parametrize("role", ROLES)
def test_a_role_is_offered_what_the_table_moves_from_the_status(status: S, role: str) -> None:
    assert open_operations(status, {role}) == EXPECTED.get((status, role), set())


def test_roles_add_up_and_every_offer_has_a_column() -> None:
    both = open_operations(S.SUBMITTED, {OWNER, REVIEWER})
    assert both == {"cancel", "verify"}
    assert open_operations(S.SUCCEEDED, ROLES) == frozenset()
    assert open_operations("QUEUED", {AUDITOR}) == frozenset()
    sources = {str(status) for status, _ in TASK_TRANSITIONS}
    for status in TaskStatus:
        for name in open_operations(status, ROLES):
            assert status in sources and operation_roles(name) <= set(ROLES)


def test_the_roles_are_the_rows() -> None:
    assert operation_roles("verify") == {REVIEWER}
    assert operation_roles("expire") == frozenset()
    assert all(
        operation_roles(name) == {row.role} for name, row in TASK_OPERATIONS.items() if row.role
    )
