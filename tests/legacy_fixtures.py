"""Databases as the older runtime left them, written with stdlib sqlite3, and dump helpers."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import apsw
import psycopg
from aios_ledger.core import (
    GovernedExecutionBinding,
    JsonObject,
    project_execution_envelope,
    sha256_hex,
)
from aios_ledger.core.projection import (
    InitialExecutionProjectionRequest,
    SourceCaptureProjectionRecoveryRequest,
)
from aios_ledger.shell.db.engines.postgresql import PostgresTarget

OWNER = "owner-authorization-test-0001"
TASK = "task-legacy-1"
JOB = "job-legacy-1"
CAPABILITY = "agent.runtime.openclaw"
BASE_OID = "0123456789abcdef0123456789abcdef01234567"
BRANCH = "agent/task-legacy-1"

LEGACY_DDL = """
CREATE TABLE tasks(
  task_id TEXT PRIMARY KEY, goal TEXT NOT NULL, instructions TEXT NOT NULL,
  success_criteria_json TEXT NOT NULL, required_capabilities_json TEXT NOT NULL,
  constraints_json TEXT NOT NULL, metadata_json TEXT NOT NULL, deadline TEXT,
  priority INTEGER NOT NULL, max_attempts INTEGER NOT NULL, attempt INTEGER NOT NULL DEFAULT 0,
  status TEXT NOT NULL, claimed_by TEXT, lease_token_hash TEXT, lease_expires_at TEXT,
  result_json TEXT, result_digest TEXT, result_idempotency_key TEXT, verification_json TEXT,
  revision INTEGER NOT NULL DEFAULT 1, created_at TEXT NOT NULL, updated_at TEXT NOT NULL
);
CREATE TABLE events(
  event_id INTEGER PRIMARY KEY AUTOINCREMENT, task_id TEXT, agent_id TEXT,
  event_type TEXT NOT NULL, payload_json TEXT NOT NULL, created_at TEXT NOT NULL
);
"""

SCHEMA_ROWS = "SELECT type, name, tbl_name, sql FROM sqlite_master ORDER BY type, name"
TABLE_NAMES = "SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name"

GOAL = "Prepare the release notes"
INSTRUCTIONS = "Work only on the bound branch."
CRITERIA: list[Any] = [{"id": "notes", "description": "Notes drafted"}]
CONSTRAINTS: JsonObject = {"production_write": False}


def legacy_database(
    path: Path,
    *,
    task_overrides: Mapping[str, Any] | None = None,
    events: Iterable[tuple[str, JsonObject]] = (("TASK_CREATED", {}),),
) -> Path:
    row: dict[str, Any] = {
        "task_id": TASK,
        "goal": GOAL,
        "instructions": INSTRUCTIONS,
        "success_criteria_json": json.dumps(CRITERIA),
        "required_capabilities_json": "[]",
        "constraints_json": json.dumps(CONSTRAINTS),
        "metadata_json": "{}",
        "deadline": None,
        "priority": 10,
        "max_attempts": 3,
        "attempt": 0,
        "status": "QUEUED",
        "claimed_by": None,
        "lease_token_hash": None,
        "lease_expires_at": None,
        "result_json": None,
        "result_digest": None,
        "result_idempotency_key": None,
        "verification_json": None,
        "revision": 1,
        "created_at": "2026-08-20T00:00:00Z",
        "updated_at": "2026-08-20T00:00:00Z",
        **(task_overrides or {}),
    }
    with sqlite3.connect(path) as con:
        con.executescript(LEGACY_DDL)
        columns = ", ".join(row)
        marks = ", ".join(f":{name}" for name in row)
        con.execute(f"INSERT INTO tasks({columns}) VALUES ({marks})", row)
        for event_type, payload in events:
            con.execute(
                "INSERT INTO events(task_id, agent_id, event_type, payload_json, created_at) "
                "VALUES (?, ?, ?, ?, ?)",
                (TASK, "legacy-worker", event_type, json.dumps(payload), "2026-08-20T00:00:01Z"),
            )
    con.close()
    return path


def binding(**overrides: Any) -> GovernedExecutionBinding:
    return GovernedExecutionBinding.from_mapping(
        {
            "task_id": TASK,
            "job_id": JOB,
            "repository": "acme/widgets",
            "base_oid": BASE_OID,
            "expected_branch_oid": BASE_OID,
            "target_branch": BRANCH,
            "branch_mode": "CREATE_NEW",
            "generation": 1,
            "idempotency_key": "binding-legacy-1",
            **overrides,
        }
    )


def runtime_input() -> JsonObject:
    return {
        "goal": GOAL,
        "instructions": INSTRUCTIONS,
        "success_criteria": CRITERIA,
        "constraints": CONSTRAINTS,
        "scope": {"scope_type": "legacy", "tenant_id": None, "project_id": None},
        "trace_id": TASK,
    }


def runtime_envelope(bound: GovernedExecutionBinding | None = None) -> JsonObject:
    return project_execution_envelope(
        bound or binding(),
        {
            "action": "agent_runtime",
            "adapter": "openclaw",
            "capability_scope": [CAPABILITY],
            "runtime_input": runtime_input(),
        },
    )


def capture_envelope(bound: GovernedExecutionBinding | None = None) -> JsonObject:
    return project_execution_envelope(
        bound or binding(),
        {
            "action": "source_capture",
            "adapter": "source_capture",
            "capability_scope": ["git.read"],
            "runtime_input": None,
        },
    )


def resolver(task_id: str, job_id: str, capability: str, adapter: str, received: Any) -> JsonObject:
    assert (task_id, job_id, capability, adapter) == (TASK, JOB, CAPABILITY, "openclaw")
    assert received == runtime_input()
    return runtime_envelope()


def projection_request(**overrides: Any) -> InitialExecutionProjectionRequest:
    return InitialExecutionProjectionRequest.from_mapping(projection_mapping(**overrides))


def projection_mapping(**overrides: Any) -> dict[str, Any]:
    return {
        "expected_status": "QUEUED",
        "expected_revision": 1,
        "expected_attempt": 0,
        "expected_metadata_sha256": sha256_hex({}),
        "expected_required_capabilities_sha256": sha256_hex([]),
        "expected_job_id": JOB,
        "expected_execution_digest": runtime_envelope()["execution_digest"],
        "required_capability": CAPABILITY,
        "adapter": "openclaw",
        "authorization_id": OWNER,
        "idempotency_key": "projection-legacy-1",
        "reason": "first governed runtime projection",
        **overrides,
    }


def capture_result() -> JsonObject:
    return {
        "task_id": TASK,
        "job_id": JOB,
        "repository": "acme/widgets",
        "base_oid": BASE_OID,
        "expected_branch_oid": BASE_OID,
        "target_branch": BRANCH,
        "generation": 1,
        "status": "SUCCEEDED",
        "classification": "NEEDS_REWORK_SOURCE_CAPTURE",
        "execution_mode": "source_capture",
        "execution_digest": capture_envelope()["execution_digest"],
        "changed_files": [],
        "writer_lease": "NONE",
        "verification_state": "NEEDS_REWORK",
        "direct_main_write": False,
        "production_write": False,
        "force_push": False,
        "protected_ref_bypass": False,
        "secret_material_exposed": False,
        "source_snapshot": {"schema": "acme.snapshot.v1", "payload_sha256": "e" * 64},
    }


REWORK: JsonObject = {"decision": "NEEDS_REWORK", "reason": "RUNTIME_PROJECTION_REQUIRED"}
REWORK_TRAIL: tuple[tuple[str, JsonObject], ...] = (
    ("TASK_CREATED", {}),
    ("TASK_CLAIMED", {}),
    ("TASK_HEARTBEAT", {}),
    ("RESULT_SUBMITTED", {}),
    ("TASK_VERIFIED", {"decision": "NEEDS_REWORK", "next_state": "QUEUED"}),
)


def captured_database(
    path: Path,
    *,
    result: JsonObject | None = None,
    verification: JsonObject | None = None,
    events: Iterable[tuple[str, JsonObject]] = REWORK_TRAIL,
) -> Path:
    result = capture_result() if result is None else result
    verification = REWORK if verification is None else verification
    return legacy_database(
        path,
        task_overrides={
            "attempt": 1,
            "revision": 5,
            "result_json": json.dumps(result),
            "result_digest": sha256_hex(result),
            "result_idempotency_key": "capture-result-1",
            "verification_json": json.dumps(verification),
        },
        events=events,
    )


def recovery_mapping(
    result: JsonObject | None = None, verification: JsonObject | None = None, **overrides: Any
) -> dict[str, Any]:
    result = capture_result() if result is None else result
    verification = REWORK if verification is None else verification
    return {
        "expected_status": "QUEUED",
        "expected_revision": 5,
        "expected_attempt": 1,
        "expected_metadata_sha256": sha256_hex({}),
        "expected_required_capabilities_sha256": sha256_hex([]),
        "previous_verification_sha256": sha256_hex(verification),
        "expected_source_capture_result_sha256": sha256_hex(result),
        "expected_source_capture_execution_digest": result["execution_digest"],
        "expected_job_id": JOB,
        "expected_execution_digest": runtime_envelope()["execution_digest"],
        "required_capability": CAPABILITY,
        "adapter": "openclaw",
        "authorization_id": OWNER,
        "idempotency_key": "recovery-legacy-1",
        "reason": "runtime projection after the source capture",
        **overrides,
    }


def recovery_request(
    result: JsonObject | None = None, verification: JsonObject | None = None, **overrides: Any
) -> SourceCaptureProjectionRecoveryRequest:
    return SourceCaptureProjectionRecoveryRequest.from_mapping(
        recovery_mapping(result, verification, **overrides)
    )


def _reader(path: Path) -> apsw.Connection:
    # apsw, never the stdlib sqlite3, while the ledger's apsw connections may be open: a second
    # copy of SQLite in one process drops their POSIX locks when it closes and can delete their
    # WAL under them (sqlite.org/howtocorrupt.html, "multiple copies of SQLite").
    return apsw.Connection(str(path))


def _is_postgres(path: object) -> bool:
    return isinstance(path, str) and path.startswith("postgresql://")


def _postgres_reader(url: str) -> psycopg.Connection[tuple[Any, ...]]:
    target = PostgresTarget.parse(url)
    return psycopg.connect(target.conninfo, **target.connect_options())


_PG_SCHEMA_ROWS = """
SELECT table_name, column_name, data_type, is_nullable, column_default
FROM information_schema.columns WHERE table_schema = current_schema()
ORDER BY table_name, ordinal_position"""
_PG_TABLE_NAMES = """
SELECT table_name FROM information_schema.tables
WHERE table_schema = current_schema() AND table_type = 'BASE TABLE' ORDER BY table_name"""


def _postgres_dump(url: str) -> list[str]:
    with _postgres_reader(url) as con:
        lines = [repr(row) for row in con.execute(_PG_SCHEMA_ROWS)]
        for (table,) in con.execute(_PG_TABLE_NAMES).fetchall():
            found = con.execute(f'SELECT * FROM "{table}"').fetchall()
            lines.extend(sorted(f"{table}: {row!r}" for row in found))
        return lines


def dump(path: Path) -> list[str]:
    """The schema and every row, as text, to compare a database before and after a call (a
    PostgreSQL URL's: its schema's)."""
    if _is_postgres(path):
        return _postgres_dump(str(path))
    con = _reader(path)
    try:
        lines = [repr(row) for row in con.execute(SCHEMA_ROWS)]
        for (table,) in con.execute(TABLE_NAMES).fetchall():
            found = con.execute(f'SELECT * FROM "{table}"').fetchall()
            lines.extend(sorted(f"{table}: {row!r}" for row in found))
        return lines
    finally:
        con.close()


def rows(path: Path, query: str, params: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """A query's rows, on either engine (`?` placeholders; PostgreSQL gets them as `%s`)."""
    if _is_postgres(path):
        with _postgres_reader(str(path)) as pg:
            text = query.replace("?", "%s") if params else query
            cursor = pg.execute(text.encode(), params or None)
            return [] if cursor.description is None else [tuple(row) for row in cursor]
    con = _reader(path)
    try:
        return [tuple(row) for row in con.execute(query, params)]
    finally:
        con.close()


def row_dicts(path: Path, query: str, params: tuple[Any, ...] = ()) -> list[dict[str, Any]]:
    """A query's rows as dicts of their columns, on either engine."""
    if _is_postgres(path):
        with _postgres_reader(str(path)) as pg:
            cursor = pg.execute(query.replace("?", "%s").encode(), params or None)
            names = [column.name for column in cursor.description or ()]
            return [dict(zip(names, row, strict=True)) for row in cursor]
    con = _reader(path)
    try:
        found = con.execute(query, params)
        try:
            columns = [column[0] for column in found.get_description()]
        except apsw.ExecutionCompleteError:
            return []
        return [dict(zip(columns, row, strict=True)) for row in found]
    finally:
        con.close()


def on_engine(path: Path, target: str | Path) -> Any:
    """The SQLite ledger at `path` (the older runtime's, say) where the test's engine is: the
    file itself, or, for a PostgreSQL URL, the file adopted and copied there (`copy`)."""
    if not _is_postgres(target):
        return path
    from aios_ledger.shell import Database
    from aios_ledger.shell.log.copy import copy_ledger

    with Database(path) as source, Database(target) as copied:
        copy_ledger(source, copied)
    return target
