"""The OpenAPI 3.1 document of the API, built from the JSON Schemas of the core's request
records, and the validators that hold request bodies to it before the core's own structuring.

An HTTP body is its record's schema without what the path or the token supplies; the records'
`$defs` become `components/schemas`, so that every `$ref` resolves inside the document.
"""

from __future__ import annotations

import copy
import functools
from collections.abc import Callable, Iterable, Mapping
from typing import Any, TypeVar

import attrs
import jsonschema
from aios_ledger.core import LedgerError
from aios_ledger.core.actors import ROLES
from aios_ledger.core.batches import MAX_BATCH
from aios_ledger.core.envelopes import GovernedExecutionBinding
from aios_ledger.core.git.requests import WriteRequest
from aios_ledger.core.projection.decisions import (
    InitialExecutionProjectionRequest,
    SourceCaptureProjectionRecoveryRequest,
)
from aios_ledger.core.runs.evidence import RunCreateRequest, RunEventAppendRequest
from aios_ledger.core.schemas import DIALECT, batch_schema, record_schema
from aios_ledger.core.tasks.operations import TASK_OPERATIONS
from aios_ledger.core.tasks.requests import MAX_CLAIM_BATCH, ClaimRequest, TaskCreateCommand
from aios_ledger.core.tasks.transitions import TaskTransition
from aios_ledger.shell.api.problems import PROBLEM_TYPE
from aios_ledger.shell.api.review_bodies import review_body_schemas

OPENAPI_VERSION = "3.1.0"
MAX_WAIT_SECONDS = 60
_REF_PREFIX = "#/$defs/"
_COMPONENT_PREFIX = "#/components/schemas/"
H = TypeVar("H", bound=Callable[..., Any])


@attrs.frozen
class Query:
    """A query (or header) parameter and its schema."""

    name: str
    schema: Mapping[str, Any]
    location: str = "query"
    required: bool = False


@attrs.frozen
class Operation:
    """One route; `roles` None takes no token. `guard` checks what needs no body before the
    body is read, so that a caller it refuses costs no read, decoding or scan."""

    method: str
    path: str
    operation_id: str
    roles: frozenset[str] | None
    handler: Callable[..., Any]
    summary: str
    body: str | None = None
    query: tuple[Query, ...] = ()
    success: tuple[int, ...] = (200,)
    media: str = "application/json"
    guard: Callable[..., None] | None = None


class Routes:
    """Operations declared on their handlers, `@route("GET /path", roles, summary, ...)`, in the
    document's order; an operation's id is its handler's name in camelCase."""

    def __init__(self) -> None:
        self.operations: list[Operation] = []

    def __call__(
        self, route: str, roles: frozenset[str] | None, summary: str, **options: Any
    ) -> Callable[[H], H]:
        method, path = route.split(" ")

        def declare(handler: H) -> H:
            first, *rest = handler.__name__.split("_")
            operation_id = first + "".join(word.capitalize() for word in rest)
            self.operations.append(
                Operation(method, path, operation_id, roles, handler, summary, **options)
            )
            return handler

        return declare


def task_routes() -> tuple[TaskTransition, ...]:
    """The operations with a route under a task (`POST /v1/tasks/{task_id}/<route>`)."""
    return tuple(row for row in TASK_OPERATIONS.values() if row.route is not None)


def task_body(row: TaskTransition) -> str:
    """The component name of an operation's body: `HeartbeatBody`, `SubmitBody`, ..."""
    return f"{row.name.capitalize()}Body"


def _rewrite_refs(value: Any) -> Any:
    if isinstance(value, dict):
        return {
            key: (
                _COMPONENT_PREFIX + item[len(_REF_PREFIX) :]
                if key == "$ref" and isinstance(item, str) and item.startswith(_REF_PREFIX)
                else _rewrite_refs(item)
            )
            for key, item in value.items()
        }
    if isinstance(value, list):
        return [_rewrite_refs(item) for item in value]
    return value


def _hoist(schema: Mapping[str, Any], components: dict[str, Any]) -> dict[str, Any]:
    """The schema with its `$defs` moved into `components` and its refs pointed there."""
    body = {k: v for k, v in schema.items() if k not in ("$defs", "$schema", "$comment")}
    for name, definition in schema.get("$defs", {}).items():
        rewritten = _rewrite_refs(definition)
        if components.setdefault(name, rewritten) != rewritten:
            raise TypeError(f"two different schemas named {name}")
    return _rewrite_refs(body)  # type: ignore[no-any-return]


def _without(
    schema: dict[str, Any],
    fields: Iterable[str] = (),
    *,
    optional: Iterable[str] = (),
    extra: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """An object schema without `fields`, with `optional` no longer required, plus `extra`."""
    result = copy.deepcopy(schema)
    gone = set(fields)
    loose = gone | set(optional)
    result["properties"] = {k: v for k, v in result["properties"].items() if k not in gone}
    result["properties"].update(extra or {})
    result["required"] = [name for name in result.get("required", []) if name not in loose]
    return result


def _record(record: type, components: dict[str, Any]) -> dict[str, Any]:
    return _hoist(record_schema(record), components)


def body_schemas() -> tuple[dict[str, Any], dict[str, Any]]:
    """The request bodies by component name, and the components their refs name."""
    defs: dict[str, Any] = {}
    no_task = ("task_id",)
    bodies: dict[str, Any] = {
        "TaskCreateBody": _hoist(batch_schema(TaskCreateCommand, max_items=MAX_BATCH), defs),
        "ClaimBody": _without(
            _record(ClaimRequest, defs),
            ("agent_id",),
            extra={
                "wait_seconds": {
                    "type": "integer",
                    "minimum": 0,
                    "maximum": MAX_WAIT_SECONDS,
                    "default": 0,
                },
                "limit": {"type": "integer", "minimum": 1, "maximum": MAX_CLAIM_BATCH},
            },
        ),
        **{
            task_body(row): _without(_record(row.request, defs), ("task_id", "agent_id"))
            for row in task_routes()
        },
        "BindingBody": _record(GovernedExecutionBinding, defs),
        "ProjectionBody": _record(InitialExecutionProjectionRequest, defs),
        "ProjectionRecoveryBody": _record(SourceCaptureProjectionRecoveryRequest, defs),
        "RunCreateBody": _without(
            _record(RunCreateRequest, defs), optional=("session_id", "run_id")
        ),
        "RunEventBody": _without(_record(RunEventAppendRequest, defs), ("run_id",)),
        # The governed-write routes (shell/api/governed.py).
        "ProposalBody": {
            "type": "object",
            "additionalProperties": False,
            # The lease token travels in a header; in the body only for older clients.
            "required": ["bundle_base64"],
            "properties": {
                "lease_token": {"type": "string", "minLength": 1, "maxLength": 200},
                "bundle_base64": {"type": "string", "minLength": 1},
            },
        },
        "GovernedWriteBody": _without(_record(WriteRequest, defs), no_task),
        # A witness's cosignature: the checkpoint note with its signature line added.
        "CosignatureBody": {
            "type": "object",
            "additionalProperties": False,
            "required": ["note"],
            "properties": {"note": {"type": "string", "minLength": 1, "maxLength": 65536}},
        },
    }
    bodies.update(review_body_schemas())
    for name, schema in bodies.items():
        schema.setdefault("title", name)
    return bodies, defs


PROBLEM_SCHEMA: dict[str, Any] = {
    "title": "Problem",
    "description": "RFC 9457 problem details carrying the ledger's stable code.",
    "type": "object",
    "properties": {
        "type": {"type": "string"},
        "title": {"type": "string"},
        "status": {"type": "integer"},
        "code": {"type": "string", "pattern": "^[A-Z][A-Z0-9_]*$"},
        "detail": {"type": "string"},
        "field": {"type": "string"},
    },
    "required": ["type", "title", "status", "code", "detail"],
}


_PATH_PARAMETER = {"type": "string", "minLength": 1, "maxLength": 200}


def _parameters(operation: Operation) -> list[dict[str, Any]]:
    in_path = [
        Query(part[1:-1], _PATH_PARAMETER, location="path", required=True)
        for part in operation.path.split("/")
        if part.startswith("{") and part.endswith("}")
    ]
    return [
        {
            "name": each.name,
            "in": each.location,
            "required": each.required,
            "schema": dict(each.schema),
        }
        for each in (*in_path, *operation.query)
    ]


# One server-sent event's fields, as OpenAPI 3.1 describes a `text/event-stream` answer.
_EVENT_SCHEMA: dict[str, Any] = {
    "type": "object",
    "required": ["data"],
    "properties": {
        "data": {"type": "string", "contentMediaType": "application/json"},
        "event": {"type": "string"},
        "id": {"type": "string"},
        "retry": {"type": "integer"},
    },
}


def _responses(operation: Operation) -> dict[str, Any]:
    responses: dict[str, Any] = {}
    for status in operation.success:
        if status == 204:
            responses["204"] = {"description": "nothing to answer (no task to claim)"}
        else:
            schema = {
                "application/json": {"type": ["object", "array"]},
                "text/event-stream": _EVENT_SCHEMA,
            }.get(operation.media, {"type": "string"})
            responses[str(status)] = {
                "description": "the answer",
                "content": {operation.media: {"schema": schema}},
            }
    responses["default"] = {
        "description": "a refusal",
        "content": {PROBLEM_TYPE: {"schema": {"$ref": _COMPONENT_PREFIX + "Problem"}}},
    }
    return responses


def build_document(operations: Iterable[Operation], *, version: str) -> dict[str, Any]:
    bodies, defs = body_schemas()
    paths: dict[str, Any] = {}
    for operation in operations:
        entry: dict[str, Any] = {
            "operationId": operation.operation_id,
            "summary": operation.summary,
            "parameters": _parameters(operation),
            "responses": _responses(operation),
        }
        if operation.roles is None:
            entry["security"] = []
        else:
            entry["x-roles"] = sorted(operation.roles, key=ROLES.index)
        if operation.body is not None:
            entry["requestBody"] = {
                "required": True,
                "content": {
                    "application/json": {"schema": {"$ref": _COMPONENT_PREFIX + operation.body}}
                },
            }
        paths.setdefault(operation.path, {})[operation.method.lower()] = entry
    return {
        "openapi": OPENAPI_VERSION,
        "jsonSchemaDialect": DIALECT,
        "info": {
            "title": "aios-ledger",
            "version": version,
            "description": "The governed write API of the aios-ledger task ledger.",
        },
        "paths": paths,
        "components": {
            "schemas": {**defs, **bodies, "Problem": PROBLEM_SCHEMA},
            "securitySchemes": {"bearer": {"type": "http", "scheme": "bearer"}},
        },
        "security": [{"bearer": []}],
    }


class BodyValidators:
    """A validator per body component, over the document's own schemas."""

    def __init__(self, document: Mapping[str, Any]) -> None:
        self._components = document["components"]

    @functools.cache  # noqa: B019 (one instance per app, a handful of names)
    def _validator(self, name: str) -> jsonschema.Draft202012Validator:
        root = {
            "$schema": DIALECT,
            "$ref": _COMPONENT_PREFIX + name,
            "components": {"schemas": self._components["schemas"]},
        }
        return jsonschema.Draft202012Validator(root)

    def check(self, name: str, body: object) -> None:
        """Refuse a body the schema does not describe, naming the place of the first problem."""

        def place(error: jsonschema.ValidationError) -> str:
            path = error.absolute_path
            return "body" + "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in path)

        refuse_invalid(self._validator(name), body, place)


def refuse_invalid(
    validator: jsonschema.Draft202012Validator,
    value: object,
    place: Callable[[jsonschema.ValidationError], str],
) -> None:
    """FIELDS_INVALID naming the `place` of the first violation and what it fails, never the
    value (it may be a lease token)."""
    error = jsonschema.exceptions.best_match(validator.iter_errors(value))
    if error is None:
        return
    # The message names keys only for these; any other would echo the value.
    if error.validator in ("required", "additionalProperties"):
        why = error.message
    else:
        why = f"fails {error.validator} {error.validator_value!r}"
    raise LedgerError("FIELDS_INVALID", f"{place(error)}: {why[:300]}")
