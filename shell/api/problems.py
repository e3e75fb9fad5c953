"""Refusals as RFC 9457 problem details, and the one table from a ledger code to its HTTP status.

A problem carries the ledger's stable `code` and its `detail`, so a client maps it back to the
`LedgerError`; a code no table names is a refusal of the state the ledger found, 409.
"""

from __future__ import annotations

from typing import Any

from aios_ledger.core import LedgerError, RetryLaterError
from aios_ledger.core.jsonvalue import dumps_canonical
from starlette.responses import Response

PROBLEM_TYPE = "application/problem+json"
PROBLEM_BASE = "https://aios-ledger.dev/problems/"

# Exact codes first: the API's own, and the ledger's codes a suffix rule would misplace.
STATUS_BY_CODE: dict[str, int] = {
    "UNAUTHENTICATED": 401,
    "FORBIDDEN": 403,
    "NOT_TASK_HOLDER": 403,
    "NOT_RUN_OWNER": 403,
    "RUN_ID_RESERVED": 403,
    # Governance: an offer beyond the token's grant; a reviewer judging its own result.
    "CAPABILITY_NOT_GRANTED": 403,
    "SELF_REVIEW": 403,
    # A cosignature by no witness this server was given (`serve --witness-key`).
    "WITNESS_UNKNOWN": 403,
    # The console: a POST without its session's CSRF token, or from another site.
    "CSRF_INVALID": 403,
    # A task list cursor this server did not give for these filters.
    "CURSOR_INVALID": 400,
    "ROUTE_NOT_FOUND": 404,
    "METHOD_NOT_ALLOWED": 405,
    "REQUEST_TIMEOUT": 408,
    "BODY_TOO_LARGE": 413,
    # A request's head over `serve --max-header-bytes` (answered by `connections.py`).
    "HEADERS_TOO_LARGE": 431,
    "UNSUPPORTED_MEDIA_TYPE": 415,
    "TOO_MANY_WAITING": 429,
    # An agent over its scan budget for a repository's window: `Retry-After` says when.
    "AGENT_SCAN_BUDGET_EXCEEDED": 429,
    "JSON_INVALID": 422,
    "JSON_NOT_OBJECT": 422,
    "JSON_TOO_DEEP": 422,
    "JSON_TOO_LARGE": 422,
    "JSON_NUMBER_TOO_LARGE": 422,
    "PAYLOAD_TOO_LARGE": 422,
    "INVALID_FIELD": 422,
    "FIELDS_INVALID": 422,
    "OUTPUT_SCHEMA_MISMATCH": 422,
    "RESULT_GOVERNANCE_VIOLATION": 422,
    "REVISION_CONFLICT": 409,
    "IDEMPOTENCY_CONFLICT": 409,
    "INVALID_TRANSITION": 409,
    "CONSTRAINT_VIOLATION": 409,
    "DATABASE_BUSY": 503,
    "DATABASE_READ_ONLY": 503,
    "DATABASE_CANNOT_OPEN": 503,
    "DATABASE_UNAVAILABLE": 503,
    "TOO_MANY_CONNECTIONS": 503,
    "SCHEMA_TOO_OLD": 503,
    "SCHEMA_TOO_NEW": 503,
    "SCHEMA_MIGRATIONS_INCONSISTENT": 503,
    "DATABASE_CORRUPT": 500,
    "TOKEN_ROW_INVALID": 500,
    "STATEMENT_INVALID": 500,
    "INTERNAL_ERROR": 500,
    # Governed writes: a proposal over its bounds; git failing under the ledger.
    "PROPOSAL_TOO_LARGE": 413,
    "SCAN_BUDGET_EXCEEDED": 413,
    # A repository whose git config holds settings the ledger no longer reads.
    "REPOSITORY_SETTINGS_IN_GIT_CONFIG": 409,
    "GIT_FAILED": 500,
    "GIT_TIMEOUT": 503,
    "GIT_OUTPUT_TOO_LARGE": 500,
}
# Then by part of the code: (prefix or suffix, status), the first that fits.
STATUS_BY_PART: tuple[tuple[str, int], ...] = (
    ("STORAGE_", 503),
    ("_ROW_CORRUPT", 500),  # a stored row the ledger cannot read back: TASK_, RUN_, GIT_...
    ("LEASE_", 409),  # LEASE_INVALID, LEASE_EXPIRED: the lease is not (or no longer) the holder's
    ("_NOT_FOUND", 404),
    ("_INVALID", 422),
    ("_CONFLICT", 409),
    ("_MISMATCH", 409),
)
STATE_REFUSAL = 409


def status_of(code: str) -> int:
    status = STATUS_BY_CODE.get(code)
    if status is not None:
        return status
    for part, by_part in STATUS_BY_PART:
        if code.startswith(part) or code.endswith(part):
            return by_part
    return STATE_REFUSAL


def problem_document(code: str, detail: str, *, field: str | None = None) -> dict[str, Any]:
    status = status_of(code)
    document: dict[str, Any] = {
        "type": PROBLEM_BASE + code.lower().replace("_", "-"),
        "title": code.replace("_", " ").capitalize(),
        "status": status,
        "code": code,
        "detail": detail,
    }
    if field is not None:
        document["field"] = field
    return document


def problem_response(
    code: str, detail: str, *, field: str | None = None, headers: dict[str, str] | None = None
) -> Response:
    document = problem_document(code, detail, field=field)
    return Response(
        dumps_canonical(document),
        status_code=document["status"],
        media_type=PROBLEM_TYPE,
        headers=headers,
    )


def refusal_response(error: LedgerError) -> Response:
    """The problem of a refusal; one that time lifts says when, in `Retry-After`."""
    field = getattr(error, "field", None)
    headers = (
        {"Retry-After": str(error.retry_after)} if isinstance(error, RetryLaterError) else None
    )
    return problem_response(
        error.code, error.detail, field=field if isinstance(field, str) else None, headers=headers
    )
