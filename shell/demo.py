"""`make demo`: the projection scenario on the embedded SQLite default, told for a person.

A task as the older runtime left it, a registered binding, the owner-authorised projection, its
replay, a drifted request refused, and the task's resulting state and events.
"""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from aios_ledger.core import (
    GovernedExecutionBinding,
    InitialExecutionProjectionRequest,
    LedgerError,
    TaskRow,
    format_timestamp,
    runtime_input_of,
    sha256_hex,
)

from .bindings import RegisteredBindingResolver, register_binding
from .clock import AUTHORIZATION_ENV, system_clock
from .database import Database, fetch_all, fetch_one
from .projection_store import InitialExecutionProjectionStore
from .statements import sql

DEMO_DIR = Path("demo-ledger")
OWNER = "owner-demo-authorization"
TASK = "task-release-notes"
JOB = "job-release-notes-1"
CAPABILITY = "agent.runtime.openclaw"
BASE = "4b825dc642cb6eb9a060e54bf8d69288fbee4904"


def say(line: str = "") -> None:
    sys.stdout.write(line + "\n")


def older_runtime_creates_task(path: Path) -> None:
    """Write the task exactly as the older runtime did, with stdlib sqlite3 and no migrations."""
    created = format_timestamp(system_clock())
    con = sqlite3.connect(path)
    try:
        con.executescript(sql("legacy_create_tables"))
        con.execute(
            sql("legacy_insert_task"),
            {
                "task_id": TASK,
                "goal": "Draft the release notes for 2.4",
                "instructions": "Summarise merged changes on the bound branch only.",
                "success_criteria_json": json.dumps([{"id": "notes", "description": "drafted"}]),
                "constraints_json": json.dumps({"production_write": False}),
                "priority": 10,
                "max_attempts": 3,
                "created_at": created,
            },
        )
        con.execute(sql("legacy_insert_event"), {"task_id": TASK, "created_at": created})
        con.commit()
    finally:
        con.close()


def run(argv: Sequence[str] = ()) -> int:
    if DEMO_DIR.exists():
        shutil.rmtree(DEMO_DIR)
    DEMO_DIR.mkdir()
    path = DEMO_DIR / "aios-ledger.db"
    os.environ[AUTHORIZATION_ENV] = OWNER

    say("aios-ledger demo: the initial execution projection")
    say("=" * 52)
    older_runtime_creates_task(path)
    say(f"1. The older runtime left task {TASK} in {path} (no migrations, one TASK_CREATED).")

    with Database(path) as db:
        sealed = db.read(lambda conn: fetch_all(conn, "events_for_task", {"task_id": TASK}))
        binding = GovernedExecutionBinding.from_mapping(
            {
                "task_id": TASK,
                "job_id": JOB,
                "repository": "acme/widgets",
                "base_oid": BASE,
                "expected_branch_oid": BASE,
                "target_branch": "agent/release-notes-2.4",
                "branch_mode": "CREATE_NEW",
                "generation": 1,
                "idempotency_key": "binding-release-notes-1",
            }
        )
        registered = register_binding(db, binding.public())
    say(f"2. Opened by aios-ledger: migrated in place, {len(sealed)} old event sealed.")
    say(f"3. Binding registered for {JOB} (sha256 {str(registered['binding_sha256'])[:12]}…).")

    resolver = RegisteredBindingResolver(path)
    store = InitialExecutionProjectionStore(path, resolver)
    envelope = resolver(TASK, JOB, CAPABILITY, "openclaw", _runtime_input(path))
    request: dict[str, Any] = {
        "expected_status": "QUEUED",
        "expected_revision": 1,
        "expected_attempt": 0,
        "expected_metadata_sha256": sha256_hex({}),
        "expected_required_capabilities_sha256": sha256_hex([]),
        "expected_job_id": JOB,
        "expected_execution_digest": envelope["execution_digest"],
        "required_capability": CAPABILITY,
        "adapter": "openclaw",
        "authorization_id": OWNER,
        "idempotency_key": "projection-release-notes-1",
        "reason": "first governed runtime for the release notes",
    }
    drifted = {
        **request,
        "idempotency_key": "projection-drift",
        "expected_execution_digest": "f" * 64,
    }
    try:
        store.project(TASK, InitialExecutionProjectionRequest.from_mapping(drifted))
        say("4. A drifted request was accepted: this is a bug.")
        return 1
    except LedgerError as refused:
        say(f"4. A request that expects another envelope is refused: {refused.code}.")
    try:
        first = store.project(TASK, InitialExecutionProjectionRequest.from_mapping(request))
        say(
            f"5. Projected: revision {first['revision']}, execution digest "
            f"{str(first['execution_digest'])[:19]}…, idempotent={first['idempotent']}."
        )
        again = store.project(TASK, InitialExecutionProjectionRequest.from_mapping(request))
        say(f"6. Same request again: answered from the ledger, idempotent={again['idempotent']}.")
    finally:
        store.close()
        resolver.close()

    with Database(path) as db:
        task = db.read(lambda conn: fetch_one(conn, "get_task", {"task_id": TASK}))
        events = db.read(lambda conn: fetch_all(conn, "events_for_task", {"task_id": TASK}))
    assert task is not None
    execution = json.loads(task["metadata_json"])["execution"]
    say()
    say(f"Task {TASK}: {task['status']}, revision {task['revision']}, attempt {task['attempt']}")
    say(f"  requires   {json.loads(task['required_capabilities_json'])}")
    say(f"  runs       {execution['action']} on adapter {execution['adapter']}")
    bound = execution["binding"]
    say(f"  bound to   {bound['repository']} @ {bound['target_branch']}")
    say(f"  governance {', '.join(f'{k}={v}' for k, v in execution['governance'].items())}")
    say("Events:")
    for event in events:
        say(f"  #{event['event_id']:<3} {event['created_at']}  {event['event_type']}")
    say()
    say(f"Inspect it yourself: .venv/bin/aios-ledger --db {path} events {TASK}")
    return 0


def _runtime_input(path: Path) -> Any:
    with Database(path) as db:
        row = db.read(lambda conn: fetch_one(conn, "get_task", {"task_id": TASK}))
    assert row is not None
    return runtime_input_of(TaskRow.from_row(row))


def main() -> int:
    try:
        return run(sys.argv[1:])
    except LedgerError as refused:
        sys.stderr.write(f"{refused}\n")
        return 1


if __name__ == "__main__":
    raise SystemExit(main())
