"""Crash: a writer doing random ledger operations is killed with SIGKILL at random points.

After every kill: `PRAGMA integrity_check` is ok, the event log verifies intact, no transition is
half applied (`reliability_checks.ledger_anomalies`), every operation the writer was answered
(its fsync'd completion record) is in the file with the answer it got, no refused keyed
operation left anything behind, nothing is there that was never asked for, and the next writer
opens the same file and carries on (it completes an operation before it may be killed). More
kills with AIOS_SOAK=1.
"""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

import apsw
import pytest
from aios_ledger.shell import TaskLedger
from aios_ledger.shell.db.migrator import known_migrations
from reliability_checks import (
    EVENT_OF_EXPIRE,
    EVENT_OF_HEARTBEAT,
    EVENT_OF_OPERATION,
    LedgerContents,
    contents_anomalies,
    ledger_anomalies,
    read_contents,
    response_core,
)
from reliability_crash_writer import SYNCHRONOUS_ENV, read_log
from reliability_figures import record_figures

SOAK = os.environ.get("AIOS_SOAK") == "1"
KILLS = 300 if SOAK else 10
WRITER = Path(__file__).with_name("reliability_crash_writer.py")


def acknowledged_anomalies(contents: LedgerContents, records: list[dict[str, Any]]) -> list[str]:
    """Every acknowledged operation is in the file as answered; refusals left nothing."""
    found: list[str] = []
    invoked_keys = {
        record["args"]["key"]
        for record in records
        if record["kind"] == "invoke" and "key" in record["args"]
    }
    for key in contents.keys:
        if key not in invoked_keys:
            found.append(f"unexpected: key {key} was never used")
    for record in records:
        op, args, kind = record["op"], record["args"], record["kind"]
        if kind == "fail" and "key" in args and args["key"] in contents.keys:
            found.append(f"refused {op} {args['key']} ({record['code']}) left its key behind")
        if kind != "ok" or record["value"] is None:
            continue
        value = record["value"]
        if op == "expire":
            applied = [
                (item["task_id"], item["revision"], EVENT_OF_EXPIRE) for item in value["expired"]
            ]
        else:
            kind_of_event = EVENT_OF_OPERATION.get(op, EVENT_OF_HEARTBEAT)
            applied = [(value["task_id"], value["revision"], kind_of_event)]
        for task_id, revision, event_type in applied:
            events = contents.events.get(task_id, [])
            if not 1 <= revision <= len(events) or events[revision - 1].event_type != event_type:
                found.append(f"lost: acknowledged {op} of {task_id} at revision {revision}")
        if "key" in args:
            row = contents.keys.get(args["key"])
            if row is None:
                found.append(f"lost: acknowledged {op} {args['key']} has no idempotency row")
            elif response_core(row["response"]) != response_core(value):
                found.append(f"acknowledged {op} {args['key']} was answered otherwise")
    return found


@pytest.mark.slow
@pytest.mark.parametrize("synchronous", ["FULL", "NORMAL"])
def test_sigkill_at_random_points_loses_nothing_acknowledged(
    tmp_path: Path, synchronous: str
) -> None:
    """At NORMAL too: a killed process is not a power cut, so nothing acknowledged may be lost,
    whether or not the background checkpointer was copying the log (`wal_pages_seen`)."""
    db, log = tmp_path / "crash.sqlite3", tmp_path / "operations.jsonl"
    rng = random.Random(int(os.environ.get("AIOS_CRASH_SEED", "8")))
    env = {**os.environ, SYNCHRONOUS_ENV: synchronous}
    in_flight = 0
    largest_wal = 0
    for round_number in range(KILLS + 1):
        last = round_number == KILLS
        argv = [sys.executable, str(WRITER), str(db), str(log), str(1000 + round_number)]
        if last:
            argv.append("40")  # the last writer finishes on its own: the file is still usable
        writer = subprocess.Popen(
            argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env
        )
        assert writer.stdout is not None
        opening, ready = writer.stdout.readline(), writer.stdout.readline()
        assert opening == "opening\n"
        if last:
            _, errors = writer.communicate(timeout=120)
            assert writer.returncode == 0, errors
        else:
            if ready != "ready\n":
                writer.kill()
                _, errors = writer.communicate(timeout=30)
                raise AssertionError(f"round {round_number}: the writer did not carry on: {errors}")
            time.sleep(rng.uniform(0.0, 0.35))
            writer.send_signal(signal.SIGKILL)
            writer.communicate(timeout=30)
            assert writer.returncode == -signal.SIGKILL
            wal = Path(f"{db}-wal")
            largest_wal = max(largest_wal, wal.stat().st_size if wal.exists() else 0)
        records = read_log(str(log))
        if records and records[-1]["kind"] == "invoke":
            in_flight += 1
        contents = read_contents(db)
        anomalies = contents_anomalies(contents) + acknowledged_anomalies(contents, records)
        assert anomalies == [], f"after kill {round_number}: {anomalies[:10]}"

    records = read_log(str(log))
    answered = Counter(record["kind"] for record in records if record["kind"] != "invoke")
    operations = Counter(record["op"] for record in records if record["kind"] == "ok")
    replays = sum(
        1
        for record in records
        if record["kind"] == "ok"
        and isinstance(record["value"], dict)
        and record["value"].get("idempotent") is True
    )
    contents = read_contents(db)
    # The run did what it is meant to: every kind of operation succeeded, and kills landed
    # inside operations (a kill between two operations tests less).
    assert set(operations) >= {"create", "claim", "heartbeat", "submit", "verify", "expire"}
    assert in_flight >= 1
    record_figures(
        "crash" if synchronous == "FULL" else "crash_normal",
        {
            "kills": KILLS,
            # At NORMAL, past 1000 the checkpointer's rounds were running when a kill landed.
            "wal_pages_seen": largest_wal // (4096 + 24),
            "kills_inside_an_operation": in_flight,
            "operations_acknowledged": answered["ok"],
            "operations_refused": answered["fail"],
            "in_flight_replayed_as_recorded_answer": replays,
            "tasks": len(contents.tasks),
            "events": sum(len(events) for events in contents.events.values()),
            "anomalies": 0,
        },
    )


def test_the_checks_see_a_half_applied_transition(tmp_path: Path) -> None:
    db = tmp_path / "half.sqlite3"
    with TaskLedger(db) as ledger:
        ledger.create_task({"task_id": "t", "goal": "g", "instructions": "i"}, idempotency_key="c")
        ledger.claim(agent_id="a", capabilities=[], lease_seconds=60)
    assert ledger_anomalies(db) == []
    conn = apsw.Connection(str(db))
    try:
        # A row moved on without its event, and an event whose idempotency row is missing.
        conn.execute("UPDATE tasks SET revision = revision + 1, status = 'QUEUED'")
        conn.execute("DELETE FROM task_idempotency WHERE idempotency_key = 'c'")
    finally:
        conn.close()
    found = ledger_anomalies(db)
    assert any("revision 3 but 2 events" in text for text in found)
    assert any("status QUEUED but the events lead to CLAIMED" in text for text in found)
    assert any("TASK_CREATED at revision 1 has no key row" in text for text in found)


@pytest.mark.slow
def test_sigkill_while_a_new_file_is_created_and_migrated(tmp_path: Path) -> None:
    """Killed while it creates and migrates a new file (or just after): the next process opens
    it, finishes the migration if it was cut off, and works."""
    rng = random.Random(88)
    rounds = 100 if SOAK else 5
    cut_off = 0
    for round_number in range(rounds):
        db = tmp_path / f"fresh-{round_number}.sqlite3"
        log = tmp_path / f"fresh-{round_number}.jsonl"
        argv = [sys.executable, str(WRITER), str(db), str(log), str(round_number)]
        writer = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        assert writer.stdout is not None
        assert writer.stdout.readline() == b"opening\n"
        time.sleep(rng.uniform(0.0, 0.015))  # creating and migrating take about 10 ms here
        writer.send_signal(signal.SIGKILL)
        writer.communicate(timeout=30)
        cut_off += not migrated(db)
        TaskLedger(db).close()  # opens and migrates what the killed writer left
        contents = read_contents(db)
        anomalies = contents_anomalies(contents) + acknowledged_anomalies(
            contents, read_log(str(log))
        )
        assert anomalies == [], f"round {round_number}: {anomalies[:10]}"
        with TaskLedger(db) as ledger:
            ledger.create_task({"goal": "g", "instructions": "i"}, idempotency_key="after")
        assert ledger_anomalies(db) == []
    record_figures("crash_new_file", {"kills": rounds, "kills_before_migrated": cut_off})


def migrated(db: Path) -> bool:
    """Whether the file holds every migration (read without migrating it)."""
    if not db.exists():
        return False
    conn = apsw.Connection(str(db))  # read-only would fail on a WAL left to recover
    try:
        tables = {row[0] for row in conn.execute("SELECT name FROM sqlite_master")}
        if "schema_migrations" not in tables:
            return False
        applied = {row[0] for row in conn.execute("SELECT version FROM schema_migrations")}
        return len(applied) == len(known_migrations())
    finally:
        conn.close()
