"""The ASGI application: `create_app(settings)` builds a Starlette app over one ledger.

Every route is declared on its handler (`@route`), and one wrapper (`_endpoint`) does what is
common so that no route can skip it: authenticate, check the role, read and validate the body
within its limits, run the handler, turn a `LedgerError` into problem+json. Whether an agent
holds a task is decided by the core inside the write, never by a separate read here, so it
cannot race.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import inspect
import json
import logging
import tempfile
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable
from importlib.metadata import version
from typing import IO, Any, cast

import attrs
from aios_ledger.core import ClaimBatchRequest, ClaimRequest, LedgerError, TaskCreateCommand
from aios_ledger.core.actors import AGENT, AUDITOR, OWNER, ROLES, VIA_HTTP, VIA_MCP, WITNESS
from aios_ledger.core.batches import structure_batch
from aios_ledger.core.jsonvalue import loads_document
from aios_ledger.core.projection import (
    InitialExecutionProjectionRequest,
    SourceCaptureProjectionRecoveryRequest,
)
from aios_ledger.core.proofs import VerifierKey
from aios_ledger.core.runs.evidence import MAX_EVENTS_PAGE
from aios_ledger.core.tasks.attempts import refuse_reserved
from aios_ledger.core.tasks.listing import DEFAULT_PAGE, MAX_CURSOR, MAX_PAGE, TaskPageRequest
from aios_ledger.core.tasks.offers import operation_roles
from aios_ledger.core.tasks.operations import TASK_OPERATIONS
from aios_ledger.core.tasks.requests import TaskRequest
from aios_ledger.core.tasks.transitions import TaskStatus, TaskTransition
from aios_ledger.shell.actors import VIA_HEADER, acting_as, token_actor
from aios_ledger.shell.api.backend import ApiSettings, Backend, Stores
from aios_ledger.shell.api.metrics import ApiMetrics
from aios_ledger.shell.api.openapi import (
    BodyValidators,
    Operation,
    Query,
    Routes,
    build_document,
    task_body,
    task_routes,
)
from aios_ledger.shell.api.principals import presented_credential, request_principal
from aios_ledger.shell.api.problems import problem_response, refusal_response
from aios_ledger.shell.api.stream import EVENT_STREAM_TYPE, LAST_EVENT_ID, EventFeed, open_stream
from aios_ledger.shell.api.tokens import Principal
from aios_ledger.shell.auxiliary import service as auxiliary
from aios_ledger.shell.clock import read_clock
from aios_ledger.shell.db import merkle
from aios_ledger.shell.log.export import export_log
from aios_ledger.shell.log.verification import ledger_head, verify_log
from aios_ledger.shell.projection.bindings import register_binding, registered_binding
from aios_ledger.shell.tasks.listing import read_task_page
from aios_ledger.shell.tasks.spend import read_spend
from aios_ledger.shell.work.status import read_status
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest
from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import Response, StreamingResponse
from starlette.routing import Route

LOG = logging.getLogger("aios_ledger.api")

# Every role of the ledger's own users; a witness token takes only the checkpoint routes.
READERS = frozenset(ROLES) - {WITNESS}
# The Merkle proofs: the ledger's roles and a witness, which checks consistency proofs.
PROOF_READERS = READERS | {WITNESS}
AUDIT = frozenset({AUDITOR, OWNER})
EXPORT_CHUNK = 64 * 1024
EXPORT_SPOOL_BYTES = 8 * 1024 * 1024  # an export larger than this is spooled to disk
# How many rows of each table GET /v1/spend holds (status holds SPEND_ROWS).
MAX_SPEND_ROWS = 1000


@attrs.frozen
class Answer:
    """A handler's JSON answer; `wakes`: the write may have made work claimable."""

    value: Any
    status: int = 200
    wakes: bool = False


@attrs.frozen
class Later:
    """A plain handler's answer to await on the event loop (a long poll that found nothing)."""

    wait: Callable[[], Awaitable[Answer | Response]]


@attrs.frozen
class Call:
    request: Request
    principal: Principal | None
    body: Any
    backend: Backend

    def path(self, name: str) -> str:
        return str(self.request.path_params[name])

    def query(self, name: str) -> str | None:
        return self.request.query_params.get(name)

    def query_int(self, name: str, default: int) -> int:
        text = self.request.query_params.get(name)
        if text is None:
            return default
        if not text.isascii() or not text.lstrip("-").isdigit() or len(text) > 12:
            raise LedgerError("FIELDS_INVALID", f"{name}: must be an integer")
        return int(text)

    @property
    def name(self) -> str:
        assert self.principal is not None  # only on routes that take a token
        return self.principal.name


# Most handlers are plain functions, run on the worker thread with the token's check.
PlainHandler = Callable[[Call], Answer | Response | Later]


def _json(value: Any, status: int = 200) -> Response:
    return Response(
        json.dumps(value, separators=(",", ":"), ensure_ascii=False, allow_nan=False),
        status_code=status,
        media_type="application/json",
    )


def whole_number(text: str | None, name: str) -> int | None:
    """A tree size or an event id from the path or the query; None when absent."""
    if text is None:
        return None
    if not text.isascii() or not text.isdigit() or len(text) > 18:
        raise LedgerError("FIELDS_INVALID", f"{name}: must be a whole number")
    return int(text)


# -- the routes, in the document's order ------------------------------------------------------

route = Routes()
AGENTS, OWNERS = frozenset({AGENT}), frozenset({OWNER})
_OPERATION_IDS = {"submit": "submitResult"}
_WHOLE = {"type": "integer", "minimum": 0}
_TIME = {"type": "string", "format": "date-time"}
_FILTER_TEXT = {"type": "string", "minLength": 1, "maxLength": 200}
_LIMIT = Query("limit", {"type": "integer", "minimum": 1})
TASK_LIST_QUERY = (
    Query("status", {"type": "string", "minLength": 1, "maxLength": 40}),
    Query("agent", _FILTER_TEXT),
    Query("capability", _FILTER_TEXT),
    Query("repository", _FILTER_TEXT),
    Query("created_from", _TIME),
    Query("created_to", _TIME),
    Query("updated_from", _TIME),
    Query("updated_to", _TIME),
    Query("search", _FILTER_TEXT),
    Query("limit", {"type": "integer", "minimum": 1, "maximum": MAX_PAGE}),
    Query("cursor", {"type": "string", "minLength": 1, "maxLength": MAX_CURSOR}),
)
EVENT_STREAM_QUERY = (
    Query("after", _WHOLE),
    Query("task_id", {"type": "string", "minLength": 1, "maxLength": 200}),
    Query("typed", {"type": "string", "enum": ["true", "false"]}),
    Query("Last-Event-ID", {"type": "string", "pattern": "^[0-9]{1,18}$"}, location="header"),
)
AUXILIARY_RUNS_QUERY = (
    Query("state", {"type": "string", "maxLength": 40}),
    Query("session_id", {"type": "string", "maxLength": 200}),
    Query("run_id", {"type": "string", "maxLength": 200}),
    _LIMIT,
)


@route("GET /v1/health", None, "liveness")
async def health(call: Call) -> Answer:
    """Liveness: the process answers (its database may still refuse writes: see `ready`)."""
    return Answer({"status": "ok"})


@route("GET /v1/ready", None, "readiness: writes can be committed now")
def ready(call: Call) -> Answer:
    call.backend.ready_now()
    return Answer({"status": "ready", "integration": call.backend.integration_now()})


@route("GET /openapi.json", None, "this document")
async def openapi(call: Call) -> Response:
    document: bytes = call.request.app.state.openapi_bytes
    return Response(document, media_type="application/json")


@route("GET /metrics", AUDIT, "Prometheus metrics", media="text/plain")
async def metrics(call: Call) -> Response:
    metrics: ApiMetrics = call.request.app.state.metrics
    metrics.waiting.set(call.backend.waiting_now())
    text = await run_in_threadpool(generate_latest, metrics.registry)
    return Response(text, media_type=CONTENT_TYPE_LATEST)


@route(
    "POST /v1/tasks",
    operation_roles("create"),
    TASK_OPERATIONS["create"].summary,
    body="TaskCreateBody",
    success=(201,),
)
def create_tasks(call: Call) -> Answer:
    body = call.body
    if isinstance(body, list):
        commands = structure_batch(body, TaskCreateCommand.from_mapping)
        answers: Any = call.backend.write_now(lambda s: s.tasks.apply_all(commands))
    else:
        command = TaskCreateCommand.from_mapping(body)
        answers = call.backend.write_now(lambda s: s.tasks.apply(command))
    return Answer(answers, 201, wakes=True)


@route(
    "GET /v1/tasks",
    READERS,
    "a page of tasks, newest first, filtered; next_cursor pages on",
    query=TASK_LIST_QUERY,
)
def list_tasks(call: Call) -> Answer:
    mapping: dict[str, object] = {
        query.name: call.query(query.name)
        for query in TASK_LIST_QUERY
        if call.query(query.name) is not None
    }
    if "limit" in mapping:
        mapping["limit"] = call.query_int("limit", DEFAULT_PAGE)
    request = TaskPageRequest.from_mapping(mapping)
    key = call.backend.cursor_key
    return Answer(call.backend.read_now(lambda s: read_task_page(s.db, request, key)))


@route("GET /v1/tasks/{task_id}", READERS, "one task")
def get_task(call: Call) -> Answer:
    return Answer(call.backend.read_now(lambda s: s.tasks.get(call.path("task_id"))))


@route(
    "GET /v1/events/stream",
    READERS,
    "the ledger's events as they are sealed (server-sent events)",
    query=EVENT_STREAM_QUERY,
    media=EVENT_STREAM_TYPE,
)
async def event_stream(call: Call) -> Response:
    """`Last-Event-ID` wins over `?after=`, as a browser's EventSource reconnects to the URL it
    opened and sends the last id in the header."""
    header = call.request.headers.get(LAST_EVENT_ID) or None
    if header is not None:
        after = whole_number(header.strip(), "Last-Event-ID")
    else:
        after = whole_number(call.query("after"), "after")
    typed = call.query("typed")
    if typed not in (None, "true", "false"):
        raise LedgerError("FIELDS_INVALID", "typed: must be true or false")
    feed: EventFeed = call.request.app.state.event_feed
    return await open_stream(
        call.request,
        call.backend,
        feed,
        roles=READERS,
        after=after,
        task_id=call.query("task_id"),
        typed=typed != "false",
    )


@route("GET /v1/tasks/{task_id}/events", READERS, "its events")
def task_events(call: Call) -> Answer:
    return Answer(call.backend.read_now(lambda s: s.tasks.events(call.path("task_id"))))


@route("GET /v1/tasks/{task_id}/history", READERS, "its timeline")
def task_history(call: Call) -> Answer:
    return Answer(call.backend.read_now(lambda s: s.tasks.history(call.path("task_id"))))


@route(
    "POST /v1/claims",
    operation_roles("claim"),
    TASK_OPERATIONS["claim"].summary,
    body="ClaimBody",
    success=(200, 204),
)
def claim(call: Call) -> Answer | Response | Later:
    """The claim's agent is the token's name (never the body's), held to the token's grant."""
    body = dict(call.body)
    wait = body.pop("wait_seconds", 0)
    limit = body.pop("limit", None)
    assert call.principal is not None  # an agent's route
    grant = call.principal.grant
    if limit is not None and not {"idempotency_key", "lease_token", "task_id"}.isdisjoint(body):
        raise LedgerError(
            "FIELDS_INVALID",
            "limit claims a batch: it takes no idempotency_key, lease_token, task_id",
        )
    mapping = {**body, "agent_id": call.name}
    request: ClaimRequest | ClaimBatchRequest
    if limit is None:
        request = ClaimRequest.from_mapping(mapping)
    else:
        request = ClaimBatchRequest.from_mapping({**mapping, "limit": limit})

    def attempt(stores: Stores) -> Any:
        return stores.tasks.apply(request, grant=grant) or None

    if wait <= 0:
        answer = call.backend.write_now(attempt)
        return Response(status_code=204) if answer is None else Answer(answer)
    return Later(functools.partial(_long_poll, call, attempt, wait))


async def _long_poll(
    call: Call, attempt: Callable[[Stores], Any], wait: float
) -> Answer | Response:
    """Claim until a task is taken or `wait` seconds pass, woken by writes that may help."""
    backend = call.backend
    with backend.waiting(call.name):
        loop = asyncio.get_running_loop()
        deadline = loop.time() + wait
        while True:
            signal = backend.work_signal()
            answer = await backend.write(attempt)
            if answer is not None:
                return Answer(answer)
            remaining = deadline - loop.time()
            if remaining <= 0 or await call.request.is_disconnected():
                return Response(status_code=204)
            try:
                await asyncio.wait_for(
                    signal.wait(), min(remaining, backend.settings.recheck_seconds)
                )
            except TimeoutError:
                if loop.time() >= deadline:
                    return Response(status_code=204)  # the deadline, not a wake-up: done


def task_write(row: TaskTransition) -> PlainHandler:
    """The handler of a write on the path's task, an agent's acting as the token's name; the
    holder is checked in the locked decision, like every other rule."""
    record: Any = row.request
    build = cast(Callable[[object], TaskRequest[Any]], record.from_mapping)
    acting = "agent_id" in attrs.fields_dict(record)

    def handle(call: Call) -> Answer:
        mapping = {**call.body, "task_id": call.path("task_id")}
        if acting:
            mapping["agent_id"] = call.name
        request = build(mapping)
        answer = call.backend.write_now(lambda s: s.tasks.apply(request))
        return Answer(answer, wakes=answer["status"] == TaskStatus.QUEUED)

    return handle


route.operations.extend(
    Operation(
        "POST",
        f"/v1/tasks/{{task_id}}/{row.route}",
        _OPERATION_IDS.get(row.name, row.name),
        operation_roles(row.name),
        task_write(row),
        row.summary,
        body=task_body(row),
    )
    for row in task_routes()
)


@route(
    "PUT /v1/bindings/{task_id}/{job_id}", OWNERS, "register a governed binding", body="BindingBody"
)
def put_binding(call: Call) -> Answer:
    task_id, job_id, body = call.path("task_id"), call.path("job_id"), call.body
    if body.get("task_id") != task_id or body.get("job_id") != job_id:
        raise LedgerError("FIELDS_INVALID", "the binding's task_id and job_id must be the path's")
    return Answer(call.backend.write_now(lambda s: register_binding(s.db, body)))


@route("GET /v1/bindings/{task_id}/{job_id}", READERS, "a registered binding")
def get_binding(call: Call) -> Answer:
    task_id, job_id = call.path("task_id"), call.path("job_id")
    binding = call.backend.read_now(lambda s: registered_binding(s.db, task_id, job_id))
    return Answer(binding.public())


@route(
    "POST /v1/tasks/{task_id}/projection",
    OWNERS,
    "the initial execution projection",
    body="ProjectionBody",
)
def project(call: Call) -> Answer:
    task_id = call.path("task_id")
    request = InitialExecutionProjectionRequest.from_mapping(call.body)
    return Answer(call.backend.write_now(lambda s: s.projections.project(task_id, request)))


@route(
    "POST /v1/tasks/{task_id}/projection-from-source-capture",
    OWNERS,
    "recover a projection from a source capture",
    body="ProjectionRecoveryBody",
)
def project_from_capture(call: Call) -> Answer:
    task_id = call.path("task_id")
    request = SourceCaptureProjectionRecoveryRequest.from_mapping(call.body)
    return Answer(
        call.backend.write_now(
            lambda s: s.projections.project_from_source_capture(task_id, request)
        )
    )


@route(
    "POST /v1/runs", AGENTS, "create a run in one's session", body="RunCreateBody", success=(201,)
)
def create_run(call: Call) -> Answer:
    """An agent's runs are those of its session, named as the agent: that is how the ledger
    knows whose a run is. The ledger's own run forms are RUN_ID_RESERVED."""
    body = call.body
    session, run_id = body.get("session_id", call.name), body.get("run_id")
    refuse_reserved(str(session), "" if run_id is None else str(run_id))
    if session != call.name:
        raise LedgerError("FORBIDDEN", "an agent creates runs in its own session (its name)")
    run = call.backend.write_now(lambda s: s.runs.create_run(session, body["prompt"], run_id))
    return Answer(run.public(), 201)


@route(
    "POST /v1/runs/{run_id}/events",
    AGENTS,
    "append to one's own run",
    body="RunEventBody",
    success=(201,),
)
def append_run_event(call: Call) -> Answer:
    run_id, body = call.path("run_id"), call.body

    def append(stores: Stores) -> Any:
        event = stores.runs.append_event(
            run_id, body["kind"], body.get("payload"), lease_token=body.get("lease_token")
        )
        return {"run_id": event.run_id, **event.public()}

    return Answer(call.backend.write_now(append), 201)


@route("GET /v1/runs/{run_id}", READERS, "a run")
def get_run(call: Call) -> Answer:
    return Answer(call.backend.read_now(lambda s: s.runs.get_run(call.path("run_id")).public()))


@route(
    "GET /v1/runs/{run_id}/events",
    READERS,
    "a run's events",
    query=(_LIMIT, Query("after", _WHOLE)),
)
def run_events(call: Call) -> Answer:
    """`?after=N` starts after the run's event N."""
    run_id = call.path("run_id")
    limit = call.query_int("limit", MAX_EVENTS_PAGE)
    after = call.query_int("after", 0)

    def read(stores: Stores) -> list[Any]:
        return [
            event.public() for event in stores.runs.run_events(run_id, limit=limit, after=after)
        ]

    return Answer(call.backend.read_now(read))


@route("GET /v1/auxiliary-runs", READERS, "auxiliary runs", query=AUXILIARY_RUNS_QUERY)
def list_auxiliary_runs(call: Call) -> Answer:
    state, session, run = call.query("state"), call.query("session_id"), call.query("run_id")
    limit = call.query_int("limit", 100)

    def read(stores: Stores) -> list[Any]:
        rows = auxiliary.list_auxiliary_runs(
            stores.db, state=state, session_id=session, run_id=run, limit=limit
        )
        return [row.public() for row in rows]

    return Answer(call.backend.read_now(read))


@route("GET /v1/auxiliary-runs/{aux_id}", READERS, "an auxiliary run")
def get_auxiliary_run(call: Call) -> Answer:
    aux_id = call.path("aux_id")
    return Answer(
        call.backend.read_now(lambda s: auxiliary.read_auxiliary_run(s.db, aux_id).public())
    )


@route("GET /v1/auxiliary-runs/{aux_id}/events", READERS, "an auxiliary run's transitions")
def auxiliary_run_events(call: Call) -> Answer:
    aux_id = call.path("aux_id")

    def read(stores: Stores) -> list[Any]:
        auxiliary.read_auxiliary_run(stores.db, aux_id)  # RUN_NOT_FOUND for an unknown run
        return auxiliary.auxiliary_run_events(stores.db, aux_id)

    return Answer(call.backend.read_now(read))


@route("GET /v1/whoami", READERS, "the token's name, roles and grant")
def whoami(call: Call) -> Answer:
    """The token's name, roles and granted capabilities (None: no ceiling)."""
    principal = call.principal
    assert principal is not None
    roles = [role for role in ROLES if role in principal.roles]
    grant = None if principal.grant is None else sorted(principal.grant)
    return Answer({"name": principal.name, "roles": roles, "capabilities": grant})


@route(
    "GET /v1/claims/idle",
    AGENTS,
    "why a claim offering these capabilities finds nothing now",
    query=(Query("capabilities", {"type": "string", "maxLength": 4000}),),
)
def idle_reason(call: Call) -> Answer:
    """Why a claim offering `capabilities` (comma-separated) finds nothing now."""
    offered = [name for name in (call.query("capabilities") or "").split(",") if name]
    assert call.principal is not None  # an agent's route
    grant = call.principal.grant
    reason = call.backend.read_now(lambda s: s.tasks.idle_reason(offered, grant=grant))
    return Answer(reason.public())


@route("GET /v1/status", READERS, "the status report")
def status(call: Call) -> Answer:
    clock = call.backend.settings.clock

    def read(stores: Stores) -> Any:
        now = read_clock(clock)
        return stores.db.read(lambda conn: read_status(conn, now))

    return Answer({**call.backend.read_now(read), "integration": call.backend.integration_now()})


@route("GET /v1/spend", READERS, "what tasks spent, by task, agent, repository and UTC day")
def spend(call: Call) -> Answer:
    """The spend report alone (`status` holds it too), up to MAX_SPEND_ROWS rows a table."""
    read = functools.partial(read_spend, limit=MAX_SPEND_ROWS)
    return Answer(call.backend.read_now(lambda s: s.db.read(read)))


@route("GET /v1/log/head", READERS, "the log's head")
def log_head(call: Call) -> Answer:
    return Answer(call.backend.read_now(lambda s: ledger_head(s.db).public()))


@route("GET /v1/log/verify", AUDIT, "verify the log")
def log_verify(call: Call) -> Answer:
    settings = call.backend.settings
    keys = tuple(VerifierKey.parse(key) for key in settings.checkpoint_keys)
    witnesses = tuple(VerifierKey.parse(key) for key in settings.witness_keys)
    return Answer(
        call.backend.read_now(
            lambda s: verify_log(s.db, checkpoint_keys=keys, witness_keys=witnesses).public()
        )
    )


@route("GET /v1/proofs/tree-head", PROOF_READERS, "the Merkle log's tree head: size and root")
def merkle_tree_head(call: Call) -> Answer:
    return Answer(call.backend.read_now(lambda s: merkle.current_tree_head(s.db).public()))


@route(
    "GET /v1/proofs/inclusion/{event_id}",
    PROOF_READERS,
    "an event's RFC 9162 inclusion proof",
    query=(Query("size", _WHOLE),),
)
def prove_inclusion(call: Call) -> Answer:
    """The event's inclusion proof in the tree of `size` leaves (default: the tree now)."""
    event_id = whole_number(call.path("event_id"), "event_id")
    size = whole_number(call.query("size"), "size")
    assert event_id is not None
    # A committed event not integrated yet gets one pass now, never a wait: then
    # EVENT_NOT_INTEGRATED with Retry-After.
    integrator = call.backend.integrator

    def prove(stores: Stores) -> Any:
        return merkle.prove_integrated(stores.db, event_id, size, integrator=integrator).public()

    return Answer(call.backend.read_now(prove))


@route(
    "GET /v1/proofs/consistency",
    PROOF_READERS,
    "an RFC 9162 consistency proof between two tree sizes",
    query=(Query("old", _WHOLE), Query("new", _WHOLE)),
)
def prove_consistency(call: Call) -> Answer:
    """The consistency proof from the tree of `old` leaves to the tree of `new` (default: now)."""
    old = whole_number(call.query("old"), "old")
    if old is None:
        raise LedgerError("FIELDS_INVALID", "old: the older tree's size is required")
    new = whole_number(call.query("new"), "new")
    return Answer(
        call.backend.read_now(lambda s: merkle.prove_consistency(s.db, old, new).public())
    )


@route("GET /v1/log/export", AUDIT, "the log as NDJSON", media="application/x-ndjson")
async def log_export(call: Call) -> Response:
    """Written in one read transaction to a spooled file, then streamed."""

    def write(stores: Stores) -> IO[str]:
        spool = tempfile.SpooledTemporaryFile(  # noqa: SIM115 (closed by the stream)
            max_size=EXPORT_SPOOL_BYTES, mode="w+", encoding="utf-8"
        )
        try:
            export_log(stores.db, spool, task_id=None)
        except BaseException:
            spool.close()
            raise
        spool.seek(0)
        return spool

    spool = call.backend.read_now(write)

    async def chunks() -> AsyncIterator[bytes]:
        try:
            while True:
                text = await run_in_threadpool(spool.read, EXPORT_CHUNK)
                if not text:
                    return
                yield text.encode("utf-8")
        finally:
            spool.close()

    return StreamingResponse(chunks(), media_type="application/x-ndjson")


def operations() -> tuple[Operation, ...]:
    return tuple(route.operations)


# -- the common part of every route ---------------------------------------------------------


async def _read_body(request: Request, limit: int, timeout: float) -> bytes:
    """The whole body, or 413 `BODY_TOO_LARGE` as soon as it is known to be over `limit`."""
    declared = request.headers.get("content-length")
    if declared is not None and (not declared.isdigit() or int(declared) > limit):
        raise LedgerError("BODY_TOO_LARGE", f"the body is over {limit} bytes")
    parts: list[bytes] = []
    size = 0
    try:
        async with asyncio.timeout(timeout):
            async for chunk in request.stream():
                size += len(chunk)
                if size > limit:
                    raise LedgerError("BODY_TOO_LARGE", f"the body is over {limit} bytes")
                parts.append(chunk)
    except TimeoutError:
        raise LedgerError("REQUEST_TIMEOUT", f"the body took over {timeout} s") from None
    return b"".join(parts)


def _unauthenticated() -> Response:
    detail = "a valid bearer token is required"
    return problem_response("UNAUTHENTICATED", detail, headers={"WWW-Authenticate": "Bearer"})


def _needs_role(operation: Operation, principal: Principal) -> str:
    assert operation.roles is not None
    takes = " or ".join(role for role in ROLES if role in operation.roles)
    has = ", ".join(role for role in ROLES if role in principal.roles) or "none"
    return (
        f"{operation.operation_id} needs the role {takes}; the token {principal.name!r} has "
        f"{has}: use a token with that role (aios-ledger token issue NAME --role ROLE)"
    )


def _acting(
    request: Request, principal: Principal | None
) -> contextlib.AbstractContextManager[object]:
    """Who a request's writes name, if it took a token; a caller that claims to come through the
    MCP adapter gains nothing by it, since a token proves who, not how."""
    if principal is None:
        return contextlib.nullcontext()
    via = VIA_MCP if request.headers.get(VIA_HEADER) == VIA_MCP else VIA_HTTP
    return acting_as(token_actor(principal.name, principal.roles, via))


def _endpoint(
    operation: Operation, backend: Backend, validators: BodyValidators, metrics: ApiMetrics
) -> Callable[[Request], Awaitable[Response]]:
    """The route's ASGI endpoint: what needs the ledger runs in one hop to a worker thread;
    reading the body, a long poll's wait and streaming stay on the event loop."""
    settings = backend.settings
    plain = not inspect.iscoroutinefunction(operation.handler)
    needs_thread = plain or operation.roles is not None or operation.body is not None

    def authorized(request: Request) -> Principal | Response | None:
        """The token's principal if it has the route's role, then held to the route's guard."""
        principal = None
        if operation.roles is not None:
            principal = request_principal(request, backend)
            if principal is None:
                return _unauthenticated()
            if principal.roles.isdisjoint(operation.roles):
                raise LedgerError("FORBIDDEN", _needs_role(operation, principal))
        if operation.guard is not None:
            operation.guard(Call(request, principal, None, backend))
        return principal

    def prepared(
        request: Request, raw: bytes | LedgerError | None, checked: Principal | Response | None
    ) -> Any:
        """The Call, or a plain handler's answer; `checked`: the principal a guard checked."""
        principal = checked if operation.guard is not None else authorized(request)
        if isinstance(principal, Response):
            return principal
        body = None
        if operation.body is not None:
            if isinstance(raw, LedgerError):
                raise raw  # the body's own refusal, after the token's and the role's
            assert raw is not None
            body = loads_document(raw, what="body")
            validators.check(operation.body, body)
        call = Call(request, principal, body, backend)
        if not plain:
            return call
        with _acting(request, principal):
            return operation.handler(call)

    async def run(request: Request) -> Response:
        if operation.roles is not None and presented_credential(request) is None:
            return _unauthenticated()  # no credential at all: refused at once, the body unread
        checked = None
        if operation.guard is not None:
            # One more hop, so that a caller the route's guard refuses is refused unread.
            checked = await run_in_threadpool(authorized, request)
            if isinstance(checked, Response):
                return checked
        raw: bytes | LedgerError | None = None
        if operation.body is not None:
            try:
                raw = await _read_body(request, settings.max_body, settings.body_timeout)
            except LedgerError as refused:
                raw = refused
        if needs_thread:
            outcome = await run_in_threadpool(prepared, request, raw, checked)
        else:
            outcome = Call(request, None, None, backend)
        if isinstance(outcome, Call):
            with _acting(request, outcome.principal):
                outcome = await operation.handler(outcome)
        elif isinstance(outcome, Later):
            outcome = await outcome.wait()
        if isinstance(outcome, Answer):
            if outcome.wakes:
                # Off the event loop: on PostgreSQL a notification is a round trip.
                await run_in_threadpool(backend.announce_work)
            return _json(outcome.value, outcome.status)
        assert isinstance(outcome, Response)
        return outcome

    async def endpoint(request: Request) -> Response:
        started = time.perf_counter()
        try:
            response = await run(request)
        except LedgerError as refused:
            response = refusal_response(refused)
        except Exception:
            # A defect: logged with the route only (never a header, a body or a token).
            LOG.exception("unexpected error in %s %s", operation.method, operation.path)
            response = problem_response("INTERNAL_ERROR", "the server failed; see its log")
        metrics.observe_request(
            operation.path, operation.method, response.status_code, time.perf_counter() - started
        )
        return response

    return endpoint


def create_app(settings: ApiSettings, extra: Iterable[Operation] = ()) -> Starlette:
    """The API over `settings.db_path`; `app.state.backend.close()` closes its databases (not
    the ASGI lifespan, which a test client runs per session). `extra`: more routes."""
    backend = Backend(settings)
    metrics = ApiMetrics(backend.task_counts, backend.spend)
    backend.on_batch = metrics.batch_size.observe
    feed = EventFeed(backend, settings.stream_poll_seconds)
    table = (*operations(), *extra)
    document = build_document(table, version=version("aios-ledger"))
    validators = BodyValidators(document)
    routes = [
        Route(
            operation.path,
            _endpoint(operation, backend, validators, metrics),
            methods=[operation.method],
            name=operation.operation_id,
        )
        for operation in table
    ]

    async def http_problem(request: Request, exc: Exception) -> Response:
        assert isinstance(exc, HTTPException)
        code = {404: "ROUTE_NOT_FOUND", 405: "METHOD_NOT_ALLOWED"}.get(exc.status_code)
        if code is None:
            return problem_response("INTERNAL_ERROR", "the server failed")
        metrics.observe_request("<unmatched>", request.method, exc.status_code, 0.0)
        return problem_response(
            code, f"{request.method} {exc.status_code}", headers=dict(exc.headers or {})
        )

    app = Starlette(routes=routes, exception_handlers={HTTPException: http_problem})
    app.state.backend = backend
    app.state.metrics = metrics
    app.state.event_feed = feed
    app.state.openapi = document
    app.state.openapi_bytes = json.dumps(document, separators=(",", ":")).encode()
    return app
