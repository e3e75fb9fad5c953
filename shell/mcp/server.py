"""`aios-ledger mcp`: the ledger's tools and resources for a model, over stdio or Streamable HTTP.

An adapter, not a second writer: every call goes to a running `aios-ledger serve` with the
caller's own token, so an MCP session holds no power its token lacks. A refusal's text is
`CODE: detail`, as a tool error or a JSON-RPC error (`LEDGER_REFUSAL`).
"""

from __future__ import annotations

import hashlib
import json
import logging
import time
import urllib.parse
from collections.abc import Callable
from functools import partial
from importlib.metadata import version
from typing import Any, cast

import anyio
import anyio.to_thread
import mcp_types as types
from aios_ledger.core import LedgerError
from aios_ledger.core.actors import VIA_MCP
from aios_ledger.core.digests import canonical_json
from aios_ledger.core.tasks.results import RESULT_CONTRACTS
from aios_ledger.shell.contracts import result_contract
from aios_ledger.shell.mcp.tools import (
    TOOLS_BY_NAME,
    Caller,
    LedgerTool,
    check_arguments,
    read_task,
    tools_for,
)
from aios_ledger.shell.remote.client import LedgerClient
from mcp.server import Server, ServerRequestContext
from mcp.server.auth.middleware.bearer_auth import AuthenticatedUser
from mcp.server.auth.provider import AccessToken
from mcp.server.auth.settings import AuthSettings
from mcp.server.stdio import stdio_server
from mcp.shared.exceptions import MCPError
from starlette.applications import Starlette
from starlette.authentication import AuthenticationBackend, AuthenticationError
from starlette.middleware import Middleware
from starlette.middleware.authentication import AuthenticationMiddleware
from starlette.requests import HTTPConnection
from starlette.responses import JSONResponse, Response

LOG = logging.getLogger("aios_ledger.mcp")
SERVER_NAME = "aios-ledger"
MCP_PATH = "/mcp"
# A revoked token is still refused by the ledger on the first call it forwards.
VERIFIED_SECONDS = 10.0
MAX_VERIFIED_TOKENS = 4096
# In JSON-RPC's range for implementation-defined server errors: the ledger refused.
LEDGER_REFUSAL = -32001
# A refused token is 401; a ledger that did not answer the check is not the token's fault.
_AUTH_STATUS = {"API_UNAVAILABLE": 503, "API_PROTOCOL_ERROR": 502}
URI_SCHEME = "ledger://"
TASK_URI = URI_SCHEME + "tasks/{task_id}"
HISTORY_URI = URI_SCHEME + "tasks/{task_id}/history"
CONTRACT_URI = URI_SCHEME + "contracts/{name}"
JSON_MEDIA = "application/json"

CallerOf = Callable[[ServerRequestContext[Any, Any]], Caller]


def refusal(refused: LedgerError) -> dict[str, str]:
    return {"code": refused.code, "detail": refused.detail}


def _json_text(value: object) -> str:
    return json.dumps(value, ensure_ascii=False, sort_keys=True)


def _tool_listing(tool: LedgerTool) -> types.Tool:
    return types.Tool(
        name=tool.name,
        description=tool.description,
        input_schema=dict(tool.input_schema),
        annotations=types.ToolAnnotations(
            read_only_hint=tool.read_only, destructive_hint=False, open_world_hint=False
        ),
    )


def _tool_error(refused: LedgerError) -> types.CallToolResult:
    return types.CallToolResult(
        content=[types.TextContent(type="text", text=str(refused))],
        structured_content=refusal(refused),
        is_error=True,
    )


def call_tool(api_url: str, caller: Caller, name: str, arguments: object) -> dict[str, Any]:
    """One tool call, blocking: its arguments checked, then the ledger call."""
    tool = TOOLS_BY_NAME.get(name)
    if tool is None:
        raise LedgerError("TOOL_UNKNOWN", f"no tool named {name[:100]!r}")
    checked = check_arguments(tool, arguments)
    with LedgerClient(api_url, caller.token, agent_name=caller.name, via=VIA_MCP) as client:
        return tool.handler(client, checked, caller)


def _task_id_of(uri: str, prefix: str, suffix: str = "") -> str | None:
    if not uri.startswith(prefix) or not uri.endswith(suffix):
        return None
    quoted = uri[len(prefix) : len(uri) - len(suffix)]
    task_id = urllib.parse.unquote(quoted)
    return task_id if task_id and "/" not in quoted else None


def read_resource(api_url: str, caller: Caller, uri: str) -> object:
    """A resource's JSON: a task (with its envelope), its history, or a result contract."""
    tasks = URI_SCHEME + "tasks/"
    contracts = URI_SCHEME + "contracts/"
    if uri.startswith(contracts):
        name = uri.removeprefix(contracts)
        if name not in RESULT_CONTRACTS.values():
            raise LedgerError("RESULT_CONTRACT_UNKNOWN", f"no result contract {name[:100]!r}")
        return dict(result_contract(name))
    history_of = _task_id_of(uri, tasks, "/history")
    task_id = _task_id_of(uri, tasks)
    if history_of is None and task_id is None:
        raise LedgerError("RESOURCE_UNKNOWN", f"no resource {uri[:200]!r}")
    with LedgerClient(api_url, caller.token, agent_name=caller.name, via=VIA_MCP) as client:
        if history_of is not None:
            return {"task_id": history_of, "history": client.history(history_of)}
        assert task_id is not None
        return read_task(client, task_id)


def _resources() -> list[types.Resource]:
    return [
        types.Resource(
            uri=CONTRACT_URI.format(name=name),
            name=name,
            description=f"the result contract of action {action} (a JSON Schema)",
            mime_type="application/schema+json",
        )
        for action, name in sorted(RESULT_CONTRACTS.items())
    ]


def _templates() -> list[types.ResourceTemplate]:
    templates = (
        (TASK_URI, "task", "a task, its checked execution envelope and its result contract"),
        (HISTORY_URI, "task history", "a task's timeline: every event, in order"),
        (CONTRACT_URI, "result contract", "a result contract (a JSON Schema) by name"),
    )
    return [
        types.ResourceTemplate(
            uri_template=uri,
            name=name,
            description=description,
            mime_type="application/schema+json" if uri == CONTRACT_URI else JSON_MEDIA,
        )
        for uri, name, description in templates
    ]


def build_server(api_url: str, caller_of: CallerOf) -> Server[Any]:
    """The MCP server over the ledger at `api_url`; `caller_of` says who sends a request."""

    async def list_tools(
        ctx: ServerRequestContext[Any, Any], params: types.PaginatedRequestParams | None
    ) -> types.ListToolsResult:
        return types.ListToolsResult(
            tools=[_tool_listing(tool) for tool in tools_for(caller_of(ctx).roles)]
        )

    async def on_call_tool(
        ctx: ServerRequestContext[Any, Any], params: types.CallToolRequestParams
    ) -> types.CallToolResult:
        call = partial(call_tool, api_url, caller_of(ctx), params.name, params.arguments or {})
        try:
            answer = await anyio.to_thread.run_sync(call)
        except LedgerError as refused:
            return _tool_error(refused)
        return types.CallToolResult(
            content=[types.TextContent(type="text", text=_json_text(answer))],
            structured_content=answer,
        )

    async def list_resources(
        ctx: ServerRequestContext[Any, Any], params: types.PaginatedRequestParams | None
    ) -> types.ListResourcesResult:
        return types.ListResourcesResult(resources=_resources())

    async def list_templates(
        ctx: ServerRequestContext[Any, Any], params: types.PaginatedRequestParams | None
    ) -> types.ListResourceTemplatesResult:
        return types.ListResourceTemplatesResult(resource_templates=_templates())

    async def on_read_resource(
        ctx: ServerRequestContext[Any, Any], params: types.ReadResourceRequestParams
    ) -> types.ReadResourceResult:
        read = partial(read_resource, api_url, caller_of(ctx), params.uri)
        try:
            value = await anyio.to_thread.run_sync(read)
        except LedgerError as refused:
            raise MCPError(LEDGER_REFUSAL, str(refused), refusal(refused)) from None
        contents = types.TextResourceContents(
            uri=params.uri, mime_type=JSON_MEDIA, text=_json_text(value)
        )
        return types.ReadResourceResult(contents=[contents])

    return Server(
        SERVER_NAME,
        version=version("aios-ledger"),
        instructions=(
            "A governed task ledger. Claim a task with claim_task, keep its lease with "
            "heartbeat, read it with read_task, and submit its result with the tool "
            "claim_task names in submit_with; every refusal carries the ledger's code."
        ),
        on_list_tools=list_tools,
        on_call_tool=on_call_tool,
        on_list_resources=list_resources,
        on_list_resource_templates=list_templates,
        on_read_resource=on_read_resource,
    )


def identify(api_url: str, token: str) -> Caller:
    """The caller a token is, as the ledger's whoami says; the ledger's code when it refuses."""
    with LedgerClient(api_url, token) as client:
        identity = client.whoami()
    roles = identity.get("roles")
    if not isinstance(roles, list) or not all(isinstance(role, str) for role in roles):
        raise LedgerError("API_PROTOCOL_ERROR", "whoami: expected a list of roles")
    return Caller(name=str(identity["name"]), roles=frozenset(roles), token=token)


# -- stdio ----------------------------------------------------------------------------------


def run_stdio(api_url: str, token: str) -> None:
    """Serve one client on stdin/stdout as the token's caller (checked first)."""
    caller = identify(api_url, token)
    server = build_server(api_url, lambda ctx: caller)

    async def serve() -> None:
        async with stdio_server() as (read_stream, write_stream):
            await server.run(read_stream, write_stream, server.create_initialization_options())

    LOG.info("serving MCP on stdio as %s (%s)", caller.name, ",".join(sorted(caller.roles)))
    anyio.run(serve)


# -- Streamable HTTP ------------------------------------------------------------------------


class LedgerTokenVerifier:
    """The SDK's `TokenVerifier`: a bearer token is good when the ledger's whoami answers it,
    kept `VERIFIED_SECONDS` by the token's digest, never the token."""

    def __init__(self, api_url: str, *, clock: Callable[[], float] = time.monotonic) -> None:
        self._api_url = api_url
        self._clock = clock
        self._verified: dict[str, tuple[float, AccessToken]] = {}

    async def verify_token(self, token: str) -> AccessToken | None:
        digest = hashlib.sha256(token.encode()).hexdigest()
        now = self._clock()
        kept = self._verified.get(digest)
        if kept is not None and kept[0] > now:
            return kept[1]
        try:
            caller = await anyio.to_thread.run_sync(identify, self._api_url, token)
        except LedgerError as refused:
            self._verified.pop(digest, None)
            raise AuthenticationError(canonical_json(refusal(refused))) from None
        access = AccessToken(token=token, client_id=caller.name, scopes=sorted(caller.roles))
        if len(self._verified) >= MAX_VERIFIED_TOKENS:
            alive = self._clock()
            self._verified = {k: v for k, v in self._verified.items() if v[0] > alive}
            if len(self._verified) >= MAX_VERIFIED_TOKENS:
                self._verified.pop(next(iter(self._verified)))
        self._verified[digest] = (now + VERIFIED_SECONDS, access)
        return access


def http_caller(ctx: ServerRequestContext[Any, Any]) -> Caller:
    """The caller of this HTTP request: the token the bearer middleware verified for it."""
    request = ctx.request
    user = None if request is None else request.scope.get("user")
    if not isinstance(user, AuthenticatedUser):
        raise MCPError(LEDGER_REFUSAL, "UNAUTHENTICATED: a valid bearer token is required")
    access = user.access_token
    return Caller(name=access.client_id, roles=frozenset(access.scopes), token=access.token)


def token_refused(conn: HTTPConnection, exc: AuthenticationError) -> Response:
    """The ledger's refusal of a bearer token as a JSON-RPC error the SDK's client raises."""
    try:
        refused = json.loads(str(exc))
        code, detail = str(refused["code"]), str(refused["detail"])
    except (ValueError, KeyError, TypeError):
        code, detail = "UNAUTHENTICATED", "the bearer token was refused"
    body = {
        "jsonrpc": "2.0",
        "id": None,
        "error": {
            "code": LEDGER_REFUSAL,
            "message": f"{code}: {detail}",
            "data": {"code": code, "detail": detail},
        },
    }
    status = _AUTH_STATUS.get(code, 401)
    headers = {"WWW-Authenticate": f'Bearer error="invalid_token", error_description="{code}"'}
    return JSONResponse(body, status_code=status, headers=headers if status == 401 else None)


def http_app(api_url: str, *, host: str) -> Starlette:
    """The Streamable HTTP app: stateless, each request standing alone with its own token."""
    server = build_server(api_url, http_caller)
    auth = AuthSettings(issuer_url=api_url, resource_server_url=None)  # type: ignore[arg-type]
    app = server.streamable_http_app(
        streamable_http_path=MCP_PATH,
        json_response=True,
        stateless_http=True,
        host=host,
        auth=auth,
        token_verifier=LedgerTokenVerifier(api_url),
    )
    _answer_refusals_with_codes(app)
    return app


def _answer_refusals_with_codes(app: Starlette) -> None:
    """The SDK's authentication middleware answers a refused token with Starlette's plain 400;
    have it answer `token_refused` instead."""
    found = [entry for entry in app.user_middleware if _authenticates(entry)]
    if len(found) != 1:
        raise LedgerError("MCP_SDK_UNSUPPORTED", "the SDK's app has no authentication middleware")
    backend = cast(AuthenticationBackend, found[0].kwargs["backend"])
    answering = Middleware(AuthenticationMiddleware, backend=backend, on_error=token_refused)
    app.user_middleware = [
        answering if _authenticates(entry) else entry for entry in app.user_middleware
    ]


def _authenticates(entry: Middleware) -> bool:
    return cast(object, entry.cls) is AuthenticationMiddleware


def run_http(api_url: str, host: str, port: int) -> None:
    import uvicorn

    LOG.info("serving MCP on http://%s:%d%s for the ledger at %s", host, port, MCP_PATH, api_url)
    uvicorn.run(http_app(api_url, host=host), host=host, port=port, log_level="warning")
