"""Contention with a history checker: several processes run create, claim, heartbeat, submit,
verify and expire against one file with 1-2 s leases and the real clock, each logging what it
was told; `reliability_history.check_history` classifies the outcome as Jepsen does (lost,
duplicated, unexpected) and checks that no two holders ever had a valid lease on one task at
once. Zero of each is required. Longer and with more processes with AIOS_SOAK=1.
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import psycopg
import pytest
from aios_ledger.shell import TaskLedger
from aios_ledger.shell.db.engines.postgresql import PostgresTarget
from conftest import both_engines
from reliability_checks import (
    Event,
    LedgerContents,
    contents_anomalies,
    read_contents,
)
from reliability_figures import record_figures
from reliability_history import Operation, check_history, read_histories

SOAK = os.environ.get("AIOS_SOAK") == "1"
PROCESSES = 6 if SOAK else 4
PG_PROCESSES = 8
SECONDS = 120 if SOAK else 6
CLIENT = Path(__file__).with_name("reliability_contention_client.py")


pytest_generate_tests = both_engines


@pytest.mark.slow
def test_concurrent_clients_history_has_no_anomalies(
    tmp_path: Path, ledger_target: Path, engine: str
) -> None:
    """On PostgreSQL with 8 processes (the issue's figure): one server, many machines' worth of
    clients."""
    processes = PROCESSES if engine == "sqlite" else PG_PROCESSES
    figures = _run_clients(tmp_path, ledger_target, processes, disrupt=None)
    assert figures["indeterminate"] == 0
    name = "contention" if engine == "sqlite" else "contention_postgresql"
    record_figures(name, {**figures, "seconds": SECONDS, "anomalies": 0})


@pytest.mark.slow
def test_clients_ride_out_the_server_going_away(
    tmp_path: Path, ledger_target: Path, engine: str
) -> None:
    """The same on PostgreSQL while every connection to the ledger's database is cut, twice,
    mid-run (pg_terminate_backend: what a restart does to the clients; with
    AIOS_PG_RESTART=1 the server itself is restarted with pg_ctlcluster). Clients see
    DATABASE_UNAVAILABLE only when the outcome is unknown, ask again, and nothing acknowledged
    is lost; `verify` is intact afterwards."""
    if engine != "postgresql":
        pytest.skip("a server to go away is PostgreSQL's")
    figures = _run_clients(tmp_path, ledger_target, PG_PROCESSES, disrupt=str(ledger_target))
    assert figures["disruptions"] >= 1
    record_figures("contention_postgresql_disrupted", {**figures, "seconds": SECONDS})


def _disrupt(url: str, stop: threading.Event, done: list[int]) -> None:
    """Cut every other connection to the ledger's database at a third and two thirds of the
    run (or restart the whole server, with AIOS_PG_RESTART=1)."""
    target = PostgresTarget.parse(url)
    for fraction in (1 / 3, 2 / 3):
        if stop.wait(SECONDS * fraction / (2 if done else 1)):
            return
        if os.environ.get("AIOS_PG_RESTART") == "1":
            subprocess.run(["pg_ctlcluster", "15", "main", "restart"], check=True, timeout=120)
        else:
            with psycopg.connect(target.conninfo, autocommit=True) as admin:
                admin.execute(
                    "SELECT pg_terminate_backend(pid) FROM pg_stat_activity"
                    " WHERE datname = current_database() AND pid <> pg_backend_pid()"
                )
        done.append(1)


def _run_clients(
    tmp_path: Path, target: Path, processes: int, *, disrupt: str | None
) -> dict[str, Any]:
    TaskLedger(target).close()  # migrated once, before the clients race to open it
    histories = [tmp_path / f"history-{n}.jsonl" for n in range(processes)]
    clients = [
        subprocess.Popen(
            [
                sys.executable,
                str(CLIENT),
                str(target),
                str(path),
                str(n),
                str(SECONDS),
                str(80 + n),
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for n, path in enumerate(histories)
    ]
    stop = threading.Event()
    disruptions: list[int] = []
    disruptor = None
    if disrupt is not None:
        disruptor = threading.Thread(target=_disrupt, args=(disrupt, stop, disruptions))
        disruptor.start()
    try:
        for client in clients:
            _, errors = client.communicate(timeout=SECONDS + 240)
            assert client.returncode == 0, errors
    finally:
        stop.set()
        if disruptor is not None:
            disruptor.join()

    contents = read_contents(target)
    assert contents_anomalies(contents) == []
    outcome = check_history(contents, read_histories(histories))
    figures: dict[str, Any] = outcome["figures"]
    assert outcome["lost"] == []
    assert outcome["duplicated"] == []
    assert outcome["unexpected"] == []
    assert outcome["lease_overlaps"] == []
    # The run exercised what it is about: leases lapsed and were taken over, stale holders
    # were turned away, replays were answered.
    assert figures["reclaims_of_one_task"] > 0
    assert figures["stale_holder_refusals"] > 0
    assert figures["replays"] > 0
    return {**figures, "disruptions": len(disruptions)}


# -- the checker itself sees what it is meant to see ----------------------------------------


def _event(event_id: int, kind: str, at: str, **payload: object) -> Event:
    return Event(event_id, "t", "a", kind, dict(payload), at)


def _op(
    serial: int, op: str, args: dict[str, object], t0: float, t1: float, value: object
) -> Operation:
    return Operation(0, serial, op, args, t0, "ok", t1, value, None)


def test_the_checker_reports_an_overlap_a_loss_and_an_unexpected_write() -> None:
    from reliability_history import epoch

    base = epoch("2026-01-01T00:00:10Z")
    events = [
        _event(1, "TASK_CREATED", "2026-01-01T00:00:00Z", idempotency_key="c"),
        _event(2, "TASK_CLAIMED", "2026-01-01T00:00:01Z", lease_expires_at="2026-01-01T00:00:10Z"),
        # A second claim inside the first lease: two holders at once.
        _event(3, "TASK_CLAIMED", "2026-01-01T00:00:05Z", lease_expires_at="2026-01-01T00:00:15Z"),
        _event(
            4, "TASK_HEARTBEAT", "2026-01-01T00:00:06Z", lease_expires_at="2026-01-01T00:00:16Z"
        ),
    ]
    contents = LedgerContents(
        tasks={"t": {"task_id": "t"}},
        events={"t": events},
        keys={"zzz": {"subject": "t", "response": {}}},
        integrity="ok",
        intact=True,
        findings=[],
    )
    operations = [
        _op(
            1,
            "create",
            {"task": {"task_id": "t"}, "key": "c"},
            base - 11,
            base - 10,
            {"task_id": "t", "revision": 1},
        ),
        _op(2, "claim", {"key": "k1"}, base - 10, base - 9, {"task_id": "t", "revision": 2}),
        _op(3, "claim", {"key": "k2"}, base - 6, base - 5, {"task_id": "t", "revision": 3}),
        # The first holder is told its heartbeat went through: it was applied in k2's tenure.
        _op(
            4, "heartbeat", {"claim_key": "k1"}, base - 5, base - 4, {"task_id": "t", "revision": 4}
        ),
        # An acknowledged submit that is not in the file.
        _op(
            5,
            "submit",
            {"key": "s", "claim_key": "k2"},
            base - 3,
            base - 2,
            {"task_id": "t", "revision": 5},
        ),
    ]
    outcome = check_history(contents, operations)
    assert any("while the lease" in text for text in outcome["lease_overlaps"])
    assert any("another holder's tenure" in text for text in outcome["lease_overlaps"])
    assert any("submit of t acknowledged at revision 5" in text for text in outcome["lost"])
    assert any("c acknowledged, no idempotency row" in text for text in outcome["lost"])
    assert "key zzz was never used" in outcome["unexpected"]
