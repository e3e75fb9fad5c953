"""`TaskSurface`: the one method surface `TaskLedger` and `LedgerClient` share."""

from __future__ import annotations

import inspect
from pathlib import Path
from typing import Any

import pytest
from aios_ledger.shell import LedgerClient, TaskLedger
from aios_ledger.shell.tasks.surface import TaskSurface

# What each side has beyond the shared surface: the ledger's own writes (batches over one
# transaction, the expiry sweep) and the client's other routes (runs, repositories, reads).
LEDGER_ONLY = {"close", "database", "expire_leases", "submit_results", "verify_results"}
CLIENT_ONLY = {
    "append_event",
    "call_json",
    "close",
    "create_run",
    "download_workspace",
    "follow_events",
    "get_json",
    "get_run",
    "run_events",
    "upload_proposal",
    "whoami",
}


def public(cls: type) -> set[str]:
    return {name for name in dir(cls) if not name.startswith("_")}


def test_a_task_method_of_one_side_is_the_others_too() -> None:
    """A task method added to one class and not to the surface fails here; one added to the
    surface and not implemented by a class fails mypy (an abstract method) and here."""
    shared = public(TaskSurface)
    assert public(TaskLedger) - shared == LEDGER_ONLY
    assert public(LedgerClient) - shared == CLIENT_ONLY
    assert not inspect.isabstract(TaskLedger) and not inspect.isabstract(LedgerClient)


def test_the_keyword_writes_are_written_once() -> None:
    """The keyword writes come from the surface on both sides (the ledger's verify alone adds
    its `reviewer`), so their arguments cannot drift apart."""
    for name in ("create_task", "create_tasks", "heartbeat", "release", "submit_result"):
        assert getattr(TaskLedger, name) is getattr(LedgerClient, name), name
    for name in ("cancel", "retry"):
        assert getattr(TaskLedger, name) is getattr(TaskSurface, name), name
    own = inspect.signature(TaskLedger.verify).parameters
    assert set(own) - set(inspect.signature(TaskSurface.verify).parameters) == {"reviewer"}


def test_each_side_claims_with_its_own_option_alone(tmp_path: Path) -> None:
    """The ledger's `grant` and the client's `wait_seconds` are in each side's own signature:
    the other's is a TypeError, which mypy reports first (else these ignores are unused)."""
    offer: dict[str, Any] = {"agent_id": "w", "capabilities": [], "lease_seconds": 60}
    with TaskLedger(tmp_path / "ledger.db") as ledger:
        with pytest.raises(TypeError, match="wait_seconds"):
            ledger.claim(**offer, wait_seconds=5)  # type: ignore[call-arg]
        with pytest.raises(TypeError, match="wait_seconds"):
            ledger.claim_many(**offer, limit=2, wait_seconds=5)  # type: ignore[call-arg]
        assert ledger.claim(**offer, grant=[]) is None
    with LedgerClient("http://127.0.0.1:9", "token") as client:
        with pytest.raises(TypeError, match="grant"):
            client.claim(**offer, grant=[])  # type: ignore[call-arg]
        with pytest.raises(TypeError, match="grant"):
            client.claim_many(**offer, limit=2, grant=[])  # type: ignore[call-arg]
