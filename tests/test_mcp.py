"""`aios-ledger mcp` through the MCP SDK's own client, against the server `serve` runs with
real tokens: over stdio (the command spawned as an MCP host spawns it, from PATH, with a
relative token file) and over Streamable HTTP (the command serving uvicorn on a loopback port).
An agent lists its tools, claims, heartbeats and submits; a reviewer verifies through the
review tools; the agent reads SUCCEEDED. A wrong or revoked token and another agent's task are
refused with the ledger's codes."""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import anyio
import attrs
import httpx
import httpx2
import pytest
from aios_ledger.core import LedgerError
from aios_ledger.core.tasks.operations import TASK_OPERATIONS
from aios_ledger.shell import AUTHORIZATION_ENV
from aios_ledger.shell.contracts import result_contract
from aios_ledger.shell.mcp.server import VERIFIED_SECONDS, LedgerTokenVerifier
from aios_ledger.shell.mcp.tools import (
    TOOLS_BY_NAME,
    Caller,
    check_arguments,
    claim_lease_token,
    operation_tool,
)
from aios_ledger.shell.remote.client import LedgerClient
from api_server import ROLE_NAMES, START_PATIENCE, ApiServer, cli, free_port
from git_support import (
    CAPABILITY,
    OWNER,
    binding,
    governed_task,
    make_repository,
    register,
    runtime_result,
)
from mcp.client import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError
from starlette.authentication import AuthenticationError

BIN = Path(sys.executable).parent
AGENT_TOOLS = {
    "claim_task",
    "heartbeat",
    "read_task",
    "read_evidence",
    "submit_result",
    "submit_agent_runtime_result",
    "submit_source_capture_result",
    "release_task",
}
REVIEW_TOOLS = {"list_review_candidates", "read_review_evidence", "verify_result", "read_task"}


# One ledger server and one MCP server for the module: each test queues tasks of a capability
# of its own and revokes only tokens it issued.
@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ApiServer]:
    with pytest.MonkeyPatch.context() as patch:
        # `aios-ledger` as a user finds it: on PATH (this environment's scripts).
        patch.setenv("PATH", f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}")
        directory = tmp_path_factory.mktemp("mcp")
        with ApiServer(directory / "ledger.db", role_tokens=True) as running:
            yield running


def queued(server: ApiServer, capability: str) -> str:
    body = {
        "idempotency_key": "k-" + secrets.token_hex(6),
        "task": {"goal": "g", "instructions": "i", "required_capabilities": [capability]},
    }
    answer = server.client("owner").post("/v1/tasks", json=body)
    assert answer.status_code == 201, answer.text
    return str(answer.json()["task_id"])


@contextlib.asynccontextmanager
async def stdio_session(
    server: ApiServer, cwd: Path, token_file: str, errlog: Any
) -> AsyncIterator[ClientSession]:
    spawn = StdioServerParameters(
        command="aios-ledger",
        args=["mcp", "--api", server.url, "--token-file", token_file],
        cwd=cwd,
        env={"PATH": os.environ["PATH"]},
    )
    async with (
        stdio_client(spawn, errlog=errlog) as (read, write),
        ClientSession(read, write) as session,
    ):
        await session.initialize()
        yield session


class McpHttp:
    """`aios-ledger mcp --transport http` on a loopback port, in front of `server`."""

    def __init__(self, server: ApiServer, log: Path) -> None:
        port = free_port()
        self.url = f"http://127.0.0.1:{port}/mcp"
        self._log = log.open("wb")
        self.process = subprocess.Popen(
            [
                *("aios-ledger", "mcp", "--api", server.url),
                *("--transport", "http", "--listen", f"127.0.0.1:{port}"),
            ],
            stdout=self._log,
            stderr=self._log,
        )
        deadline = time.monotonic() + START_PATIENCE
        while True:
            assert self.process.poll() is None, log.read_text()
            try:
                httpx.post(self.url, timeout=1.0)
                return
            except httpx.TransportError:
                assert time.monotonic() < deadline, "the MCP server did not come up"
                time.sleep(0.05)

    def stop(self) -> None:
        self.process.terminate()
        self.process.wait(timeout=20)
        self._log.close()

    @contextlib.asynccontextmanager
    async def session(self, token: str) -> AsyncIterator[ClientSession]:
        headers = {"Authorization": f"Bearer {token}"}
        async with (
            httpx2.AsyncClient(headers=headers, timeout=120) as http,
            streamable_http_client(self.url, http_client=http) as (read, write),
            ClientSession(read, write) as session,
        ):
            await session.initialize()
            yield session


@pytest.fixture(scope="module")
def mcp_http(server: ApiServer) -> Iterator[McpHttp]:
    running = McpHttp(server, server.db.with_suffix(".mcp.log"))
    try:
        yield running
    finally:
        running.stop()


async def call(session: ClientSession, tool: str, **arguments: Any) -> dict[str, Any]:
    answer = await session.call_tool(tool, arguments)
    assert not answer.is_error, answer.content
    assert isinstance(answer.structured_content, dict)
    return answer.structured_content


async def refused(session: ClientSession, tool: str, **arguments: Any) -> str:
    """The ledger's code of a refused tool call (in the text and the structured content)."""
    answer = await session.call_tool(tool, arguments)
    assert answer.is_error, answer.structured_content
    code = answer.structured_content["code"]
    text = answer.content[0].text  # type: ignore[union-attr]
    assert text.startswith(f"{code}: ")
    return str(code)


def only_error(group: BaseExceptionGroup[BaseException]) -> MCPError:
    """The one MCPError of the client's (nested) task groups."""
    errors: list[BaseException] = [group]
    while isinstance(errors[0], BaseExceptionGroup):
        assert len(errors) == 1, errors
        errors = list(errors[0].exceptions)
    assert len(errors) == 1 and isinstance(errors[0], MCPError), errors
    return errors[0]


async def names(session: ClientSession) -> set[str]:
    return {tool.name for tool in (await session.list_tools()).tools}


async def agent_and_reviewer_round(
    agent: ClientSession, reviewer: ClientSession, task_id: str, capability: str
) -> None:
    """Claim, heartbeat, submit (twice: one submission), verify as the reviewer, read SUCCEEDED."""
    assert await names(agent) == AGENT_TOOLS
    assert await names(reviewer) == REVIEW_TOOLS | {"read_evidence"}
    claimed = await call(
        agent, "claim_task", capabilities=[capability], lease_seconds=120, wait_seconds=5
    )
    assert claimed["claimed"] is True
    assert claimed["submit_with"] == "submit_result"
    held = claimed["task"]
    assert held["task_id"] == task_id
    lease = held["lease_token"]
    beat = await call(agent, "heartbeat", task_id=task_id, lease_token=lease, lease_seconds=120)
    assert beat["task_id"] == task_id
    result = {"summary": "done", "status": "SUCCEEDED"}
    submitted = await call(
        agent, "submit_result", task_id=task_id, lease_token=lease, result=result
    )
    assert (submitted["status"], submitted["idempotent"]) == ("SUBMITTED", False)
    again = await call(agent, "submit_result", task_id=task_id, lease_token=lease, result=result)
    assert again["idempotent"] is True  # the derived key: the same result is one submission
    candidates = await call(reviewer, "list_review_candidates", limit=50)
    assert task_id in [task["task_id"] for task in candidates["tasks"]]
    evidence = await call(reviewer, "read_review_evidence", task_id=task_id, attempt=1)
    assert evidence["evidence"]["target"]["run_id"] == f"{task_id}@1"
    verdict = await call(
        reviewer, "verify_result", task_id=task_id, decision="SUCCEEDED", reason="looks right"
    )
    assert verdict["status"] == "SUCCEEDED"
    seen = await call(agent, "read_task", task_id=task_id)
    assert seen["task"]["status"] == "SUCCEEDED"
    assert seen["envelope"] is None


def test_over_stdio_an_agent_claims_submits_and_sees_it_verified(
    server: ApiServer, tmp_path: Path
) -> None:
    capability = "cap-" + secrets.token_hex(4)
    task_id = queued(server, capability)
    server.token_file(tmp_path, "stdio-agent", "agent", capabilities=None)
    server.token_file(tmp_path, "stdio-reviewer", "reviewer")

    async def main() -> None:
        with (tmp_path / "mcp-stderr.log").open("w") as errlog:
            async with (
                stdio_session(server, tmp_path, "stdio-agent.token", errlog) as agent,
                stdio_session(server, tmp_path, "stdio-reviewer.token", errlog) as reviewer,
            ):
                await agent_and_reviewer_round(agent, reviewer, task_id, capability)

    anyio.run(main)


def test_over_http_an_agent_claims_submits_and_sees_it_verified(
    server: ApiServer, mcp_http: McpHttp
) -> None:
    capability = "cap-" + secrets.token_hex(4)
    task_id = queued(server, capability)

    async def main() -> None:
        async with (
            mcp_http.session(server.tokens["agent"]) as agent,
            mcp_http.session(server.tokens["reviewer"]) as reviewer,
        ):
            await agent_and_reviewer_round(agent, reviewer, task_id, capability)

    anyio.run(main)


def test_the_submit_tools_advertise_the_result_contracts(
    server: ApiServer, mcp_http: McpHttp
) -> None:
    async def main() -> dict[str, Any]:
        async with mcp_http.session(server.tokens["agent"]) as agent:
            return {tool.name: tool.input_schema for tool in (await agent.list_tools()).tools}

    schemas = anyio.run(main)
    for action, contract in (
        ("agent_runtime", "agent_runtime_result.v1"),
        ("source_capture", "source_capture_result.v1"),
    ):
        advertised = schemas[f"submit_{action}_result"]
        assert advertised["properties"]["result"] == dict(result_contract(contract))
        assert advertised["required"] == ["task_id", "lease_token", "result"]


def test_an_enveloped_task_takes_only_a_result_that_meets_its_contract(
    server: ApiServer, mcp_http: McpHttp, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    bare, base = make_repository(tmp_path / "repository")
    register(server.db, bare)
    task_id = "mcp-governed-" + secrets.token_hex(4)
    monkeypatch.setenv(AUTHORIZATION_ENV, OWNER)
    governed_task(server.db, task_id, binding(task_id, base))

    async def main() -> tuple[dict[str, Any], list[str], dict[str, Any]]:
        async with mcp_http.session(server.tokens["agent"]) as agent:
            claimed = await call(agent, "claim_task", capabilities=[CAPABILITY], task_id=task_id)
            held = claimed["task"]
            submit = {"task_id": task_id, "lease_token": held["lease_token"]}
            tool = claimed["submit_with"]
            codes = [
                await refused(agent, tool, **submit, result=runtime_result(held, [], summary="")),
                await refused(
                    agent, tool, **submit, result=runtime_result(held, [], force_push=True)
                ),
                await refused(
                    agent,
                    tool,
                    **submit,
                    result=runtime_result(held, [], execution_digest="0" * 64),
                ),
                # The plain submit tool is no way around the contract: the ledger judges.
                await refused(agent, "submit_result", **submit, result={"summary": "done"}),
            ]
            submitted = await call(agent, tool, **submit, result=runtime_result(held, []))
            return claimed, codes, submitted

    claimed, codes, submitted = anyio.run(main)
    assert claimed["submit_with"] == "submit_agent_runtime_result"
    assert claimed["result_contract"] == "agent_runtime_result.v1"
    assert claimed["task"]["envelope"]["action"] == "agent_runtime"
    assert codes == [
        "RESULT_CONTRACT_INVALID",
        "RESULT_GOVERNANCE_VIOLATION",
        "RESULT_EXECUTION_DIGEST_MISMATCH",
        "RESULT_CONTRACT_INVALID",
    ]
    assert submitted["status"] == "SUBMITTED"


def test_a_keyed_claim_sent_again_gets_the_same_task_and_lease(
    server: ApiServer, mcp_http: McpHttp
) -> None:
    capability = "cap-" + secrets.token_hex(4)
    first_task, second_task = queued(server, capability), queued(server, capability)
    token = server.tokens["agent"]

    async def main() -> tuple[dict[str, Any], dict[str, Any]]:
        async with mcp_http.session(token) as agent:
            claim = {"capabilities": [capability], "idempotency_key": "model-claim-1"}
            first = await call(agent, "claim_task", **claim)
            repeat = await call(agent, "claim_task", **claim)
            idle = await call(agent, "claim_task", capabilities=["cap-nobody-asks-for"])
            assert idle["claimed"] is False
            assert idle["idle"]["queued"] >= 1  # second_task, needing `capability`
            assert capability in idle["why"]
            return first, repeat

    first, repeat = anyio.run(main)
    assert first["task"]["task_id"] == repeat["task"]["task_id"] == first_task
    assert first["task"]["lease_token"] == repeat["task"]["lease_token"]
    assert first["task"]["lease_token"] == claim_lease_token(token, "model-claim-1")
    assert repeat["task"]["idempotent"] is True
    assert server.client("owner").get(f"/v1/tasks/{second_task}").json()["status"] == "QUEUED"


def test_over_http_a_wrong_or_revoked_token_is_refused_with_the_ledgers_code(
    server: ApiServer, mcp_http: McpHttp
) -> None:
    revoked = server.issue("soon-revoked", "agent")
    cli("--db", str(server.db), "token", "revoke", "soon-revoked")

    async def refusal(token: str) -> MCPError:
        with pytest.raises(BaseExceptionGroup) as caught:
            async with mcp_http.session(token):
                pass
        return only_error(caught.value)

    for token in ("not-a-token-" + secrets.token_hex(8), revoked):
        error = anyio.run(refusal, token)
        assert error.message.startswith("UNAUTHENTICATED: ")
        assert error.data["code"] == "UNAUTHENTICATED"
        raw = httpx.post(
            mcp_http.url,
            json={"jsonrpc": "2.0", "id": 1, "method": "tools/list"},
            headers={"Authorization": f"Bearer {token}", "Accept": "application/json"},
        )
        assert raw.status_code == 401
        assert raw.json()["error"]["data"]["code"] == "UNAUTHENTICATED"
        assert token not in raw.text


def test_the_verifier_keeps_a_good_answer_briefly_then_asks_the_ledger_again(
    server: ApiServer,
) -> None:
    now = [0.0]
    verifier = LedgerTokenVerifier(server.url, clock=lambda: now[0])
    token = server.issue("cached-agent", "agent")
    first = anyio.run(verifier.verify_token, token)
    assert first is not None
    assert (first.client_id, first.scopes, first.token) == ("cached-agent", ["agent"], token)
    cli("--db", str(server.db), "token", "revoke", "cached-agent")
    now[0] = VERIFIED_SECONDS - 1
    assert anyio.run(verifier.verify_token, token) == first  # kept: the ledger still refuses
    now[0] = VERIFIED_SECONDS + 1
    with pytest.raises(AuthenticationError) as refused:
        anyio.run(verifier.verify_token, token)
    assert json.loads(str(refused.value))["code"] == "UNAUTHENTICATED"
    assert token not in str(refused.value)


def test_over_stdio_a_wrong_token_ends_the_server_with_the_ledgers_code(
    server: ApiServer, tmp_path: Path
) -> None:
    (tmp_path / "wrong.token").write_text("not-a-token\n")
    ended = subprocess.run(
        ["aios-ledger", "mcp", "--api", server.url, "--token-file", "wrong.token"],
        cwd=tmp_path,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert ended.returncode == 1
    assert ended.stderr.startswith("UNAUTHENTICATED: ")
    assert ended.stdout == ""  # nothing on the protocol's channel


def test_a_token_revoked_mid_session_and_a_foreign_lease_are_refused(
    server: ApiServer, mcp_http: McpHttp, tmp_path: Path
) -> None:
    capability = "cap-" + secrets.token_hex(4)
    task_id = queued(server, capability)
    server.token_file(tmp_path, "revoked-agent", "agent", capabilities=None)

    async def main() -> None:
        with (tmp_path / "mcp-stderr.log").open("w") as errlog:
            async with stdio_session(server, tmp_path, "revoked-agent.token", errlog) as agent:
                claimed = await call(agent, "claim_task", capabilities=[capability])
                lease = claimed["task"]["lease_token"]
                async with mcp_http.session(server.tokens["agent-2"]) as other:
                    # Another agent holding the lease token still does not hold the task.
                    for tool, extra in (
                        ("heartbeat", {}),
                        ("submit_result", {"result": {"summary": "mine now"}}),
                        ("release_task", {"reason": "taking it"}),
                    ):
                        code = await refused(
                            other, tool, task_id=task_id, lease_token=lease, **extra
                        )
                        assert code == "NOT_TASK_HOLDER"
                cli("--db", str(server.db), "token", "revoke", "revoked-agent")
                code = await refused(agent, "heartbeat", task_id=task_id, lease_token=lease)
                assert code == "UNAUTHENTICATED"

    anyio.run(main)
    task = server.client("owner").get(f"/v1/tasks/{task_id}").json()
    assert (task["status"], task["claimed_by"]) == ("CLAIMED", "revoked-agent")


def test_bad_arguments_are_refused_before_any_call(server: ApiServer, mcp_http: McpHttp) -> None:
    async def main() -> list[str]:
        async with mcp_http.session(server.tokens["agent"]) as agent:
            return [
                await refused(agent, "claim_task", capabilities="python"),
                await refused(agent, "heartbeat", task_id="t", lease_token="l", extra=1),
                await refused(agent, "claim_task", capabilities=[], wait_seconds=3600),
                await refused(agent, "no_such_tool"),
            ]

    assert anyio.run(main) == ["FIELDS_INVALID"] * 3 + ["TOOL_UNKNOWN"]


def test_resources_are_the_task_its_history_and_the_contracts(
    server: ApiServer, mcp_http: McpHttp
) -> None:
    capability = "cap-" + secrets.token_hex(4)
    task_id = queued(server, capability)

    async def main() -> tuple[list[str], list[str], Any, Any, Any]:
        async with mcp_http.session(server.tokens["agent"]) as agent:
            listed = [str(r.uri) for r in (await agent.list_resources()).resources]
            templates = await agent.list_resource_templates()
            read = [
                json.loads((await agent.read_resource(uri)).contents[0].text)  # type: ignore[union-attr]
                for uri in (
                    f"ledger://tasks/{task_id}",
                    f"ledger://tasks/{task_id}/history",
                    "ledger://contracts/agent_runtime_result.v1",
                )
            ]
            with pytest.raises(MCPError) as missing:
                await agent.read_resource("ledger://tasks/no-such-task")
            assert missing.value.data["code"] == "TASK_NOT_FOUND"
            uris = [t.uri_template for t in templates.resource_templates]
            return listed, uris, *read

    listed, templates, task, history, contract = anyio.run(main)
    assert listed == [
        "ledger://contracts/agent_runtime_result.v1",
        "ledger://contracts/source_capture_result.v1",
    ]
    assert "ledger://tasks/{task_id}/history" in templates
    assert task["task"]["task_id"] == task_id
    assert [entry["event"] for entry in history["history"]][:1] == ["TASK_CREATED"]
    assert contract == dict(result_contract("agent_runtime_result.v1"))


def test_a_row_naming_a_tool_no_one_wrote_gets_one_made_from_its_request(
    server: ApiServer,
) -> None:
    """Were cancel's row to name a tool, the owner would be offered it with the request's schema
    (its key optional), and the same call twice, without a key, cancels once."""
    tool = operation_tool(attrs.evolve(TASK_OPERATIONS["cancel"], tool="cancel_task"))
    assert (tool.name, tool.roles) == ("cancel_task", frozenset({"owner"}))
    assert tool.description == "Cancel a non-terminal task."
    assert tool.input_schema["required"] == ["task_id", "reason"]
    assert "agent_id" not in tool.input_schema["properties"]
    task_id = queued(server, "cap-" + secrets.token_hex(4))
    owner = Caller(ROLE_NAMES["owner"], frozenset({"owner"}), server.tokens["owner"])
    arguments = check_arguments(tool, {"task_id": task_id, "reason": "not needed"})
    with LedgerClient(server.url, owner.token) as client:
        answers = [tool.handler(client, arguments, owner) for _ in range(2)]
    assert [answer["status"] for answer in answers] == ["CANCELLED", "CANCELLED"]
    assert [answer["idempotent"] for answer in answers] == [False, True]
    events = server.client("owner").get(f"/v1/tasks/{task_id}/events").json()
    assert [event["event_type"] for event in events] == ["TASK_CREATED", "TASK_CANCELLED"]


def test_a_refused_argument_is_named_and_its_value_never_shown() -> None:
    """A tool's schema is its request's, patterns included; what a value fails is said, the
    value (here a mistyped lease token) is not."""
    secret = "my lease token, mistyped"
    with pytest.raises(LedgerError) as refused:
        check_arguments(TOOLS_BY_NAME["heartbeat"], {"task_id": "t1", "lease_token": secret})
    assert refused.value.code == "FIELDS_INVALID"
    assert refused.value.detail.startswith("heartbeat: $.lease_token: fails pattern ")
    assert secret not in str(refused.value)
