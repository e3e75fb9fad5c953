"""The recovery projection through real HTTP: on a task whose source capture came back
NEEDS_REWORK, the owner projects the runtime execution with `POST /v1/tasks/{task_id}/
projection-from-source-capture`, and the server answers exactly what
`InitialExecutionProjectionStore.project_from_source_capture` answers in process on the same
state: the projection, its replay, the events it leaves, and the code of a stale request (which
changes nothing)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from aios_ledger.core import LedgerError
from aios_ledger.shell import AUTHORIZATION_ENV, Database, InitialExecutionProjectionStore
from aios_ledger.shell.projection.bindings import RegisteredBindingResolver, register_binding
from aios_ledger.shell.tasks.ledger import TaskLedger
from api_server import ApiServer
from legacy_fixtures import (
    JOB,
    OWNER,
    TASK,
    binding,
    captured_database,
    recovery_mapping,
    recovery_request,
)

PATH = f"/v1/tasks/{TASK}/projection-from-source-capture"


@pytest.fixture
def server(tmp_path: Path) -> Iterator[ApiServer]:
    with ApiServer(captured_database(tmp_path / "served.db"), role_tokens=True) as running:
        yield running


@pytest.fixture
def local(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """The same captured state, projected in process."""
    monkeypatch.setenv(AUTHORIZATION_ENV, OWNER)
    path = captured_database(tmp_path / "local.db")
    with Database(path) as db:
        register_binding(db, binding().public())
    yield path


def in_process(path: Path, **overrides: Any) -> Any:
    with Database(path) as db:
        store = InitialExecutionProjectionStore(
            None, RegisteredBindingResolver(None, database=db), database=db
        )
        try:
            return store.project_from_source_capture(TASK, recovery_request(**overrides))
        except LedgerError as refused:
            return refused.code


def event_types(events: list[dict[str, Any]]) -> list[str]:
    return [str(event["event_type"]) for event in events]


def test_the_owner_recovers_through_http_as_in_process(server: ApiServer, local: Path) -> None:
    owner = server.client("owner")
    put = owner.put(f"/v1/bindings/{TASK}/{JOB}", json=binding().public())
    assert put.status_code == 200, put.text

    answer = owner.post(PATH, json=recovery_mapping())
    assert answer.status_code == 200, answer.text
    expected = in_process(local)
    assert expected["recovery_from_source_capture"] is True and expected["idempotent"] is False
    assert answer.json() == expected

    replay = owner.post(PATH, json=recovery_mapping())
    assert replay.status_code == 200, replay.text
    assert replay.json() == in_process(local) == {**expected, "idempotent": True}

    with TaskLedger(local) as ledger:
        local_events = [dict(event) for event in ledger.events(TASK)]
        local_task = dict(ledger.get(TASK))
    served_events = owner.get(f"/v1/tasks/{TASK}/events").json()
    assert event_types(served_events) == event_types(local_events)
    assert event_types(served_events)[-1] == "TASK_INITIAL_EXECUTION_PROJECTION_AUTHORIZED"
    served_task = owner.get(f"/v1/tasks/{TASK}").json()
    for field in ("status", "revision", "attempt", "required_capabilities", "metadata"):
        assert served_task[field] == local_task[field], field


def test_a_stale_recovery_answers_the_stores_code_and_changes_nothing(
    server: ApiServer, local: Path
) -> None:
    owner = server.client("owner")
    assert owner.put(f"/v1/bindings/{TASK}/{JOB}", json=binding().public()).status_code == 200
    before = owner.get(f"/v1/tasks/{TASK}").json()
    stale: dict[str, Any] = {"expected_revision": 4, "idempotency_key": "recovery-stale-1"}

    answer = owner.post(PATH, json=recovery_mapping(**stale))
    code = in_process(local, **stale)
    assert isinstance(code, str)
    assert answer.status_code in (409, 422), answer.text
    assert answer.headers["content-type"].startswith("application/problem+json")
    assert answer.json()["code"] == code
    assert owner.get(f"/v1/tasks/{TASK}").json() == before
