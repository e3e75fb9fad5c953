"""What must hold of a ledger file after anything happened to it: the invariants the crash and
contention tests check after every kill and every run (see RELIABILITY.md).

`ledger_anomalies(path)` reads the file with the ledger's own `Database` (as the next process
would) and lists every broken invariant as text; an empty list means the file is sound:
`PRAGMA integrity_check` is ok, the sealed event log verifies intact, and no transition is half
applied: every task's revision is the number of its events, its row is what replaying its events
gives, and every idempotency row points at the event it answered for (and every keyed event has
its idempotency row).
"""

from __future__ import annotations

import itertools
import json
from collections import defaultdict
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any, cast

import apsw
import attrs
from aios_ledger.core import Timestamp
from aios_ledger.shell import Database, verify_log
from aios_ledger.shell.db.connection import fetch_value
from aios_ledger.shell.db.engines.postgresql import PgConnection
from aios_ledger.shell.db.run import Connection, SchemaConnection

# The event each idempotent operation appends, and the operations that always carry a key.
EVENT_OF_OPERATION = {
    "create": "TASK_CREATED",
    "claim": "TASK_CLAIMED",
    "submit": "RESULT_SUBMITTED",
    "verify": "TASK_VERIFIED",
    "cancel": "TASK_CANCELLED",
}
ALWAYS_KEYED = {"TASK_CREATED", "RESULT_SUBMITTED", "TASK_VERIFIED", "TASK_CANCELLED"}
EVENT_OF_HEARTBEAT = "TASK_HEARTBEAT"
EVENT_OF_EXPIRE = "TASK_LEASE_EXPIRED"


@attrs.frozen
class Event:
    event_id: int
    task_id: str
    agent_id: str | None
    event_type: str
    payload: dict[str, Any]
    created_at: str


@attrs.frozen
class LedgerContents:
    """Everything the checks read, from one snapshot."""

    tasks: dict[str, dict[str, Any]]
    events: dict[str, list[Event]]
    keys: dict[str, dict[str, Any]]  # idempotency key -> row, response parsed
    integrity: str
    intact: bool
    findings: list[Any]


def _rows(conn: SchemaConnection, query: str) -> list[dict[str, Any]]:
    if isinstance(conn, PgConnection):
        found = conn.execute(query)
        names = [column.name for column in found.description or ()]
        return [dict(zip(names, row, strict=True)) for row in found]
    cursor = conn.execute(query)
    try:
        columns = [column[0] for column in cursor.get_description()]
    except apsw.ExecutionCompleteError:
        return []
    return [dict(zip(columns, row, strict=True)) for row in cursor]


def read_contents(path: str | Path) -> LedgerContents:
    db = Database(path, migrate=False)
    try:
        # SQLite's own check of the file; PostgreSQL checks its pages itself (amcheck would be
        # the nearest equivalent, and is not installed everywhere).
        integrity = (
            "ok"
            if db.engine == "postgresql"
            else str(db.read(lambda conn: fetch_value(conn, "pragma_integrity_check")))
        )
        report = verify_log(db)

        def work(read: Connection) -> tuple[list[Any], list[Any], list[Any]]:
            conn = cast(SchemaConnection, read)  # every engine's connection is one: a read here
            return (
                _rows(conn, "SELECT * FROM tasks"),
                _rows(conn, "SELECT * FROM events ORDER BY event_id"),
                _rows(conn, "SELECT * FROM task_idempotency"),
            )

        tasks, events, keys = db.read(work)
    finally:
        db.close()
    by_task: dict[str, list[Event]] = defaultdict(list)
    for row in events:
        by_task[row["task_id"]].append(
            Event(
                row["event_id"],
                row["task_id"],
                row["agent_id"],
                row["event_type"],
                json.loads(row["payload_json"]),
                row["created_at"],
            )
        )
    return LedgerContents(
        tasks={row["task_id"]: row for row in tasks},
        events=dict(by_task),
        keys={
            row["idempotency_key"]: {**row, "response": json.loads(row["response_json"])}
            for row in keys
        },
        integrity=integrity,
        intact=report.intact,
        findings=list(report.public().get("findings", [])),
    )


def replay_status(events: Iterable[Event]) -> list[str]:
    """The status after each event, from the event types (and their recorded next state)."""
    statuses = []
    for event in events:
        kind = event.event_type
        if kind == "TASK_CREATED":
            status = "QUEUED"
        elif kind in ("TASK_CLAIMED", "TASK_HEARTBEAT"):
            status = "CLAIMED"
        elif kind == "RESULT_SUBMITTED":
            status = "SUBMITTED"
        elif kind == "TASK_CANCELLED":
            status = "CANCELLED"
        elif kind in ("TASK_VERIFIED", "TASK_LEASE_EXPIRED"):
            status = str(event.payload["next_state"])
        else:
            status = f"UNKNOWN:{kind}"
        statuses.append(status)
    return statuses


def _task_anomalies(task: Mapping[str, Any], events: list[Event]) -> list[str]:
    tid = task["task_id"]
    found: list[str] = []
    if task["revision"] != len(events):
        found.append(f"{tid}: revision {task['revision']} but {len(events)} events")
    if not events or events[0].event_type != "TASK_CREATED":
        found.append(f"{tid}: the first event is not TASK_CREATED")
        return found
    if sum(1 for e in events if e.event_type == "TASK_CREATED") != 1:
        found.append(f"{tid}: more than one TASK_CREATED")
    statuses = replay_status(events)
    if statuses[-1] != task["status"]:
        found.append(f"{tid}: status {task['status']} but the events lead to {statuses[-1]}")
    claims = sum(1 for e in events if e.event_type == "TASK_CLAIMED")
    if task["attempt"] != claims:
        found.append(f"{tid}: attempt {task['attempt']} but {claims} claims")
    # Time never goes back along a task's events: each transition reads the clock once it
    # holds the task, after whatever wrote the task before it committed.
    for earlier, later in itertools.pairwise(events):
        if (
            Timestamp.parse(later.created_at).epoch_ms
            < Timestamp.parse(earlier.created_at).epoch_ms
        ):
            found.append(
                f"{tid}: {later.event_type} at {later.created_at} after "
                f"{earlier.event_type} at {earlier.created_at}"
            )
    if task["updated_at"] != events[-1].created_at:
        found.append(
            f"{tid}: updated_at {task['updated_at']} but the last event at {events[-1].created_at}"
        )
    leased = [e for e in events if e.event_type in ("TASK_CLAIMED", "TASK_HEARTBEAT")]
    if task["status"] == "CLAIMED":
        last = leased[-1]
        if task["lease_expires_at"] != last.payload["lease_expires_at"]:
            found.append(f"{tid}: lease_expires_at disagrees with its last claim/heartbeat")
        if task["lease_token_hash"] is None or task["claimed_by"] is None:
            found.append(f"{tid}: CLAIMED without a holder")
    elif any(task[c] is not None for c in ("claimed_by", "lease_token_hash", "lease_expires_at")):
        found.append(f"{tid}: {task['status']} but a lease is left on the row")
    submits = [e for e in events if e.event_type == "RESULT_SUBMITTED"]
    expected_key = submits[-1].payload["idempotency_key"] if submits else None
    if task["result_idempotency_key"] != expected_key:
        found.append(f"{tid}: result_idempotency_key disagrees with its last RESULT_SUBMITTED")
    if (task["result_digest"] is None) != (not submits):
        found.append(f"{tid}: result digest present/absent against its events")
    elif submits and task["result_digest"] != submits[-1].payload["result_digest"]:
        found.append(f"{tid}: result_digest disagrees with its last RESULT_SUBMITTED")
    return found


def ledger_anomalies(path: str | Path) -> list[str]:
    """Every broken invariant of the file at `path` (empty when it is sound)."""
    contents = read_contents(path)
    return contents_anomalies(contents)


def contents_anomalies(contents: LedgerContents) -> list[str]:
    found: list[str] = []
    if contents.integrity != "ok":
        found.append(f"integrity_check: {contents.integrity}")
    if not contents.intact:
        found.append(f"event log not intact: {contents.findings[:5]}")
    for task_id in set(contents.events) - set(contents.tasks) - {None}:  # None: ledger-level
        found.append(f"events of a task that does not exist: {task_id}")
    for task_id, task in contents.tasks.items():
        found.extend(_task_anomalies(task, contents.events.get(task_id, [])))
    # Every idempotency row answers for the event at its response's revision ...
    answered: set[tuple[str, int]] = set()
    for key, row in contents.keys.items():
        subject, response = row["subject"], row["response"]
        events = contents.events.get(subject, [])
        revision = response.get("revision")
        kind = EVENT_OF_OPERATION.get(row["operation"])
        if not isinstance(revision, int) or not 1 <= revision <= len(events):
            found.append(f"key {key}: answers for revision {revision} of {subject}, not there")
            continue
        event = events[revision - 1]
        if event.event_type != kind:
            found.append(f"key {key}: revision {revision} of {subject} is {event.event_type}")
        if (
            kind in ("TASK_CREATED", "RESULT_SUBMITTED")
            and event.payload.get("idempotency_key") != key
        ):
            found.append(f"key {key}: its event names key {event.payload.get('idempotency_key')}")
        if response.get("status") != replay_status(events)[revision - 1]:
            found.append(f"key {key}: answered status {response.get('status')} disagrees")
        if (subject, revision) in answered:
            found.append(f"key {key}: a second key answers for revision {revision} of {subject}")
        answered.add((subject, revision))
    # ... and every event that always carries a key has its idempotency row.
    for task_id, events in contents.events.items():
        if task_id is None:
            continue
        for index, event in enumerate(events, 1):
            if event.event_type in ALWAYS_KEYED and (task_id, index) not in answered:
                found.append(f"{task_id}: {event.event_type} at revision {index} has no key row")
    return found


def response_core(response: Mapping[str, Any]) -> dict[str, Any]:
    """A response without what differs between a recorded answer and its replay."""
    return {k: v for k, v in response.items() if k not in ("idempotent", "lease_token")}
