"""Shared helpers of the tamper-evident log tests (no tests here).

Logs are built through the ledger's own write path (`Database.write`, each event sealed onto
the log's tail in a plan and applied as a decision's plan is); tampering goes around it with a
stdlib `sqlite3` connection that first drops the append-only triggers, as an attacker holding
the file would.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from aios_ledger.core import chain_of
from aios_ledger.core.actors import Actor
from aios_ledger.core.log import EventAppend
from aios_ledger.core.log.plan import sealed_plan
from aios_ledger.shell.db.apply import PlanExecutor
from aios_ledger.shell.db.connection import Database
from aios_ledger.shell.db.merkle import integrate
from aios_ledger.shell.db.run import Connection
from conftest import is_postgres
from legacy_fixtures import _postgres_reader, rows

TRIGGERS = (
    "events_refuse_update",
    "events_refuse_delete",
    "event_seals_refuse_update",
    "event_seals_refuse_delete",
)

# Who the decisions here act as.
ACTOR = Actor("tester", "library")


def event(task: str | None, number: int, *, kind: str = "TASK_HEARTBEAT") -> EventAppend:
    return EventAppend(
        task_id=task,
        agent_id=None if number % 4 == 0 else f"agent-{number % 3}",
        event_type=kind,
        payload={"n": number, "note": "é"},
        created_at=f"2026-08-20T00:00:{number % 60:02d}Z",
        actor=ACTOR,
    )


def build_log(path: Path, tasks: Sequence[str | None], *, start: int = 0) -> list[int]:
    """Append one event per entry of `tasks` (a task id, or None for a ledger event), then
    integrate them into the Merkle log (on PostgreSQL an integrator's step after the write)."""

    def write(conn: Connection) -> list[int]:
        plans = PlanExecutor(conn)
        appended = []
        for number, task in enumerate(tasks):
            tail = plans.tail(chain_of(task))
            plan = sealed_plan((), (event(task, start + number),), None, tail=tail)
            plans.apply(plan)
            appended.append(plan.events[0].event.event_id)
        return appended

    with Database(path) as db:
        appended = db.write(write)
        integrate(db)
        return appended


ROUND_ROBIN = ("t-a", "t-b", None, "t-c", "t-a", "t-b", "t-a", "t-c", None, "t-a", "t-b", "t-a")


_PG_TRANSLATIONS = {
    # SQLite's AUTOINCREMENT counter is PostgreSQL's sequence.
    "UPDATE sqlite_sequence SET seq = ? WHERE name = 'events'": "SELECT setval('event_ids', ?)",
    # An event id SQLite would have handed out (PostgreSQL's events have no default id).
    "INSERT INTO events(task_id, agent_id, event_type, payload_json, created_at) "
    "VALUES ('t-a', 'mallory', 'TASK_VERIFIED', '{}', '2026-08-20T00:00:00Z')": (
        "INSERT INTO events(event_id, task_id, agent_id, event_type, payload_json, created_at) "
        "SELECT max(event_id) + 1, 't-a', 'mallory', 'TASK_VERIFIED', '{}', "
        "'2026-08-20T00:00:00Z' FROM events"
    ),
}


def tamper(path: Path, *statements: tuple[str, Sequence[Any]]) -> None:
    if is_postgres(path):
        # An attacker with the server's superuser: triggers (the append-only ones, the foreign
        # keys' and the id counter's) are off for the session.
        with _postgres_reader(str(path)) as pg, pg.transaction():
            pg.execute("SET LOCAL session_replication_role = replica")
            for statement, params in statements:
                text = _PG_TRANSLATIONS.get(statement, statement).replace("?", "%s")
                pg.execute(text.encode(), list(params) or None)
        return
    con = sqlite3.connect(path)
    try:
        for trigger in TRIGGERS:
            con.execute(f"DROP TRIGGER IF EXISTS {trigger}")
        for statement, params in statements:
            con.execute(statement, params)
        con.commit()
    finally:
        con.close()


def raw_rows(path: Path, query: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
    if is_postgres(path):
        return rows(path, query, tuple(params))
    con = sqlite3.connect(path)
    try:
        return con.execute(query, params).fetchall()
    finally:
        con.close()


def content_of(path: Path, event_id: int) -> tuple[Any, ...]:
    rows = raw_rows(
        path,
        "SELECT task_id, agent_id, event_type, payload_json, created_at FROM events "
        "WHERE event_id = ?",
        (event_id,),
    )
    return rows[0]


def set_content(path: Path, event_id: int, content: Sequence[Any]) -> tuple[str, Sequence[Any]]:
    return (
        "UPDATE events SET task_id = ?, agent_id = ?, event_type = ?, payload_json = ?, "
        "created_at = ? WHERE event_id = ?",
        (*content, event_id),
    )


def codes_at(report: dict[str, Any]) -> set[tuple[str, int | None]]:
    return {(finding["code"], finding.get("event_id")) for finding in report["findings"]}
