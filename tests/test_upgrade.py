"""`aios-ledger upgrade` on real 0.x ledgers, made by the last 0.x build on both engines
(tests/fixtures/ledger-0x.*, by tools/make_0x_ledgers.py): refused by ordinary commands, made
1.0 once and intact, and refused (unchanged) when tampered with or behind the last 0.x."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import psycopg
import pytest
from cli_runner import run_cli
from conftest import both_engines, postgres_url
from legacy_fixtures import dump
from test_log_support import raw_rows, tamper

pytest_generate_tests = both_engines

FIXTURES = Path(__file__).resolve().parent / "fixtures"
DUMP_SCHEMA = "aios_0x"  # the schema's name in the PostgreSQL dump


@pytest.fixture
def zero_x(
    engine: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, request: pytest.FixtureRequest
) -> str | Path:
    """A copy of the engine's 0.x ledger, its proposal bundles where verify looks for them."""
    if engine == "sqlite":
        target = tmp_path / "ledger.sqlite3"
        shutil.copyfile(FIXTURES / "ledger-0x.sqlite3", target)
        shutil.copytree(FIXTURES / "ledger-0x.sqlite3.proposals", tmp_path / f"{target}.proposals")
        return target
    url = postgres_url(request.getfixturevalue("postgres_database"))
    database, schema = url.split("?search_path=")
    script = (FIXTURES / "ledger-0x-postgresql.sql").read_text("utf-8")
    with psycopg.connect(database, autocommit=True) as conn:
        conn.execute(script.replace(DUMP_SCHEMA, schema).encode())
    bundles = tmp_path / "bundles"
    shutil.copytree(FIXTURES / "ledger-0x-postgresql.proposals", bundles)
    monkeypatch.setenv("AIOS_LEDGER_PROPOSALS_DIR", str(bundles))
    return url


def _cli(target: Path, *argv: str, input: str | None = None) -> tuple[int, str]:
    done = run_cli("--db", target, *argv, input=input)
    return done.returncode, done.stdout + done.stderr


def test_an_ordinary_command_on_a_0x_ledger_points_at_upgrade(zero_x: Path) -> None:
    before = dump(zero_x)
    for argv in (["task", "list"], ["verify"], ["migrate"], ["status"]):
        code, said = _cli(zero_x, *argv)
        assert code != 0 and "LEDGER_NEEDS_UPGRADE: " in said, (argv, said)
        assert "aios-ledger upgrade" in said and "Traceback" not in said
    assert dump(zero_x) == before


def test_upgrade_makes_a_0x_ledger_1_0_once_and_it_verifies(zero_x: Path) -> None:
    code, said = _cli(zero_x, "upgrade")
    assert code == 0, said
    upgraded = json.loads(said)
    assert upgraded["upgraded"] is True and upgraded["intact"] is True
    assert upgraded["from"] == "0.x at 0028" and upgraded["to"] == ["0001"]
    assert upgraded["events"] > 200
    versions = raw_rows(zero_x, "SELECT version FROM schema_migrations")
    assert [str(row[0]) for row in versions] == ["0001"]
    code, said = _cli(zero_x, "verify")
    assert code == 0 and json.loads(said)["intact"] is True, said
    # Again: it says so and changes nothing.
    before = dump(zero_x)
    code, said = _cli(zero_x, "upgrade")
    assert code == 0 and json.loads(said) == {
        "database": json.loads(said)["database"],
        "detail": "already a 1.0 ledger",
        "upgraded": False,
    }
    assert dump(zero_x) == before
    # And it is a ledger like any other: its lifecycle goes on, and still verifies.
    code, said = _cli(zero_x, "task", "list")
    assert code == 0, said
    created = {"idempotency_key": "after", "task": {"goal": "after", "instructions": "i"}}
    code, said = _cli(zero_x, "task", "create", "--json", "-", input=json.dumps(created))
    assert code == 0, said
    code, said = _cli(zero_x, "verify")
    assert code == 0 and json.loads(said)["intact"] is True, said


def test_a_tampered_0x_ledger_is_refused_and_left_as_it_was(zero_x: Path) -> None:
    last_event = "(SELECT max(event_id) FROM events)"
    tamper(zero_x, (f"UPDATE events SET payload_json = '{{}}' WHERE event_id = {last_event}", ()))
    before = dump(zero_x)
    code, said = _cli(zero_x, "upgrade")
    assert code != 0 and "UPGRADE_REFUSED_NOT_INTACT: " in said, said
    assert "nothing was changed" in said
    assert dump(zero_x) == before


def test_a_ledger_behind_the_last_0x_is_sent_to_its_release_first(zero_x: Path) -> None:
    tamper(zero_x, ("DELETE FROM schema_migrations WHERE version = '0028'", ()))
    before = dump(zero_x)
    code, said = _cli(zero_x, "upgrade")
    assert code != 0 and "UPGRADE_NEEDS_LAST_0X: " in said, said
    assert "['0028']" in said and "`aios-ledger migrate`" in said
    assert dump(zero_x) == before
