"""The request documents the command line reads, by name, and their JSON Schemas, generated from the
very records that structure them."""

from __future__ import annotations

from typing import Any

import attrs
from aios_ledger.core.batches import MAX_BATCH
from aios_ledger.core.envelopes import GovernedExecutionBinding
from aios_ledger.core.errors import LedgerError
from aios_ledger.core.projection.decisions import (
    InitialExecutionProjectionRequest,
    SourceCaptureProjectionRecoveryRequest,
)
from aios_ledger.core.schemas import batch_schema, record_schema
from aios_ledger.core.tasks.requests import (
    CancelRequest,
    ClaimRequest,
    HeartbeatRequest,
    ReleaseRequest,
    RetryRequest,
    SubmitRequest,
    TaskCreateCommand,
    VerifyRequest,
)


@attrs.frozen
class RequestDocument:
    """A request file: its record, the command that reads it, and whether it also takes a batch."""

    record: type
    command: str
    batch: bool = False


REQUEST_DOCUMENTS: dict[str, RequestDocument] = {
    "task": RequestDocument(TaskCreateCommand, "task create --json FILE", batch=True),
    "claim": RequestDocument(ClaimRequest, "claim --json FILE"),
    "heartbeat": RequestDocument(HeartbeatRequest, "heartbeat --json FILE"),
    "release": RequestDocument(ReleaseRequest, "release --json FILE"),
    "submit": RequestDocument(SubmitRequest, "submit --json FILE", batch=True),
    "verify": RequestDocument(VerifyRequest, "task verify --json FILE", batch=True),
    "cancel": RequestDocument(CancelRequest, "cancel --json FILE"),
    "retry": RequestDocument(RetryRequest, "task retry --json FILE"),
    "binding": RequestDocument(GovernedExecutionBinding, "binding put FILE"),
    "projection": RequestDocument(
        InitialExecutionProjectionRequest, "project TASK_ID --request FILE"
    ),
    "projection-recovery": RequestDocument(
        SourceCaptureProjectionRecoveryRequest,
        "project TASK_ID --from-source-capture --request FILE",
    ),
}


def request_schema(name: str) -> dict[str, Any]:
    """The JSON Schema of the request document `name` (`SCHEMA_NOT_FOUND` for another)."""
    document = REQUEST_DOCUMENTS.get(name)
    if document is None:
        raise LedgerError(
            "SCHEMA_NOT_FOUND", f"no request schema {name[:80]!r}: one of {list(REQUEST_DOCUMENTS)}"
        )
    if document.batch:
        schema = batch_schema(document.record, max_items=MAX_BATCH)
    else:
        schema = record_schema(document.record)
    return {**schema, "$comment": f"read by `aios-ledger {document.command}`"}
