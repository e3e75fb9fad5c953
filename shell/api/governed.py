"""The governed-write routes (issue 19), added to the API by `serve` (`create_app(settings,
governed_operations())`):

- `POST /v1/tasks/{task_id}/proposal` (agent role, the task's holder): a remote worker uploads
  the attempt's git bundle, base64 in JSON (`{lease_token, bundle_base64}`), under the body
  limit (`serve --max-body`); the ledger verifies it in a quarantine and records it (201).
- `GET /v1/tasks/{task_id}/workspace` (agent role, the task's holder, its lease token in the
  `Aios-Lease-Token` header): a git bundle of the binding's base (`application/octet-stream`),
  which a remote worker clones into the agent's workspace; `NOT_TASK_HOLDER` (403) for a task
  another agent holds or nobody does, `TASK_NOT_BOUND`, `REPOSITORY_NOT_FOUND`, and
  `WORKSPACE_TOO_LARGE` over 256 MiB.
- `POST /v1/tasks/{task_id}/governed-write` (owner role): `{idempotency_key}`, the governed
  write of a verified task's proposal to its bound branch.

Both run git and several transactions of their own, so each call opens a connection of its own
(in a worker thread), never the API's shared writer, whose turn they would hold for seconds.
"""

from __future__ import annotations

import base64
import binascii
import os
import tempfile
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any, BinaryIO, TypeVar

from aios_ledger.core import LedgerError
from aios_ledger.core.api.tokens import AGENT, OWNER
from aios_ledger.shell.api.app import Answer, Call
from aios_ledger.shell.api.backend import ApiSettings, Stores
from aios_ledger.shell.api.openapi import Operation, Query
from aios_ledger.shell.db.connection import Database
from aios_ledger.shell.git.proposals import record_proposal
from aios_ledger.shell.git.workspace import LEASE_TOKEN_HEADER, base_bundle
from aios_ledger.shell.git.writes import governed_write
from starlette.concurrency import run_in_threadpool
from starlette.responses import Response, StreamingResponse

T = TypeVar("T")


def _on_own_connection(settings: ApiSettings, work: Callable[[Database], T]) -> T:
    with Database(settings.db_path, synchronous=settings.synchronous, migrate=False) as db:
        return work(db)


def _holder(stores: Stores, task_id: str) -> str | None:
    try:
        return stores.tasks.get(task_id)["claimed_by"]
    except LedgerError:
        return None  # no such task: the proposal says so


def _bundle(text: str) -> bytes:
    try:
        return base64.b64decode(text.encode("ascii"), validate=True)
    except (binascii.Error, UnicodeEncodeError, ValueError):
        raise LedgerError("BUNDLE_INVALID", "bundle_base64 is not base64") from None


async def upload_proposal(call: Call) -> Answer:
    task_id, body = call.path("task_id"), call.body
    holder = await call.backend.read(lambda s: _holder(s, task_id))
    if holder is not None and holder != call.name:
        raise LedgerError("NOT_TASK_HOLDER", f"task {task_id!r} is held by another agent")
    data = _bundle(body["bundle_base64"])
    settings = call.backend.settings

    def record(db: Database) -> Any:
        return record_proposal(
            db, task_id, data, lease_token=body["lease_token"], clock=settings.clock
        )

    answer = await run_in_threadpool(_on_own_connection, settings, record)
    return Answer(answer, 200 if answer["idempotent"] else 201)


BUNDLE_MEDIA = "application/octet-stream"
BUNDLE_CHUNK = 256 * 1024


async def workspace(call: Call) -> Response:
    task_id = call.path("task_id")
    lease_token = call.request.headers.get(LEASE_TOKEN_HEADER)
    if not lease_token:
        raise LedgerError("FIELDS_INVALID", f"the {LEASE_TOKEN_HEADER} header is required")
    settings, agent = call.backend.settings, call.name

    def bundle(db: Database) -> tuple[str, BinaryIO]:
        # The bundle is opened, then its folder removed: nothing is left behind, whether the
        # answer is sent whole or the client goes away.
        with tempfile.TemporaryDirectory(prefix="aios-base-bundle-") as folder:
            out = Path(folder, "base.bundle")
            grant = base_bundle(
                db, task_id, out, agent_id=agent, lease_token=lease_token, clock=settings.clock
            )
            return grant.binding.base_oid, out.open("rb")

    base_oid, handle = await run_in_threadpool(_on_own_connection, settings, bundle)
    size = os.fstat(handle.fileno()).st_size

    async def chunks() -> AsyncIterator[bytes]:
        try:
            while chunk := await run_in_threadpool(handle.read, BUNDLE_CHUNK):
                yield chunk
        finally:
            handle.close()

    return StreamingResponse(
        chunks(),
        media_type=BUNDLE_MEDIA,
        headers={"Content-Length": str(size), "Aios-Base-Oid": base_oid},
    )


async def write_branch(call: Call) -> Answer:
    task_id, body = call.path("task_id"), call.body
    settings = call.backend.settings
    request = {"task_id": task_id, "idempotency_key": body["idempotency_key"]}

    def write(db: Database) -> Any:
        return governed_write(db, request, clock=settings.clock)

    return Answer(await run_in_threadpool(_on_own_connection, settings, write))


def governed_operations() -> tuple[Operation, ...]:
    return (
        Operation(
            "POST",
            "/v1/tasks/{task_id}/proposal",
            "uploadProposal",
            frozenset({AGENT}),
            upload_proposal,
            "upload the held attempt's git bundle as its proposal",
            body="ProposalBody",
            success=(200, 201),
        ),
        Operation(
            "GET",
            "/v1/tasks/{task_id}/workspace",
            "getWorkspace",
            frozenset({AGENT}),
            workspace,
            "a git bundle of the held task's base, to clone its workspace from",
            query=(
                Query(
                    LEASE_TOKEN_HEADER,
                    {"type": "string", "minLength": 1, "maxLength": 200},
                    location="header",
                    required=True,
                ),
            ),
            media=BUNDLE_MEDIA,
        ),
        Operation(
            "POST",
            "/v1/tasks/{task_id}/governed-write",
            "governedWrite",
            frozenset({OWNER}),
            write_branch,
            "write a verified task's proposal to its bound branch",
            body="GovernedWriteBody",
        ),
    )
