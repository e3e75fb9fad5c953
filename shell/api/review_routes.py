"""The review-run routes: what `aios-ledger review --api` needs of the server.

The server decides as the local reviewer's service would and reads the evidence itself, so a
reviewer cannot pin evidence the ledger does not hold. A run is driven only by the token that
spawned it: its stored owner tag ends with a digest of the token's name.
"""

from __future__ import annotations

import hashlib
from typing import Any

import attrs
from aios_ledger.core import AuxiliaryRunError, LedgerError
from aios_ledger.core.actors import AUDITOR, OWNER, REVIEWER
from aios_ledger.core.auxiliary import (
    AuxiliaryRunRow,
    AuxiliaryRunSpec,
    AuxiliaryRunState,
    AuxiliaryStopRequest,
    AuxiliaryTransitionRequest,
    check_output,
    check_spawn,
)
from aios_ledger.core.kinds import ROUTE_IDENTIFIER
from aios_ledger.core.runs import EvidenceReadRequest
from aios_ledger.core.tasks.attempts import evidence_session
from aios_ledger.core.work import REVIEW_KIND
from aios_ledger.shell.api.app import Answer, Call
from aios_ledger.shell.api.backend import Stores
from aios_ledger.shell.api.openapi import Operation, Query, Routes
from aios_ledger.shell.api.review_bodies import OWNER_TAG, REVIEW_ID
from aios_ledger.shell.auxiliary.service import DatabaseAuxiliaryRuns
from aios_ledger.shell.runs.store import RunEvidenceReader
from aios_ledger.shell.work.reviewer import attempt_evidence, reviews_of, tasks_to_review

REVIEWERS = frozenset({REVIEWER})
REVIEW_READERS = frozenset({REVIEWER, AUDITOR, OWNER})
_NAME_DIGEST_HEX = 24
route = Routes()


def _name_digest(name: str) -> str:
    return hashlib.sha256(name.encode("utf-8")).hexdigest()[:_NAME_DIGEST_HEX]


def bound_owner(tag: str, name: str) -> str:
    """The stored owner of a run a reviewer spawns: its process tag, bound to its token."""
    if not OWNER_TAG.fullmatch(tag):
        raise LedgerError("FIELDS_INVALID", "owner: must be host:pid:nonce")
    return f"{tag}~{_name_digest(name)}"


def _require_driver(row: AuxiliaryRunRow, name: str) -> None:
    if not row.owner.endswith(f"~{_name_digest(name)}"):
        raise LedgerError("NOT_RUN_OWNER", f"auxiliary run {row.aux_id!r} is another's")


@route(
    "GET /v1/review-candidates",
    REVIEW_READERS,
    "the SUBMITTED tasks a review round takes, in order",
    query=(Query("limit", {"type": "integer", "minimum": 1}),),
)
async def review_candidates(call: Call) -> Answer:
    limit = call.query_int("limit", 100)
    return Answer(await call.backend.read(lambda s: list(tasks_to_review(s.runs, limit))))


@route(
    "POST /v1/review-evidence",
    REVIEWERS,
    "an attempt's evidence snapshot",
    body="ReviewEvidenceBody",
)
async def review_evidence(call: Call) -> Answer:
    task_id, attempt = call.body["task_id"], call.body["attempt"]
    # A write: a task submitted without a worker gets its empty evidence run here, as locally.
    answer = await call.backend.write(lambda s: attempt_evidence(s.runs, task_id, attempt))
    return Answer(answer.public())


@route(
    "GET /v1/review-runs",
    REVIEW_READERS,
    "the auxiliary runs on an attempt's evidence",
    query=(Query("task_id", REVIEW_ID), Query("attempt", {"type": "integer", "minimum": 1})),
)
async def list_review_runs(call: Call) -> Answer:
    task_id = call.query("task_id")
    if task_id is None:
        raise LedgerError("FIELDS_INVALID", "task_id: required")
    attempt = call.query_int("attempt", 0)
    if attempt < 1:
        raise LedgerError("FIELDS_INVALID", "attempt: required, at least 1")
    rows = await call.backend.read(lambda s: reviews_of(s.runs, task_id, attempt))
    return Answer([attrs.asdict(row) for row in rows])


@route(
    "POST /v1/review-runs",
    REVIEWERS,
    "spawn a review run over evidence the server reads",
    body="ReviewRunSpawnBody",
)
async def spawn_review_run(call: Call) -> Answer:
    body = call.body
    spec = AuxiliaryRunSpec.from_mapping(body["spec"])
    if not ROUTE_IDENTIFIER.fullmatch(spec.id):
        # `/v1/review-runs/{aux_id}` could never name it (a local reviewer's run may).
        raise LedgerError(
            "FIELDS_INVALID",
            f"spec.id: {spec.id[:80]!r} holds '/', which no URL path can address: "
            "use another character (e.g. '-' or ':')",
        )
    request = EvidenceReadRequest.from_mapping(body["evidence"])
    if spec.kind != REVIEW_KIND or not request.target.session_id.startswith(evidence_session("")):
        raise LedgerError("FORBIDDEN", "only review runs on a task's evidence may be spawned")
    owner = bound_owner(body["owner"], call.name)

    def spawn(stores: Stores) -> Any:
        evidence = RunEvidenceReader(stores.runs).read(request)
        checked = check_spawn(spec, evidence)
        return DatabaseAuxiliaryRuns(stores.db).spawn(checked, evidence, owner)

    return Answer(await call.backend.write(spawn))


@route("GET /v1/review-runs/{aux_id}", REVIEW_READERS, "one review run, every column")
async def get_review_run(call: Call) -> Answer:
    aux_id = call.path("aux_id")
    row = await call.backend.read(lambda s: DatabaseAuxiliaryRuns(s.db).read(aux_id))
    return Answer(attrs.asdict(row))


@route(
    "POST /v1/review-runs/{aux_id}/transition",
    REVIEWERS,
    "move one's review run",
    body="ReviewRunTransitionBody",
)
async def transition_review_run(call: Call) -> Answer:
    aux_id, body = call.path("aux_id"), call.body
    target = AuxiliaryRunState(body["state"])

    def move(stores: Stores) -> AuxiliaryRunRow:
        runs = DatabaseAuxiliaryRuns(stores.db)
        row = runs.read(aux_id)
        _require_driver(row, call.name)
        output = None
        if target is AuxiliaryRunState.COMPLETED:
            output = check_output(row.spec(), body.get("output"))
        error = body.get("error")
        failure = None if error is None else AuxiliaryRunError(error["code"], error["detail"])
        return runs.move(AuxiliaryTransitionRequest(aux_id, target, output=output, error=failure))

    return Answer(attrs.asdict(await call.backend.write(move)))


@route(
    "POST /v1/review-runs/{aux_id}/stop",
    REVIEWERS,
    "end one's review run CANCELLED unless it ended",
    body="ReviewRunStopBody",
)
async def stop_review_run(call: Call) -> Answer:
    aux_id, body = call.path("aux_id"), call.body

    def stop(stores: Stores) -> AuxiliaryRunRow:
        runs = DatabaseAuxiliaryRuns(stores.db)
        _require_driver(runs.read(aux_id), call.name)
        runs.stop(AuxiliaryStopRequest(aux_id, AuxiliaryRunError(body["code"], body["detail"])))
        return runs.read(aux_id)

    return Answer(attrs.asdict(await call.backend.write(stop)))


def review_operations() -> tuple[Operation, ...]:
    return tuple(route.operations)
