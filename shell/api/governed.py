"""The governed-write routes `serve` adds to the API: a holder's proposal upload and workspace
download, and an owner's governed write.

The holder's lease header is checked before the body is read, so a hostile upload costs a read,
never a scan. These routes run git, so each call opens its own connection in a worker thread
rather than hold the API's shared writer for seconds.
"""

from __future__ import annotations

import base64
import binascii
import functools
import os
import tempfile
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any, BinaryIO, TypeVar

from aios_ledger.core import LedgerError
from aios_ledger.shell.api.app import AGENTS, OWNERS, READERS, Answer, Call
from aios_ledger.shell.api.backend import ApiSettings, Stores
from aios_ledger.shell.api.openapi import Operation, Query, Routes
from aios_ledger.shell.attest.commits import why_commit
from aios_ledger.shell.attest.keys import configured_key_path, load_signer
from aios_ledger.shell.db.connection import Database
from aios_ledger.shell.git.proposals import admitted_context, record_proposal
from aios_ledger.shell.git.workspace import LEASE_TOKEN_HEADER, base_bundle
from aios_ledger.shell.governed import writes
from starlette.concurrency import run_in_threadpool
from starlette.responses import Response, StreamingResponse

T = TypeVar("T")
LEASE_HEADER_SCHEMA = {"type": "string", "minLength": 1, "maxLength": 200}
route = Routes()


def _on_own_connection(settings: ApiSettings, work: Callable[[Database], T]) -> T:
    with Database(settings.db_path, synchronous=settings.synchronous, migrate=False) as db:
        return work(db)


def _admit(call: Call, lease_token: str) -> None:
    """The proposal's cheap checks (the task, its holder, its lease), on a reader."""
    task_id, agent, clock = call.path("task_id"), call.name, call.backend.settings.clock
    call.backend.read_now(
        lambda s: s.db.read(
            lambda conn: admitted_context(
                conn, task_id, lease_token=lease_token, agent_id=agent, clock=clock
            )
        )
    )


def _holder(stores: Stores, task_id: str) -> str | None:
    try:
        return stores.tasks.get(task_id)["claimed_by"]
    except LedgerError:
        return None  # no such task (or an id the ledger refuses): the write says so


def admit_upload(call: Call) -> None:
    """The upload's guard, before its body is read: the task must be the caller's, under the
    live lease of the lease header. An older client, without the header: the task must not be
    another agent's; the lease is checked once the body is parsed."""
    lease_token = call.request.headers.get(LEASE_TOKEN_HEADER)
    if lease_token:
        _admit(call, lease_token)
        return
    task_id = call.path("task_id")
    holder = call.backend.read_now(lambda s: _holder(s, task_id))
    if holder is not None and holder != call.name:
        raise LedgerError("NOT_TASK_HOLDER", f"task {task_id!r} is held by another agent")


@route(
    "POST /v1/tasks/{task_id}/proposal",
    AGENTS,
    "upload the held attempt's git bundle as its proposal",
    body="ProposalBody",
    query=(Query(LEASE_TOKEN_HEADER, LEASE_HEADER_SCHEMA, location="header"),),
    success=(200, 201),
    guard=admit_upload,
)
async def upload_proposal(call: Call) -> Answer:
    task_id, body = call.path("task_id"), call.body
    header = call.request.headers.get(LEASE_TOKEN_HEADER)
    given = body.get("lease_token")
    if header and given is not None and given != header:
        raise LedgerError(
            "FIELDS_INVALID",
            f"lease_token differs from the {LEASE_TOKEN_HEADER} header: send the lease once, "
            "in the header",
        )
    lease_token = header or given
    if not lease_token:
        raise LedgerError("FIELDS_INVALID", f"the {LEASE_TOKEN_HEADER} header is required")
    if not header:
        await run_in_threadpool(_admit, call, lease_token)
    try:
        data = base64.b64decode(body["bundle_base64"].encode("ascii"), validate=True)
    except (binascii.Error, UnicodeEncodeError, ValueError):
        raise LedgerError("BUNDLE_INVALID", "bundle_base64 is not base64") from None
    settings, agent = call.backend.settings, call.name

    def record(db: Database) -> Any:
        return record_proposal(
            db, task_id, data, lease_token=lease_token, agent_id=agent, clock=settings.clock
        )

    answer = await run_in_threadpool(_on_own_connection, settings, record)
    return Answer(answer, 200 if answer["idempotent"] else 201)


BUNDLE_MEDIA = "application/octet-stream"
BUNDLE_CHUNK = 256 * 1024


@route(
    "GET /v1/tasks/{task_id}/workspace",
    AGENTS,
    "a git bundle of the held task's base, to clone its workspace from",
    query=(Query(LEASE_TOKEN_HEADER, LEASE_HEADER_SCHEMA, location="header", required=True),),
    media=BUNDLE_MEDIA,
)
async def get_workspace(call: Call) -> Response:
    task_id = call.path("task_id")
    lease_token = call.request.headers.get(LEASE_TOKEN_HEADER)
    if not lease_token:
        raise LedgerError("FIELDS_INVALID", f"the {LEASE_TOKEN_HEADER} header is required")
    settings, agent = call.backend.settings, call.name

    def bundle(db: Database) -> tuple[str, BinaryIO]:
        # Opened, then its folder removed: nothing is left behind, however the answer ends.
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


def write_task_branch(settings: ApiSettings, task_id: str, idempotency_key: str) -> Any:
    """The governed write of a verified task's proposal, attested with the server's key, for
    the API's route and the console's form (blocking). The server's key is that of its
    environment or its systemd credential, if any."""
    request = {"task_id": task_id, "idempotency_key": idempotency_key}
    key_path = configured_key_path(None)
    signing = None if key_path is None else load_signer(key_path)
    return _on_own_connection(
        settings,
        lambda db: writes.governed_write(db, request, clock=settings.clock, attest_key=signing),
    )


@route(
    "POST /v1/tasks/{task_id}/governed-write",
    OWNERS,
    "write a verified task's proposal to its bound branch",
    body="GovernedWriteBody",
)
async def governed_write(call: Call) -> Answer:
    task_id, body = call.path("task_id"), call.body
    settings = call.backend.settings
    return Answer(
        await run_in_threadpool(write_task_branch, settings, task_id, body["idempotency_key"])
    )


@route(
    "GET /v1/commits/{oid}",
    READERS,
    "from a commit back to its task, agent, evidence, review, write and attestation",
    query=(Query("repo", {"type": "string", "minLength": 1, "maxLength": 200}),),
)
async def commit_why(call: Call) -> Answer:
    """`GET /v1/commits/{oid}`: what `aios-ledger why COMMIT` prints."""
    commit, repository = call.path("oid"), call.query("repo")
    settings = call.backend.settings
    read = functools.partial(why_commit, commit=commit, repository=repository)
    return Answer(await run_in_threadpool(_on_own_connection, settings, read))


def governed_operations() -> tuple[Operation, ...]:
    return tuple(route.operations)
