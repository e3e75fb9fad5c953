"""Notifications (`Database.notify`, `listen`): a write through one Database wakes a listener on
another, on both engines (SQLite's within the process), and a server's waiting claims hear a
create announced through another server on the same ledger."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from aios_ledger.shell.api.backend import WORK_CHANNEL, ApiSettings, Backend
from aios_ledger.shell.db.connection import Database
from conftest import both_engines, ledger_schema_url

pytest_generate_tests = both_engines


def test_a_notification_wakes_a_listener_on_another_database(ledger_target: str | Path) -> None:
    with Database(ledger_target) as writer, Database(ledger_target) as other:
        listener = other.listen(WORK_CHANNEL)
        try:
            assert not listener.wait(0.05)
            writer.notify(WORK_CHANNEL)
            assert listener.wait(10)
            assert not listener.wait(0.05)  # heard once
            writer.notify("work")
            writer.notify("work")
            assert listener.wait(10)
        finally:
            listener.close()


def test_a_notification_before_listening_is_not_heard(ledger_target: str | Path) -> None:
    with Database(ledger_target) as db:
        db.notify(WORK_CHANNEL)
        listener = db.listen(WORK_CHANNEL)
        try:
            assert not listener.wait(0.05)
        finally:
            listener.close()


def test_a_create_announced_through_one_server_wakes_another_servers_long_poll(
    ledger_target: str | Path,
) -> None:
    settings = ApiSettings(db_path=str(ledger_target))
    polling, creating = Backend(settings), Backend(settings)
    try:

        async def woken() -> None:
            # The listener wakes the waiters once when it begins (work announced before it);
            # every wake after is a notification.
            await asyncio.wait_for(polling.work_signal().wait(), 10)
            signal = polling.work_signal()
            await asyncio.to_thread(creating.announce_work)
            await asyncio.wait_for(signal.wait(), 10)

        asyncio.run(woken())
    finally:
        polling.close()
        creating.close()


def test_a_notification_stays_with_its_ledger(
    engine: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    """Two ledgers (two files; two schemas of one PostgreSQL database): neither hears the
    other's notifications."""
    first: str | Path = tmp_path / "first.db"
    second: str | Path = tmp_path / "second.db"
    if engine == "postgresql":
        database = request.getfixturevalue("postgres_database")
        first, second = ledger_schema_url(database), ledger_schema_url(database)
    with Database(first) as one, Database(second) as two:
        listener = two.listen(WORK_CHANNEL)
        try:
            one.notify(WORK_CHANNEL)
            assert not listener.wait(0.2)
            two.notify(WORK_CHANNEL)
            assert listener.wait(10)
        finally:
            listener.close()
