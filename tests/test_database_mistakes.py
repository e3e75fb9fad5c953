"""The mistakes a new user makes with `--db`, each answered with a code that says what to do:
every URL form libpq takes (the local socket's `postgresql:///db` among them), a read that finds
no ledger on PostgreSQL (never a new, empty one), a database the server does not have, a server
that is not there, a URL of another scheme, a damaged file, a directory, a read-only file.

The command line runs as a user types it, from an empty folder (`main(argv)` in this process,
tests/cli_runner.py); the library is asked the same."""

from __future__ import annotations

import itertools
import json
import os
import shutil
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path
from urllib.parse import urlsplit

import psycopg
import pytest
from aios_ledger.core import LedgerError
from aios_ledger.shell import Database, TaskLedger
from aios_ledger.shell.db.engines.postgresql import PostgresTarget
from cli_runner import CliResult, run_cli
from conftest import postgres_url

SOCKET_FOLDER = "/var/run/postgresql"
_SCRATCH = itertools.count(1)


def cli_in(cwd: Path, *argv: str | Path) -> CliResult:
    """The command line from the folder `cwd`, with no `AIOS_LEDGER_*` setting of the test's."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("AIOS_LEDGER_")}
    return run_cli(*argv, cwd=cwd, env=env)


def refusal(cwd: Path, *argv: str | Path) -> tuple[int, str]:
    """The exit status and stderr of a command that must be refused with one error line."""
    done = cli_in(cwd, *argv)
    lines = done.stderr.splitlines()
    assert done.stdout == "" and len(lines) == 1, done.stderr
    return done.returncode, lines[0]


@pytest.fixture
def database_name(postgres_database: str | None) -> str:
    postgres_url(postgres_database)  # skips without a server
    assert postgres_database is not None
    return urlsplit(postgres_database).path.lstrip("/")


@pytest.fixture
def scratch_schema(postgres_database: str | None, database_name: str) -> Iterator[str]:
    """A schema name of this test's own, dropped at its end whatever the test made of it."""
    assert postgres_database is not None
    schema = f"mistakes_{os.getpid()}_{next(_SCRATCH)}"
    yield schema
    with psycopg.connect(postgres_database, autocommit=True) as admin:
        admin.execute(f"DROP SCHEMA IF EXISTS {schema} CASCADE".encode())


def schema_tables(postgres_database: str | None, schema: str) -> list[str] | None:
    """The tables of `schema`, or None when there is no such schema."""
    assert postgres_database is not None
    with psycopg.connect(postgres_database, autocommit=True) as admin:
        found = admin.execute("SELECT 1 FROM pg_namespace WHERE nspname = %s", (schema,)).fetchone()
        if found is None:
            return None
        rows = admin.execute(
            "SELECT table_name FROM information_schema.tables WHERE table_schema = %s", (schema,)
        )
        return sorted(str(row[0]) for row in rows)


def _local_socket() -> None:
    if not Path(SOCKET_FOLDER, ".s.PGSQL.5432").exists():
        pytest.skip(f"no PostgreSQL socket in {SOCKET_FOLDER}")


# Every form libpq documents, as a user types it: {db} is the test database, {s} the schema.
SOCKET_FORMS = [
    "postgresql:///{db}?search_path={s}",
    "postgres:///{db}?search_path={s}",
    "postgresql://%2Fvar%2Frun%2Fpostgresql/{db}?search_path={s}",
    "postgresql:///{db}?host=/var/run/postgresql&search_path={s}",
]
TCP_FORMS = [
    "postgresql://postgres@127.0.0.1:5432/{db}?search_path={s}",
    "postgres://postgres@localhost/{db}?search_path={s}",
    # The schema as libpq's own options name it, and other options beside the schema's.
    "postgresql://postgres@127.0.0.1/{db}?options=-csearch_path%3D{s}",
    "postgresql://postgres@127.0.0.1/{db}?options=-c%20statement_timeout%3D4321&search_path={s}",
]


@pytest.mark.parametrize("form", SOCKET_FORMS + TCP_FORMS)
def test_every_url_form_inits_and_then_lists_on_the_command_line_and_in_the_library(
    tmp_path: Path, postgres_database: str, database_name: str, scratch_schema: str, form: str
) -> None:
    if form in SOCKET_FORMS:
        _local_socket()
    url = form.format(db=database_name, s=scratch_schema)
    init = cli_in(tmp_path, "--db", url, "init")
    assert init.returncode == 0, init.stderr
    listed = cli_in(tmp_path, "--db", url, "task", "list")
    assert (listed.returncode, json.loads(listed.stdout)) == (0, []), listed.stderr
    # The ledger is in the schema the URL names, in the database it names.
    assert "schema_migrations" in (schema_tables(postgres_database, scratch_schema) or [])
    with TaskLedger(url) as ledger:
        ledger.create_task({"goal": "g", "instructions": "i"}, idempotency_key="c")
        assert [task["goal"] for task in ledger.list_tasks()] == ["g"]
    assert sorted(os.listdir(tmp_path)) == []  # no file was taken for the URL


def test_the_urls_own_options_stay_beside_the_schema(
    postgres_database: str, database_name: str, scratch_schema: str
) -> None:
    url = TCP_FORMS[3].format(db=database_name, s=scratch_schema)
    target = PostgresTarget.parse(url)
    with psycopg.connect(target.conninfo, **target.connect_options()) as conn:
        settings = conn.execute("SELECT current_setting('statement_timeout')").fetchone()
        search_path = conn.execute("SELECT current_setting('search_path')").fetchone()
    assert settings == ("4321ms",) and search_path == (scratch_schema,)


def test_the_ledgers_sessions_bound_lock_waits_and_idle_transactions_unless_the_url_says(
    postgres_database: str, database_name: str, scratch_schema: str
) -> None:
    bounds = (
        "SELECT current_setting('lock_timeout'),"
        " current_setting('idle_in_transaction_session_timeout')"
    )
    plain = PostgresTarget.parse(TCP_FORMS[0].format(db=database_name, s=scratch_schema))
    options = "-c%20lock_timeout%3D5s%20-c%20idle_in_transaction_session_timeout%3D0"
    longer = PostgresTarget.parse(f"{plain.conninfo}?options={options}")
    with psycopg.connect(plain.conninfo, **plain.connect_options()) as conn:
        assert conn.execute(bounds).fetchone() == ("1s", "1min")
    with psycopg.connect(longer.conninfo, **longer.connect_options()) as conn:
        assert conn.execute(bounds).fetchone() == ("5s", "0")


@pytest.mark.parametrize(
    ("url", "conninfo", "schema"),
    [
        ("postgresql:///db", "postgresql:///db", "aios_ledger"),
        ("postgres:///db?search_path=s1", "postgres:///db", "s1"),
        (
            "postgresql://%2Fvar%2Frun%2Fpostgresql/db?search_path=s1&sslmode=disable",
            "postgresql://%2Fvar%2Frun%2Fpostgresql/db?sslmode=disable",
            "s1",
        ),
        # libpq decodes %XX and nothing else: a `+` stays a plus.
        (
            "postgresql:///db?application_name=a+b",
            "postgresql:///db?application_name=a+b",
            "aios_ledger",
        ),
        (
            "postgresql:///db?options=--search_path%3Ds2",
            "postgresql:///db?options=--search_path%3Ds2",
            "s2",
        ),
    ],
)
def test_only_the_schema_is_taken_out_of_the_url(url: str, conninfo: str, schema: str) -> None:
    target = PostgresTarget.parse(url)
    assert (target.conninfo, target.schema) == (conninfo, schema)


@pytest.mark.parametrize(
    "url",
    [
        "postgresql:///db?search_path=a&options=-csearch_path%3Db",
        "postgresql:///db?search_path",
    ],
)
def test_a_url_that_names_two_schemas_or_a_bare_parameter_is_invalid(url: str) -> None:
    with pytest.raises(LedgerError) as refused:
        PostgresTarget.parse(url)
    assert refused.value.code == "DATABASE_URL_INVALID"


def test_a_password_never_shows_in_messages() -> None:
    target = PostgresTarget.parse(
        "postgresql://me:secret@host:5433/db?password=other&search_path=s"
    )
    assert target.redacted() == "postgresql://me:***@host:5433/db?password=***&search_path=s"
    assert PostgresTarget.parse("postgresql:///db").redacted() == (
        "postgresql:///db?search_path=aios_ledger"
    )


READS = [["task", "list"], ["status"], ["head"], ["verify"], ["migrate", "--status"]]


@pytest.mark.parametrize("command", READS, ids=" ".join)
def test_a_read_on_a_schema_without_a_ledger_is_not_found_and_creates_nothing(
    tmp_path: Path,
    postgres_database: str,
    database_name: str,
    scratch_schema: str,
    command: list[str],
) -> None:
    url = f"postgresql://postgres@127.0.0.1:5432/{database_name}?search_path={scratch_schema}"
    code, err = refusal(tmp_path, "--db", url, *command)
    assert code == 1 and err.startswith("DATABASE_NOT_FOUND: "), err
    assert scratch_schema in err and "init" in err
    assert schema_tables(postgres_database, scratch_schema) is None
    # A schema that is there but empty holds no ledger either; it stays empty.
    with psycopg.connect(postgres_database, autocommit=True) as admin:
        admin.execute(f"CREATE SCHEMA {scratch_schema}".encode())
    code, err = refusal(tmp_path, "--db", url, *command)
    assert code == 1 and err.startswith("DATABASE_NOT_FOUND: "), err
    assert schema_tables(postgres_database, scratch_schema) == []


def test_init_makes_the_schema_that_reads_then_find(
    tmp_path: Path, database_name: str, scratch_schema: str
) -> None:
    url = f"postgresql://postgres@127.0.0.1:5432/{database_name}?search_path={scratch_schema}"
    assert refusal(tmp_path, "--db", url, "status")[1].startswith("DATABASE_NOT_FOUND: ")
    assert cli_in(tmp_path, "--db", url, "init").returncode == 0
    assert cli_in(tmp_path, "--db", url, "status").returncode == 0


@pytest.mark.parametrize(
    "url",
    [
        "postgresql://postgres@127.0.0.1:5432/no_such_db_for_mistakes",
        "postgresql:///no_such_db_for_mistakes",
    ],
)
def test_a_database_the_server_does_not_have_is_not_found_and_named(
    tmp_path: Path, database_name: str, url: str
) -> None:
    if url.startswith("postgresql:///"):
        _local_socket()
    for command in (["init"], ["task", "list"]):
        code, err = refusal(tmp_path, "--db", url, *command)
        assert code == 1 and err.startswith("DATABASE_NOT_FOUND: "), err
        assert "'no_such_db_for_mistakes'" in err and "createdb" in err
    with pytest.raises(LedgerError) as refused:
        Database(url)
    assert refused.value.code == "DATABASE_NOT_FOUND"


@pytest.mark.parametrize(
    ("url", "named"),
    [
        ("postgresql://127.0.0.1:1/x", '"127.0.0.1", port 1'),
        ("postgresql://no-such-host.invalid/x", "no-such-host.invalid"),
    ],
)
def test_a_server_that_is_not_there_is_unavailable_at_once_naming_it(
    tmp_path: Path, url: str, named: str
) -> None:
    """One attempt, one line: the pool's retries (and their log lines) never start."""
    for command in (["init"], ["task", "list"]):
        code, err = refusal(tmp_path, "--db", url, *command)
        assert code == 1 and err.startswith("DATABASE_UNAVAILABLE: "), err
        assert named in err
    with pytest.raises(LedgerError) as refused:
        Database(url)
    assert refused.value.code == "DATABASE_UNAVAILABLE" and named in refused.value.detail


@pytest.mark.parametrize(
    "url",
    ["mysql://user@host/db", "sqlite:///ledger.db", "http://host/ledger", "MySQL://h/db"],
)
def test_a_url_of_another_scheme_is_unsupported_and_says_what_is(tmp_path: Path, url: str) -> None:
    scheme = url.partition("://")[0].lower()
    for command in (["init"], ["task", "list"]):
        code, err = refusal(tmp_path, "--db", url, *command)
        assert code == 1 and err.startswith("DATABASE_URL_UNSUPPORTED: "), err
        assert f"{scheme}://" in err and "postgresql://" in err and "path" in err
    with pytest.raises(LedgerError) as refused:
        Database(url)
    assert refused.value.code == "DATABASE_URL_UNSUPPORTED"
    assert os.listdir(tmp_path) == []


@pytest.mark.parametrize("name", ["a:b.db", "dir:x/led:ger.db", "postgresql:ledger.db"])
def test_a_file_name_with_a_colon_is_still_a_file(tmp_path: Path, name: str) -> None:
    (tmp_path / name).parent.mkdir(exist_ok=True)
    assert cli_in(tmp_path, "--db", name, "init").returncode == 0
    listed = cli_in(tmp_path, "--db", name, "task", "list")
    assert (listed.returncode, json.loads(listed.stdout)) == (0, [])
    assert (tmp_path / name).is_file()


def _create_request(folder: Path) -> Path:
    request = folder / "create.json"
    request.write_text(
        json.dumps({"task": {"goal": "g", "instructions": "i"}, "idempotency_key": "k"})
    )
    return request


def _garbage(path: Path) -> Path:
    path.write_bytes(b"not a ledger at all\n" * 500)
    return path


def _truncated(path: Path) -> Path:
    with TaskLedger(path) as ledger:
        ledger.create_task({"goal": "g", "instructions": "i" * 5000}, idempotency_key="c")
    size = path.stat().st_size
    with path.open("r+b") as handle:
        handle.truncate(size // 2)
    return path


@pytest.mark.parametrize("damage", [_garbage, _truncated], ids=["garbage", "truncated"])
def test_a_damaged_file_is_corrupt_names_the_file_and_says_what_to_do(
    tmp_path: Path, damage: Callable[[Path], Path]
) -> None:
    ledger = damage(tmp_path / "ledger.db")
    before = ledger.read_bytes()
    request = _create_request(tmp_path)
    commands = (
        ["task", "list"],
        ["status"],
        ["verify"],
        ["task", "create", "--json", str(request)],
    )
    answers = [refusal(tmp_path, "--db", str(ledger), *command) for command in commands]
    for code, err in answers:
        assert code == 1 and err.startswith("DATABASE_CORRUPT: "), err
        assert repr(str(ledger)) in err and "backup" in err
    with pytest.raises(LedgerError) as refused:
        TaskLedger(ledger).list_tasks()
    assert refused.value.code == "DATABASE_CORRUPT" and str(ledger) in refused.value.detail
    assert ledger.read_bytes() == before


def test_a_directory_is_refused_and_named_with_the_file_to_give(tmp_path: Path) -> None:
    folder = tmp_path / "ledgers"
    folder.mkdir()
    for command in (["init"], ["task", "list"]):
        code, err = refusal(tmp_path, "--db", str(folder), *command)
        assert code == 1 and err.startswith("DATABASE_PATH_INVALID: "), err
        assert f"{str(folder)!r} is a directory" in err
        assert repr(str(folder / "aios-ledger.db")) in err
    assert os.listdir(folder) == []


def test_a_file_in_a_missing_folder_is_not_found_and_names_the_folder(tmp_path: Path) -> None:
    missing = tmp_path / "no-such-folder"
    for command in (["init"], ["task", "list"]):
        code, err = refusal(tmp_path, "--db", str(missing / "ledger.db"), *command)
        assert code == 1 and err.startswith("DATABASE_NOT_FOUND: "), err
        assert repr(str(missing)) in err
    assert not missing.exists()


@pytest.fixture
def read_only_ledger(tmp_path: Path) -> Iterator[Path]:
    """A ledger no one may write, root included (chattr's immutable flag: as root, a file's
    permission bits do not keep a writer out)."""
    ledger = tmp_path / "ledger.db"
    TaskLedger(ledger).close()
    chattr = shutil.which("chattr")
    if chattr is None or subprocess.run([chattr, "+i", str(ledger)], check=False).returncode:
        pytest.skip("cannot make a file immutable here (chattr +i)")
    try:
        yield ledger
    finally:
        subprocess.run([chattr, "-i", str(ledger)], check=True)


def test_a_write_to_a_read_only_file_is_read_only_and_names_the_file(
    tmp_path: Path, read_only_ledger: Path
) -> None:
    request = _create_request(tmp_path)
    before = read_only_ledger.read_bytes()
    code, err = refusal(
        tmp_path, "--db", str(read_only_ledger), "task", "create", "--json", str(request)
    )
    assert code == 1 and err.startswith("DATABASE_READ_ONLY: "), err
    assert repr(str(read_only_ledger)) in err and "writable" in err
    listed = cli_in(tmp_path, "--db", str(read_only_ledger), "task", "list")
    assert (listed.returncode, json.loads(listed.stdout)) == (0, [])
    assert read_only_ledger.read_bytes() == before
