"""The API application's own parts, in process: the code-to-status table, the document built from
the core's schemas (and validating bodies before the core does), a defect answered as a 500
without its internals."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from aios_ledger.core import LedgerError
from aios_ledger.core.request_schemas import request_schema
from aios_ledger.core.tasks.operations import TASK_OPERATIONS
from aios_ledger.shell import Database, TaskLedger
from aios_ledger.shell.api.app import create_app, operations
from aios_ledger.shell.api.backend import ApiSettings
from aios_ledger.shell.api.openapi import BodyValidators, build_document
from aios_ledger.shell.api.problems import status_of
from aios_ledger.shell.api.tokens import issue_token
from starlette.applications import Starlette
from test_tasks_support import Clock


@pytest.mark.parametrize(
    ("code", "status"),
    [
        ("TASK_NOT_FOUND", 404),
        ("GOVERNED_BINDING_NOT_FOUND", 404),
        ("UNAUTHENTICATED", 401),
        ("FORBIDDEN", 403),
        ("NOT_TASK_HOLDER", 403),
        ("REVISION_CONFLICT", 409),
        ("IDEMPOTENCY_CONFLICT", 409),
        ("INVALID_TRANSITION", 409),
        ("LEASE_EXPIRED", 409),
        ("LEASE_INVALID", 409),
        ("TASK_NOT_DUE", 409),
        ("FIELDS_INVALID", 422),
        ("INVALID_FIELD", 422),
        ("EXECUTION_ENVELOPE_INVALID", 422),
        ("JSON_TOO_DEEP", 422),
        ("BODY_TOO_LARGE", 413),
        ("TOO_MANY_WAITING", 429),
        ("DATABASE_BUSY", 503),
        ("STORAGE_FULL", 503),
        ("INTERNAL_ERROR", 500),
    ],
)
def test_the_status_of_each_code(code: str, status: int) -> None:
    assert status_of(code) == status


def test_the_document_takes_its_bodies_from_the_core_schemas() -> None:
    document = build_document(operations(), version="test")
    schemas = document["components"]["schemas"]
    heartbeat = request_schema("heartbeat")
    body = schemas["HeartbeatBody"]
    # The core's record without what the path (the task) and the token (the acting agent)
    # give, field for field.
    assert body["properties"] == {
        k: v for k, v in heartbeat["properties"].items() if k not in ("task_id", "agent_id")
    }
    assert body["additionalProperties"] is False
    assert "agent_id" not in schemas["ClaimBody"]["properties"]
    for name in ("HeartbeatBody", "ReleaseBody", "SubmitBody", "VerifyBody"):
        assert "agent_id" not in schemas[name]["properties"]
    assert schemas["ClaimBody"]["properties"]["wait_seconds"]["maximum"] == 60
    # Every $ref resolves inside the document.
    text = str(document)
    assert "#/$defs/" not in text
    for path in document["paths"].values():
        for operation in path.values():
            if "requestBody" in operation:
                ref = operation["requestBody"]["content"]["application/json"]["schema"]["$ref"]
                assert ref.removeprefix("#/components/schemas/") in schemas


def test_the_document_refuses_what_the_core_would_and_names_no_value() -> None:
    validators = BodyValidators(build_document(operations(), version="test"))
    secret = "s3cret-lease-token-value-" * 2
    with pytest.raises(LedgerError, match="FIELDS_INVALID") as refused:
        validators.check("HeartbeatBody", {"lease_token": secret + "!", "lease_seconds": 5})
    assert secret not in str(refused.value)
    with pytest.raises(LedgerError, match=r"body\.lease_seconds"):
        validators.check("HeartbeatBody", {"lease_token": "t" * 20, "lease_seconds": 0})
    validators.check("HeartbeatBody", {"lease_token": "t" * 20, "lease_seconds": 5})


def test_a_body_nested_in_another_carries_no_other_bodys_title() -> None:
    schemas = build_document(operations(), version="test")["components"]["schemas"]

    def nested_titles(value: object, depth: int = 0) -> list[str]:
        if isinstance(value, dict):
            own = [value["title"]] if depth and isinstance(value.get("title"), str) else []
            return own + [t for v in value.values() for t in nested_titles(v, depth + 1)]
        if isinstance(value, list):
            return [t for v in value for t in nested_titles(v, depth + 1)]
        return []

    for name, schema in schemas.items():
        assert set(nested_titles(schema)).isdisjoint(schemas), name


@pytest.fixture
def app(tmp_path: Path) -> Iterator[tuple[Starlette, str]]:
    path = tmp_path / "ledger.db"
    with Database(path) as db:
        token = issue_token(db, "owner-1", ["owner", "auditor"])["token"]
    application = create_app(ApiSettings(db_path=str(path)))
    yield application, token
    application.state.backend.close()


def test_a_defect_is_a_500_without_its_internals(
    app: tuple[Starlette, str], monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    application, token = app
    backend = application.state.backend

    def broken(work: Any) -> Any:
        raise RuntimeError("internal detail: /secret/path")

    monkeypatch.setattr(backend, "read_now", broken)

    async def call() -> httpx.Response:
        transport = httpx.ASGITransport(app=application)
        async with httpx.AsyncClient(transport=transport, base_url="http://api") as client:
            return await client.get("/v1/status", headers={"Authorization": f"Bearer {token}"})

    # (Authentication reads too: the defect is met at once.)
    with caplog.at_level(logging.ERROR, logger="aios_ledger.api"):
        answer = asyncio.run(call())
    assert answer.status_code == 500
    assert answer.json()["code"] == "INTERNAL_ERROR"
    assert "secret" not in answer.text
    assert "GET /v1/status" in caplog.text
    assert token not in caplog.text


def test_the_holder_is_decided_in_the_write_with_no_read_of_the_http_layers_own(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A task route reads nothing of its own: whether the caller holds the task is decided by
    the core inside the write, under the row lock. Here the task is handed over between the
    request's arrival and its write (agent-1's lease passes and agent-2 takes it over): agent-1's
    heartbeat, under the lease token it was given, is refused NOT_TASK_HOLDER by the decision.
    A holder read before the write would have seen agent-1 holding the task, and the write
    would then have answered LEASE_INVALID."""
    path = tmp_path / "ledger.db"
    clock = Clock()
    with Database(path) as db:
        tokens = {
            name: issue_token(db, name, ["agent"], any_capability=True)["token"]
            for name in ("agent-1", "agent-2")
        }
    with TaskLedger(path, clock=clock) as ledger:
        ledger.create_task({"task_id": "t1", "goal": "g", "instructions": "i"}, idempotency_key="c")
        claim = ledger.claim(agent_id="agent-1", capabilities=[], lease_seconds=60)
    assert claim is not None and claim["task_id"] == "t1"
    application = create_app(ApiSettings(db_path=str(path), clock=clock))
    backend = application.state.backend
    write_now = backend.write_now
    handed: list[str] = []

    def handing_over(work: Any) -> Any:
        if not handed:
            clock.advance(120)
            taken = write_now(
                lambda s: s.tasks.claim(agent_id="agent-2", capabilities=[], lease_seconds=60)
            )
            handed.append(taken["claimed_by"])
        return write_now(work)

    read_tasks: list[str] = []
    get = TaskLedger.get

    def counted_get(self: TaskLedger, task_id: str) -> Any:
        read_tasks.append(task_id)
        return get(self, task_id)

    monkeypatch.setattr(backend, "write_now", handing_over)
    monkeypatch.setattr(TaskLedger, "get", counted_get)

    async def heartbeat() -> httpx.Response:
        transport = httpx.ASGITransport(app=application)
        async with httpx.AsyncClient(transport=transport, base_url="http://api") as client:
            return await client.post(
                "/v1/tasks/t1/heartbeat",
                json={"lease_token": claim["lease_token"], "lease_seconds": 60},
                headers={"Authorization": f"Bearer {tokens['agent-1']}"},
            )

    try:
        answer = asyncio.run(heartbeat())
    finally:
        backend.close()
    assert handed == ["agent-2"]
    assert answer.status_code == 403, answer.text
    assert answer.json()["code"] == "NOT_TASK_HOLDER"
    assert read_tasks == []  # no read of the task outside the write
    # No task route has a guard of its own before its write.
    for operation in operations():
        if operation.path.startswith("/v1/tasks/{task_id}/") and operation.method == "POST":
            tail = operation.path.rsplit("/", 1)[1]
            if tail in {row.route for row in TASK_OPERATIONS.values()}:
                assert operation.guard is None, operation.path
