"""Adoption of an older runtime's database: its events are sealed once, content unchanged."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from aios_ledger.shell import Database, migrate_database, verify_log
from legacy_fixtures import LEGACY_DDL as LEGACY_SCHEMA
from test_log_support import build_log, codes_at, raw_rows, tamper

# The older runtime wrote JSON its own way (spaces, key order): kept byte for byte.
LEGACY_EVENTS = [
    ("task-1", None, "TASK_CREATED", '{"b": 1, "a": [1, 2]}', "2026-08-20T00:00:00Z"),
    ("task-1", "agent-7", "TASK_CLAIMED", "{}", "2026-08-20T00:00:01Z"),
    (None, None, "LEDGER_NOTE", '{"x": "\\u00e9"}', "2026-08-20T00:00:02Z"),
    ("task-2", None, "TASK_CREATED", "{}", "2026-08-20T00:00:03Z"),
]


def make_legacy(path: Path, *, delete: tuple[int, ...] = ()) -> None:
    con = sqlite3.connect(path)
    con.executescript(LEGACY_SCHEMA)
    con.executemany(
        "INSERT INTO events(task_id, agent_id, event_type, payload_json, created_at) "
        "VALUES (?, ?, ?, ?, ?)",
        LEGACY_EVENTS,
    )
    for event_id in delete:  # the older runtime's history may have holes
        con.execute("DELETE FROM events WHERE event_id = ?", (event_id,))
    con.commit()
    con.close()


def events_of(path: Path) -> list[tuple[object, ...]]:
    """The events as the older runtime wrote them: its columns, and (adopted) no actor."""
    rows = raw_rows(path, "SELECT * FROM events ORDER BY event_id")
    return [row[:6] for row in rows if len(row) == 6 or row[6] is None]


def test_adoption_seals_old_events_once_and_keeps_their_content(tmp_path: Path) -> None:
    path = tmp_path / "state.sqlite3"
    make_legacy(path)
    before = events_of(path)
    with Database.as_found(path) as db:
        report = migrate_database(db)
        assert report.adopted_legacy
        assert report.sealed_at_adoption == len(LEGACY_EVENTS)
        assert migrate_database(db).sealed_at_adoption == 0
    with Database(path) as db:
        verified = verify_log(db).public()
    assert events_of(path) == before
    assert verified["intact"] is True
    assert verified["sealed_at_adoption"] == len(LEGACY_EVENTS)
    assert verified["findings"] == []
    chains = raw_rows(path, "SELECT chain, chain_seq, sealed_at_adoption FROM event_seals")
    assert chains == [
        ("task:task-1", 1, 1),
        ("task:task-1", 2, 1),
        ("ledger", 1, 1),
        ("task:task-2", 1, 1),
    ]


def test_new_events_after_adoption_extend_the_old_chains(tmp_path: Path) -> None:
    path = tmp_path / "state.sqlite3"
    make_legacy(path)
    build_log(path, ["task-1", None, "task-3"])
    with Database(path) as db:
        report = verify_log(db).public()
    assert report["intact"] is True
    assert (report["events"], report["sealed_at_adoption"]) == (7, 4)
    assert raw_rows(path, "SELECT chain_seq FROM event_seals WHERE event_id = 5") == [(3,)]


def test_tampering_an_adopted_event_is_found(tmp_path: Path) -> None:
    path = tmp_path / "state.sqlite3"
    make_legacy(path)
    build_log(path, ["task-1"])
    tamper(path, ("UPDATE events SET payload_json = '{}' WHERE event_id = 1", ()))
    with Database(path) as db:
        assert codes_at(verify_log(db).public()) == {("CONTENT_CHANGED", 1)}


def test_holes_from_before_adoption_are_tolerated_not_hidden(tmp_path: Path) -> None:
    path = tmp_path / "state.sqlite3"
    make_legacy(path, delete=(2, 4))  # a hole in the middle and at the end
    build_log(path, ["task-1", "task-9"])
    with Database(path) as db:
        report = verify_log(db).public()
    assert report["intact"] is True
    assert report["tolerated_adoption_gaps"] == 2
    # An adopted event deleted later still breaks its chain.
    tamper(
        path,
        ("DELETE FROM events WHERE event_id = 1", ()),
        ("DELETE FROM event_seals WHERE event_id = 1", ()),
    )
    with Database(path) as db:
        found = codes_at(verify_log(db).public())
    assert ("CHAIN_GAP", 5) in found
