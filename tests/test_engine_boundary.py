"""The engines stay behind their protocol: one module per engine, chosen by the target's URL
scheme from one table (`shell/db/engines/__init__.py`: `ENGINES`), and no module outside the
engine modules names an engine: not its driver (apsw, psycopg), not its classes, not its module,
and it tests no engine's name (`db.engine == "postgresql"`). What differs between engines is a
method or an attribute of `Connection` or `Database`, asked, never an `isinstance` branch."""

from __future__ import annotations

import ast
import sys
from pathlib import Path

import pytest
from aios_ledger.shell import Database
from aios_ledger.shell.db.connection import EngineModule, engine_for
from aios_ledger.shell.db.engines import (
    ENGINES,
    Connection,
    SchemaConnection,
    engine_names,
    registered,
)
from aios_ledger.shell.db.engines import postgresql as postgresql_engine
from aios_ledger.shell.db.engines import sqlite as sqlite_engine
from conftest import ENGINES as TEST_ENGINES

ROOT = Path(__file__).resolve().parents[1]
FOLDERS = ("core", "shell", "entry")
ENGINE_PACKAGE = "aios_ledger.shell.db.engines"
# The engine modules: each engine's own, and the one helper module of SQLite's (its WAL copying).
# Only these may name a driver or an engine class.
ENGINE_MODULES = {
    "shell/db/engines/sqlite.py",
    "shell/db/engines/sqlite_checkpoints.py",
    "shell/db/engines/postgresql.py",
}
DRIVERS = {"apsw", "psycopg", "psycopg_pool", "sqlite3"}
# The engine modules by import name (the registry's package itself, its protocols and table,
# is everyone's).
ENGINE_IMPORTS = {f"{ENGINE_PACKAGE}.{Path(relative).stem}" for relative in ENGINE_MODULES}
# Attributes whose value is an engine's name or dialect: comparing them is an engine test.
ENGINE_NAMED = {"engine", "dialect", "NAME"}

# Modules typed against an engine module (mypy checks each against the protocol).
_SQLITE: EngineModule = sqlite_engine
_POSTGRESQL: EngineModule = postgresql_engine


def engine_classes() -> set[str]:
    """Every class an engine module defines (a third engine's join by themselves)."""
    names: set[str] = set()
    for relative in ENGINE_MODULES:
        tree = ast.parse((ROOT / relative).read_text(), filename=relative)
        names.update(node.name for node in ast.walk(tree) if isinstance(node, ast.ClassDef))
    return names


def _module_of(node: ast.ImportFrom, path: str) -> str:
    if not node.level:
        return node.module or ""
    package = ["aios_ledger", *Path(path).parent.parts]
    base = package[: len(package) - node.level + 1]
    return ".".join([*base, *([node.module] if node.module else [])])


def engine_mentions(source: str, path: str, classes: set[str]) -> list[str]:
    """Where `source` names an engine: a driver or an engine module imported, an engine class
    named, an engine's name compared."""
    found: list[str] = []
    for node in ast.walk(ast.parse(source, filename=path)):
        where = f"{path}:{getattr(node, 'lineno', 0)}"
        if isinstance(node, ast.Import):
            modules = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            module = _module_of(node, path)
            modules = [module, *(f"{module}.{alias.name}" for alias in node.names)]
            found.extend(
                f"{where}: imports {alias.name}" for alias in node.names if alias.name in classes
            )
        else:
            modules = []
        for module in modules:
            engine_module = any(
                module == name or module.startswith(f"{name}.") for name in ENGINE_IMPORTS
            )
            if module.split(".")[0] in DRIVERS or engine_module:
                found.append(f"{where}: imports {module}")
        if isinstance(node, ast.Name) and node.id in classes:
            found.append(f"{where}: names {node.id}")
        if isinstance(node, ast.Attribute) and node.attr in classes:
            found.append(f"{where}: names {node.attr}")
        if isinstance(node, ast.Compare):
            for side in (node.left, *node.comparators):
                if isinstance(side, ast.Attribute) and side.attr in ENGINE_NAMED:
                    found.append(f"{where}: compares .{side.attr}")
    return found


def python_files() -> list[str]:
    return sorted(
        str(path.relative_to(ROOT))
        for folder in FOLDERS
        for path in (ROOT / folder).rglob("*.py")
        if ".venv" not in path.parts
    )


def test_no_module_outside_the_engine_modules_names_an_engine() -> None:
    classes = engine_classes()
    assert {"PgConnection", "PostgresDatabase", "SqliteConnection", "SqliteDatabase"} <= classes
    found = []
    for path in python_files():
        if path not in ENGINE_MODULES:
            found.extend(engine_mentions((ROOT / path).read_text(), path, classes))
    assert found == []


def test_the_boundary_check_finds_each_kind_of_mention() -> None:
    """The check above, held to the branches it replaced."""
    classes = engine_classes()
    samples = {
        "import apsw": "imports apsw",
        "import psycopg.errors": "imports psycopg.errors",
        "from psycopg_pool import ConnectionPool": "imports psycopg_pool",
        "from aios_ledger.shell.db.engines.postgresql import bindable": "imports aios_ledger",
        "from aios_ledger.shell.db.engines import sqlite": "imports aios_ledger",
        "from .engines.sqlite import CLAIM_PAGE": "imports aios_ledger.shell.db.engines.sqlite",
        "if isinstance(conn, PgConnection): pass": "names PgConnection",
        "x = postgresql.PostgresDatabase": "names PostgresDatabase",
        "ok = db.engine != 'postgresql'": "compares .engine",
        "ok = 'sqlite' == conn.dialect": "compares .dialect",
    }
    for source, expected in samples.items():
        found = engine_mentions(source, "shell/db/sample.py", classes)
        assert any(expected in line for line in found), (source, found)
    fine = "from aios_ledger.shell.db.engines import Connection, is_database_url\nx = conn.dialect"
    assert engine_mentions(fine, "shell/db/sample.py", classes) == []


def test_the_engine_modules_are_the_engines_folder() -> None:
    """A module added to the engines' folder is listed here (or it would hide an engine from
    the check), and every module listed exists."""
    folder = {
        str(path.relative_to(ROOT))
        for path in (ROOT / "shell" / "db" / "engines").glob("*.py")
        if path.name != "__init__.py"
    }
    assert folder == ENGINE_MODULES


def test_each_registered_engine_is_a_module_with_its_database() -> None:
    assert {"sqlite", "postgresql"} <= set(engine_names())
    assert len(set(engine_names())) == len(ENGINES)
    for engine in ENGINES:
        scheme = engine.schemes[0]
        module = engine_for(None if scheme is None else f"{scheme}://h/db")
        assert sys.modules[engine.module] is module
        assert f"shell/db/engines/{engine.module.rpartition('.')[2]}.py" in ENGINE_MODULES
        assert engine.name == module.NAME
        assert issubclass(module.DATABASE, Database)
        assert module.DATABASE.engine == engine.name
        for attribute in ("require_ledger", "require_creatable", "schema_sql"):
            assert callable(getattr(module, attribute))


@pytest.mark.parametrize(
    ("target", "engine"),
    [
        (None, "sqlite"),
        ("ledger.db", "sqlite"),
        (Path("dir/ledger.db"), "sqlite"),
        ("postgresql:ledger.db", "sqlite"),  # a file name with a colon
        ("postgresql://u@h/db", "postgresql"),
        ("postgres://u@h/db", "postgresql"),
        ("POSTGRESQL://u@h/db", "postgresql"),
        # Another scheme goes to the engine of paths, which refuses it (DATABASE_URL_UNSUPPORTED).
        ("sqlite:///ledger.db", "sqlite"),
        ("mysql://h/db", "sqlite"),
    ],
)
def test_the_registry_picks_the_engine_by_the_targets_scheme(target: object, engine: str) -> None:
    assert registered(target).name == engine


def test_opening_a_file_imports_no_server_driver(tmp_path: Path) -> None:
    """The registry loads an engine's module when a target names it: a SQLite ledger never
    imports psycopg (asked in a fresh interpreter)."""
    import subprocess

    program = (
        "import sys\n"
        "from aios_ledger.shell import TaskLedger\n"
        f"TaskLedger({str(tmp_path / 'ledger.db')!r}).close()\n"
        "print(sorted(m for m in ('psycopg', 'psycopg_pool') if m in sys.modules))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", program], capture_output=True, text=True, check=True
    )
    assert done.stdout.strip() == "[]"


def test_the_both_engines_tests_run_every_registered_engine() -> None:
    assert tuple(TEST_ENGINES) == engine_names()


def test_the_connection_protocol_is_the_documented_handful() -> None:
    """What the generic path may ask of a connection, each member in docs/architecture.md's
    table: an engine's tricks for speed are no member of it."""
    members = {name for name in vars(Connection) if not name.startswith("_")}
    members |= set(Connection.__annotations__)
    assert members == {
        "dialect",
        "in_transaction",
        "fetch_all",
        "fetch_record",
        "fetch_together",
        "fetch_ahead",
        "stream_records",
        "stream_tuples",
        "run_plan",
        "first_event_id",
        "number_events",
        "run_write",
        "integrates_inline",
        "integration_bound",
    }
    # The migrator's, `copy`'s and the tools' statements are the wider protocol's alone.
    wider = {name for name in vars(SchemaConnection) if not name.startswith("_")}
    assert wider == {"run_many", "run_script", "prepare_schema", "execute"}
    table = (ROOT / "docs" / "architecture.md").read_text()
    assert all(f"`{member}" in table for member in members | wider | {"notify", "listen"})
