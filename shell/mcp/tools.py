"""The tools `aios-ledger mcp` offers a model, one table of HTTP API calls made with the
caller's own token, so the ledger decides everything.

A model may repeat a call after losing its answer, so a write without an explicit
`idempotency_key` derives one from what it says, and a keyed claim's lease token is an HMAC of
the bearer token and the key: the same call twice is one write.
"""

from __future__ import annotations

import base64
import hmac
from collections.abc import Callable, Mapping
from typing import Any, cast

import attrs
import jsonschema
from aios_ledger.core import LedgerError
from aios_ledger.core.actors import AGENT, REVIEWER
from aios_ledger.core.digests import sha256_hex
from aios_ledger.core.envelopes import verify_execution_envelope
from aios_ledger.core.kinds import MAX_IDENTIFIER
from aios_ledger.core.schemas import record_schema
from aios_ledger.core.tasks.attempts import evidence_run
from aios_ledger.core.tasks.operations import TASK_OPERATIONS
from aios_ledger.core.tasks.requests import TaskRequest
from aios_ledger.core.tasks.results import RESULT_CONTRACTS
from aios_ledger.core.tasks.transitions import TaskTransition
from aios_ledger.shell.api.openapi import MAX_WAIT_SECONDS, refuse_invalid
from aios_ledger.shell.contracts import result_contract
from aios_ledger.shell.remote.client import LedgerClient, api_path

ANY_ROLE = frozenset({AGENT, REVIEWER})
DEFAULT_LEASE_SECONDS = 300
PLAIN_SUBMIT = str(TASK_OPERATIONS["submit"].tool)


@attrs.frozen
class Caller:
    """Who calls a tool: the token's name and roles, as whoami gave them, and the token."""

    name: str
    roles: frozenset[str]
    token: str = attrs.field(repr=False)


Handler = Callable[[LedgerClient, Mapping[str, Any], Caller], dict[str, Any]]


@attrs.frozen
class LedgerTool:
    name: str
    description: str
    roles: frozenset[str]
    input_schema: Mapping[str, Any]
    handler: Handler
    read_only: bool
    # The schema shown but for a submit's result, which only the ledger judges.
    checked: Mapping[str, Any] = attrs.field(
        default=attrs.Factory(lambda tool: tool.input_schema, takes_self=True)
    )


_TEXT = {"type": "string", "minLength": 1, "maxLength": MAX_IDENTIFIER}


# What a model is told of a request's fields, and the defaults a tool fills in, over the
# request's own schema.
_TOLD: Mapping[str, Mapping[str, Any]] = {
    "task_id": {"description": "the task's id"},
    "lease_token": {"description": "the lease token claim_task answered"},
    "lease_seconds": {
        "default": DEFAULT_LEASE_SECONDS,
        "description": "how long the lease lasts from now",
    },
    "idempotency_key": {
        "description": "optional: the same key on a repeated call gets the first call's answer"
    },
    "reason": {"description": "why, for the task's history"},
    "expected_result_digest": {
        "description": "the result_digest you judged: refused if it changed"
    },
}
TASK_ID = {**_TEXT, **_TOLD["task_id"]}
LEASE_SECONDS = {"type": "integer", "minimum": 1, **_TOLD["lease_seconds"]}
IDEMPOTENCY_KEY = {**_TEXT, **_TOLD["idempotency_key"]}


def _object(required: tuple[str, ...], **properties: Mapping[str, Any]) -> dict[str, Any]:
    return {
        "type": "object",
        "additionalProperties": False,
        "required": list(required),
        "properties": dict(properties),
    }


def check_arguments(tool: LedgerTool, arguments: object) -> Mapping[str, Any]:
    """The arguments, if they meet the tool's schema; FIELDS_INVALID naming the place of the
    first violation, and what it fails, never the value (it may be a lease token)."""
    if not isinstance(arguments, Mapping):
        raise LedgerError("FIELDS_INVALID", "a tool's arguments are a JSON object")
    validator = jsonschema.Draft202012Validator(tool.checked)
    refuse_invalid(validator, dict(arguments), lambda error: f"{tool.name}: {error.json_path}")
    return arguments


def _key(kind: str, caller: Caller, **parts: object) -> str:
    return f"mcp-{kind}:" + sha256_hex({"agent": caller.name, **parts})


def claim_lease_token(bearer: str, idempotency_key: str) -> str:
    """A keyed claim's lease token: the same for the same token and key, unguessable without
    the bearer token."""
    mac = hmac.new(bearer.encode(), b"mcp-claim-lease\0" + idempotency_key.encode(), "sha256")
    return base64.urlsafe_b64encode(mac.digest()).decode().rstrip("=")


def submit_tool_of(envelope: object) -> str:
    """The submit tool whose input schema is the contract a task's results must meet."""
    if isinstance(envelope, Mapping) and envelope.get("action") in RESULT_CONTRACTS:
        return f"submit_{envelope['action']}_result"
    return PLAIN_SUBMIT


def _envelope(task: Mapping[str, Any]) -> dict[str, Any] | None:
    """The task's execution envelope, re-derived and checked (`EXECUTION_ENVELOPE_INVALID`)."""
    metadata = task.get("metadata")
    if not isinstance(metadata, Mapping) or "execution" not in metadata:
        return None
    return dict(verify_execution_envelope(metadata["execution"]))


def _submitting(envelope: Mapping[str, Any] | None) -> dict[str, Any]:
    """The result contract a task's results must meet, and the tool that submits them."""
    contract = None if envelope is None else RESULT_CONTRACTS.get(str(envelope.get("action")))
    return {"result_contract": contract, "submit_with": submit_tool_of(envelope)}


# -- the agent's tools --------------------------------------------------------------------


def _claim(client: LedgerClient, arguments: Mapping[str, Any], caller: Caller) -> dict[str, Any]:
    capabilities = list(arguments["capabilities"])
    key = arguments.get("idempotency_key")
    claimed = client.claim(
        agent_id=caller.name,
        capabilities=capabilities,
        lease_seconds=arguments.get("lease_seconds", DEFAULT_LEASE_SECONDS),
        task_id=arguments.get("task_id"),
        idempotency_key=key,
        lease_token=None if key is None else claim_lease_token(caller.token, key),
        wait_seconds=arguments.get("wait_seconds", 0),
    )
    if claimed is None:
        idle = client.idle_reason(capabilities)
        return {"claimed": False, "idle": idle.public(), "why": idle.text()}
    return {"claimed": True, "task": dict(claimed), **_submitting(claimed["envelope"])}


def read_task(client: LedgerClient, task_id: str) -> dict[str, Any]:
    """The task, its checked envelope, its result contract and the tool that submits to it."""
    task = dict(client.get(task_id))
    envelope = _envelope(task)
    return {"task": task, "envelope": envelope, **_submitting(envelope)}


def _read_evidence(
    client: LedgerClient, arguments: Mapping[str, Any], caller: Caller
) -> dict[str, Any]:
    """The events of an attempt's evidence run (`T@N`; the task's current attempt by default)."""
    task_id = arguments["task_id"]
    attempt = arguments.get("attempt")
    if attempt is None:
        attempt = int(client.get(task_id)["attempt"])
    run_id = evidence_run(task_id, attempt)
    events = client.get_json(api_path("runs", run_id, "events"))
    return {"task_id": task_id, "attempt": attempt, "run_id": run_id, "events": events}


# -- the reviewer's tools -----------------------------------------------------------------


def _candidates(
    client: LedgerClient, arguments: Mapping[str, Any], caller: Caller
) -> dict[str, Any]:
    limit = str(arguments.get("limit", 10))
    tasks = client.call_json("GET", api_path("review-candidates"), params={"limit": limit})
    return {"tasks": tasks}


def _review_evidence(
    client: LedgerClient, arguments: Mapping[str, Any], caller: Caller
) -> dict[str, Any]:
    body = {"task_id": arguments["task_id"], "attempt": arguments["attempt"]}
    evidence = client.call_json("POST", api_path("review-evidence"), body=body)
    return {"evidence": evidence}


def _submit_tool(name: str, what: str, result_schema: Mapping[str, Any]) -> LedgerTool:
    row = TASK_OPERATIONS["submit"]
    checked = request_schema(row, result={"type": "object"})
    return LedgerTool(
        name=name,
        description=f"Submit the result of a task you hold ({what}); the ledger checks it "
        "and a reviewer verifies it. A repeat of the same result is answered once.",
        roles=frozenset({AGENT}),
        input_schema=request_schema(row, result=result_schema),
        checked=checked,
        handler=_applies(row, checked),
        read_only=False,
    )


def _applies(row: TaskTransition, schema: Mapping[str, Any]) -> Handler:
    """The handler of an operation's tool: its arguments, with the schema's defaults for what
    they leave out, are the request; a keyed one called without a key is filed under one derived
    from what the call says, so that the same call twice is one write."""
    properties: Mapping[str, Any] = schema["properties"]
    defaults = {name: each["default"] for name, each in properties.items() if "default" in each}
    said = [name for name in properties if name != "idempotency_key"]
    build = cast(Callable[[object], TaskRequest[Any]], row.request.from_mapping)

    def handle(
        client: LedgerClient, arguments: Mapping[str, Any], caller: Caller
    ) -> dict[str, Any]:
        mapping = {**defaults, **arguments}
        if row.keyed and not mapping.get("idempotency_key"):
            parts = {name: arguments.get(name) for name in said}
            mapping["idempotency_key"] = _key(row.name, caller, **parts)
        return dict(client.apply(build(mapping)))

    return handle


# Request fields a tool does not ask for: the acting agent, whom the token names, and what an
# attempt spent, which the model's host measures, not the model.
_NOT_ASKED = frozenset({"agent_id", "usage"})


def request_schema(row: TaskTransition, **replaced: Mapping[str, Any]) -> dict[str, Any]:
    """The schema of an operation's request as its tool takes it, `replaced` fields aside: a
    keyed one's key optional, as `_applies` derives one, and so is a field `_TOLD` gives a
    default; each field with what `_TOLD` tells of it."""
    record = record_schema(row.request)
    optional = {*_NOT_ASKED, *(name for name, told in _TOLD.items() if "default" in told)}
    if row.keyed:
        optional.add("idempotency_key")
    properties = {
        name: {**replaced.get(name, each), **_TOLD.get(name, {})}
        for name, each in record["properties"].items()
        if name not in _NOT_ASKED
    }
    required = (name for name in record.get("required", []) if name not in optional)
    return _object(tuple(required), **properties)


def operation_tool(
    row: TaskTransition,
    description: str | None = None,
    schema: dict[str, Any] | None = None,
    handler: Handler | None = None,
) -> LedgerTool:
    """The tool of an operation of the transition table: its name and role are the row's; by
    default its description is the row's summary, its schema the request's and its handler
    applies the request."""
    assert row.tool is not None and row.role is not None
    schema = request_schema(row) if schema is None else schema
    return LedgerTool(
        row.tool,
        f"{row.summary[:1].upper()}{row.summary[1:]}." if description is None else description,
        frozenset({row.role}),
        schema,
        _applies(row, schema) if handler is None else handler,
        read_only=False,
    )


def _tools() -> tuple[LedgerTool, ...]:
    """The tools in the order a model is shown them; an operation whose row names a tool and
    that is not written here gets the default one (`operation_tool`)."""
    op = TASK_OPERATIONS
    reviewer = frozenset({REVIEWER})
    contract_submits = tuple(
        _submit_tool(
            f"submit_{action}_result",
            f"a task whose envelope's action is {action}: the result meets {contract}",
            result_contract(contract),
        )
        for action, contract in sorted(RESULT_CONTRACTS.items())
    )
    written = (
        operation_tool(
            op["claim"],
            "Claim the next task your capabilities allow (or the one named), waiting up to "
            "wait_seconds for one. The answer holds the task, its envelope, the lease token "
            "the other tools need, and which submit tool takes its result.",
            _object(
                ("capabilities",),
                capabilities={
                    "type": "array",
                    "items": _TEXT,
                    "maxItems": 100,
                    "description": "the capabilities you offer (within your token's grant)",
                },
                lease_seconds=LEASE_SECONDS,
                wait_seconds={
                    "type": "integer",
                    "minimum": 0,
                    "maximum": MAX_WAIT_SECONDS,
                    "default": 0,
                    "description": "long poll: how long to wait for a task",
                },
                task_id={**TASK_ID, "description": "claim this task only"},
                idempotency_key=IDEMPOTENCY_KEY,
            ),
            _claim,
        ),
        operation_tool(
            op["heartbeat"],
            "Extend the lease of a task you hold; a lease that lapses returns the task to "
            "the queue.",
        ),
        LedgerTool(
            "read_task",
            "Read a task, its execution envelope (checked), the result contract its results "
            "must meet and the submit tool that takes them.",
            ANY_ROLE,
            _object(("task_id",), task_id=TASK_ID),
            lambda client, arguments, caller: read_task(client, arguments["task_id"]),
            read_only=True,
        ),
        LedgerTool(
            "read_evidence",
            "Read the evidence recorded for an attempt of a task (its run's events).",
            ANY_ROLE,
            _object(
                ("task_id",),
                task_id=TASK_ID,
                attempt={"type": "integer", "minimum": 1, "description": "default: current"},
            ),
            _read_evidence,
            read_only=True,
        ),
        _submit_tool(PLAIN_SUBMIT, "a task without an execution envelope", {"type": "object"}),
        *contract_submits,
        operation_tool(
            op["release"],
            "Give a task you hold back to the queue without a result.",
        ),
        LedgerTool(
            "list_review_candidates",
            "The submitted tasks waiting for a reviewer's verdict.",
            reviewer,
            _object((), limit={"type": "integer", "minimum": 1, "maximum": 100, "default": 10}),
            _candidates,
            read_only=True,
        ),
        LedgerTool(
            "read_review_evidence",
            "The evidence snapshot of a submitted attempt, as a review reads it.",
            reviewer,
            _object(
                ("task_id", "attempt"), task_id=TASK_ID, attempt={"type": "integer", "minimum": 1}
            ),
            _review_evidence,
            read_only=True,
        ),
        operation_tool(
            op["verify"],
            "Judge a submitted result: SUCCEEDED, NEEDS_REWORK (back to the queue while "
            "attempts remain) or FAILED. Nobody verifies a result they submitted.",
        ),
    )
    named = {tool.name for tool in written}
    return (
        *written,
        *(
            operation_tool(row)
            for row in op.values()
            if row.tool is not None and row.tool not in named
        ),
    )


TOOLS: tuple[LedgerTool, ...] = _tools()
TOOLS_BY_NAME: Mapping[str, LedgerTool] = {tool.name: tool for tool in TOOLS}


def tools_for(roles: frozenset[str]) -> tuple[LedgerTool, ...]:
    """The tools a token of these roles is shown (calling another is the ledger's to refuse)."""
    return tuple(tool for tool in TOOLS if tool.roles & roles)
