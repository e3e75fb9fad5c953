"""Each operation of the task lifecycle is one object, its row of `TASK_OPERATIONS`: its request
record, its reads, its decision and its doors; and a request is structured once."""

from __future__ import annotations

from typing import Any

import attrs
import pytest
from aios_ledger.core import LedgerError
from aios_ledger.core.structuring import check_built, was_structured
from aios_ledger.core.tasks.decisions import TaskState
from aios_ledger.core.tasks.operations import TASK_OPERATIONS, operation_of
from aios_ledger.core.tasks.requests import (
    ClaimBatchRequest,
    ClaimRequest,
    HeartbeatRequest,
    SubmitRequest,
    VerifyRequest,
)
from aios_ledger.core.tasks.transitions import Scope
from aios_ledger.shell.api.app import operations
from aios_ledger.shell.cli import build_parser
from aios_ledger.shell.cli_help import subcommands
from aios_ledger.shell.db.statements import statements
from aios_ledger.shell.mcp.tools import TOOLS_BY_NAME

TOKEN = "t" * 32
SUBMIT = {"task_id": "t1", "lease_token": TOKEN, "result": {}, "idempotency_key": "s"}


def test_each_request_record_names_its_operation() -> None:
    for name, row in TASK_OPERATIONS.items():
        assert row.request.what == name
        assert operation_of(object.__new__(row.request)) is row
    assert operation_of(object.__new__(ClaimBatchRequest)) is TASK_OPERATIONS["claim"]
    with pytest.raises(LedgerError, match="FIELDS_INVALID"):
        operation_of({"task_id": "t1"})


def test_the_ledger_reads_for_an_operation_what_its_row_names() -> None:
    usage = {"input_tokens": 1, "output_tokens": 2}
    requests: list[Any] = [
        SubmitRequest.from_mapping(SUBMIT),
        SubmitRequest.from_mapping({**SUBMIT, "usage": usage}),
        VerifyRequest.from_mapping(
            {"task_id": "t1", "decision": "SUCCEEDED", "reason": "r", "idempotency_key": "v"}
        ),
        VerifyRequest.from_mapping(
            {
                "task_id": "t1",
                "decision": "SUCCEEDED",
                "reason": "r",
                "idempotency_key": "v",
                "agent_id": "reviewer",
            }
        ),
    ]
    found = [[read.into for read in operation_of(request).reads(request)] for request in requests]
    assert found == [["proposal"], ["proposal", "spent"], [], ["result_author"]]
    state_fields = set(attrs.fields_dict(TaskState))
    for request in requests:
        for read in operation_of(request).reads(request):
            assert read.into in state_fields
            assert read.statement in statements()


def test_every_door_finds_the_operation_in_its_row() -> None:
    commands = {
        f"{name} {sub}".strip()
        for name, (parser, _) in subcommands(build_parser()).items()
        for sub in ("", *subcommands(parser))
    }
    paths = {route.path for route in operations()}
    for row in TASK_OPERATIONS.values():
        assert row.command in commands, row.name
        if row.route is not None:
            assert f"/v1/tasks/{{task_id}}/{row.route}" in paths
        if row.tool is not None:
            assert TOOLS_BY_NAME[row.tool].roles == {row.role}
        assert (row.scope is Scope.TASK) == (row.name not in ("claim", "expire"))


def test_a_request_is_structured_once() -> None:
    structured = HeartbeatRequest.from_mapping(
        {"task_id": "t1", "lease_token": TOKEN, "lease_seconds": 60}
    )
    assert was_structured(structured)
    check_built(structured, what="heartbeat")  # nothing read again
    built = HeartbeatRequest(task_id="t1", lease_token=TOKEN, lease_seconds=60)  # type: ignore[arg-type]
    assert built == structured and not was_structured(built)
    # A record equal to a structured one is still checked: True is not 1.
    sneaky = HeartbeatRequest(task_id="t1", lease_token=TOKEN, lease_seconds=True)  # type: ignore[arg-type]
    assert sneaky == HeartbeatRequest.from_mapping(
        {"task_id": "t1", "lease_token": TOKEN, "lease_seconds": 1}
    )
    with pytest.raises(LedgerError, match="lease_seconds"):
        check_built(sneaky, what="heartbeat")


def test_a_claim_built_directly_is_held_to_its_rules_across_fields() -> None:
    keyed = ClaimRequest(agent_id="w1", capabilities=[], lease_seconds=60, idempotency_key="k")  # type: ignore[arg-type]
    with pytest.raises(LedgerError, match="LEASE_TOKEN_REQUIRED"):
        keyed.check()
    with pytest.raises(LedgerError, match="LEASE_TOKEN_REQUIRED"):
        ClaimRequest.from_mapping(
            {"agent_id": "w1", "capabilities": [], "lease_seconds": 60, "idempotency_key": "k"}
        )
