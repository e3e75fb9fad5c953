"""The bodies of the review-run routes as JSON Schemas, plain data so that the OpenAPI builder
takes them without importing the routes."""

from __future__ import annotations

import re
from typing import Any

# The codes a reviewer may end a run with: what its service records (core/auxiliary).
ENDING_CODES = (
    "CANCELLED",
    "EXECUTOR",
    "OUTPUT_INVALID",
    "OUTPUT_LIMIT",
    "OUTPUT_SCHEMA_MISMATCH",
    "TIMEOUT",
)
MAX_DETAIL = 4000
OWNER_TAG = re.compile(r"^[A-Za-z0-9._-]{1,100}:[0-9]{1,10}:[A-Za-z0-9]{1,64}$")
REVIEW_ID = {"type": "string", "minLength": 1, "maxLength": 200}
_ENDING = {
    "type": "object",
    "properties": {
        "code": {"enum": list(ENDING_CODES)},
        "detail": {"type": "string", "maxLength": MAX_DETAIL},
    },
    "required": ["code", "detail"],
    "additionalProperties": False,
}


def review_body_schemas() -> dict[str, Any]:
    return {
        "ReviewEvidenceBody": {
            "type": "object",
            "properties": {"task_id": REVIEW_ID, "attempt": {"type": "integer", "minimum": 1}},
            "required": ["task_id", "attempt"],
            "additionalProperties": False,
        },
        "ReviewRunSpawnBody": {
            "type": "object",
            "properties": {
                "spec": {"type": "object"},
                "evidence": {"type": "object"},
                "owner": {"type": "string", "pattern": OWNER_TAG.pattern},
            },
            "required": ["spec", "evidence", "owner"],
            "additionalProperties": False,
        },
        "ReviewRunTransitionBody": {
            "type": "object",
            "properties": {
                "state": {"enum": ["RUNNING", "COMPLETED", "FAILED", "CANCELLED"]},
                "output": {},
                "error": _ENDING,
            },
            "required": ["state"],
            "additionalProperties": False,
        },
        "ReviewRunStopBody": {**_ENDING},  # a copy: the document titles it, not the error above
    }
