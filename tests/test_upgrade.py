"""`aios-ledger upgrade` on real 0.x ledgers, made by the last 0.x build on both engines
(tests/fixtures/ledger-0x.*, by tools/make_0x_ledgers.py): refused by ordinary commands, made
1.0 once (every event sealed again as v5, the old tree recorded) and intact, and refused
(unchanged) when tampered with, when an archive holds its tasks, or behind the last 0.x."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import psycopg
import pytest
from aios_ledger.core.proofs import Checkpoint
from cli_runner import run_cli
from conformance_support import check_export
from conftest import both_engines, postgres_url
from legacy_fixtures import dump
from test_checkpoints_verify import _insert, _signer
from test_conformance_export import export_lines
from test_conformance_vectors import _mth
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


def _tree_head(target: Path) -> tuple[int, str]:
    leaves = raw_rows(target, "SELECT leaf_hash FROM merkle_leaves ORDER BY leaf_index")
    return len(leaves), _mth([bytes(row[0]) for row in leaves]).hex()


def test_upgrade_makes_a_0x_ledger_1_0_once_and_it_verifies(zero_x: Path) -> None:
    events = raw_rows(zero_x, "SELECT count(*) FROM events")[0][0]
    old_versions = {row[0] for row in raw_rows(zero_x, "SELECT seal_version FROM event_seals")}
    assert old_versions - {5}
    old_head = _tree_head(zero_x)
    code, said = _cli(zero_x, "--as", "the-dba", "upgrade")
    assert code == 0, said
    upgraded = json.loads(said)
    assert upgraded["upgraded"] is True and upgraded["intact"] is True
    assert upgraded["from"] == "0.x at 0028" and upgraded["to"] == ["0001"]
    assert upgraded["events"] > 200
    versions = raw_rows(zero_x, "SELECT version FROM schema_migrations")
    assert [str(row[0]) for row in versions] == ["0001"]
    # Every event sealed again as v5, then the upgrade's own event, recording the 0.x tree.
    assert upgraded["events"] == events + 1
    seal_versions = raw_rows(zero_x, "SELECT DISTINCT seal_version FROM event_seals")
    assert [row[0] for row in seal_versions] == [5]
    ((kind, payload, actor),) = raw_rows(
        zero_x,
        "SELECT event_type, payload_json, actor FROM events "
        "WHERE event_id = (SELECT max(event_id) FROM events)",
    )
    assert kind == "LEDGER_UPGRADED"
    recorded = json.loads(payload)
    assert (recorded["tree_size"], recorded["root"]) == old_head
    assert recorded["checkpoints"] == []
    assert json.loads(actor)["name"] == "the-dba"
    # The tree is built again over the new seals, the upgrade's event its last leaf.
    size, _ = _tree_head(zero_x)
    assert size == old_head[0] + 1
    # The page's own verifier holds its export by the v5 rules alone.
    found = check_export(export_lines(zero_x))
    assert found.problems == [] and found.events == events + 1
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


def test_a_0x_ledger_whose_tasks_an_archive_holds_is_refused_and_left_as_it_was(
    zero_x: Path,
) -> None:
    first = raw_rows(zero_x, "SELECT event_id, chain, seal FROM event_seals ORDER BY event_id")[0]
    tamper(
        zero_x,
        (
            "INSERT INTO archived_events(event_id, archive_event_id, chain, seal) "
            "VALUES (?, ?, ?, ?)",
            (first[0] + 10**6, first[0] + 10**6 + 1, first[1], first[2]),
        ),
    )
    before = dump(zero_x)
    code, said = _cli(zero_x, "upgrade")
    assert code != 0 and "UPGRADE_REFUSED_ARCHIVED: " in said, said
    assert "restore" in said and "nothing was changed" in said
    assert dump(zero_x) == before


def test_what_was_signed_of_the_0x_tree_is_recorded_and_the_checkpoints_start_afresh(
    zero_x: Path,
) -> None:
    """A checkpoint signed of the 0.x tree is recorded, note as stored, in the LEDGER_UPGRADED
    event beside the tree's size and root it signs; the checkpoint tables start afresh."""
    size, root = _tree_head(zero_x)
    signer = _signer()
    _insert(zero_x, signer, Checkpoint(signer.verifier.name, size, bytes.fromhex(root)))
    ((note,),) = raw_rows(zero_x, "SELECT note FROM checkpoints")
    code, said = _cli(zero_x, "upgrade")
    assert code == 0, said
    ((payload,),) = raw_rows(
        zero_x, "SELECT payload_json FROM events WHERE event_type = 'LEDGER_UPGRADED'"
    )
    recorded = json.loads(payload)
    assert (recorded["tree_size"], recorded["root"]) == (size, root)
    assert recorded["checkpoints"] == [{"tree_size": size, "note": note, "cosignatures": []}]
    assert raw_rows(zero_x, "SELECT count(*) FROM checkpoints") == [(0,)]
