"""Make the 0.x ledgers `tests/test_upgrade.py` upgrades, with the last 0.x build itself.

Run it with that build's interpreter, from this checkout (the 0.x checkout is where the demo and
the package come from):

    /path/to/0.x/.venv/bin/python tools/make_0x_ledgers.py --zero-x /path/to/0.x \
        --postgres postgresql://postgres@127.0.0.1:5432/postgres

SQLite: the 0.x demo's ledger (an adopted older runtime's task, governed tasks worked, reviewed
and reworked, a retried task, governed writes with an attestation) and its proposal bundles.
PostgreSQL: the demo's parts two to four in a scratch schema, dumped by pg_dump as plain SQL
(INSERTs, the schema's name written as `aios_0x`) with its bundles; the scratch schema is dropped.
"""

from __future__ import annotations

import argparse
import importlib
import os
import secrets
import shutil
import sqlite3
import subprocess
import sys
import tempfile
from pathlib import Path

FIXTURES = Path(__file__).resolve().parents[1] / "tests" / "fixtures"
DUMP_SCHEMA = "aios_0x"


class UrlPath(str):
    """A PostgreSQL URL that the demo's parts take for a ledger path: they put files beside it."""

    parent: Path


def make_sqlite(zero_x: Path, work: Path) -> None:
    subprocess.run(
        [sys.executable, str(zero_x / "examples" / "demo.py"), "--dir", str(work / "demo")],
        check=True,
        stdout=subprocess.DEVNULL,
    )
    target = FIXTURES / "ledger-0x.sqlite3"
    shutil.copyfile(work / "demo" / "aios-ledger.db", target)
    with sqlite3.connect(target) as con:
        con.execute("PRAGMA journal_mode = DELETE")
    con.close()
    with sqlite3.connect(target) as con:
        con.execute("VACUUM")
    con.close()
    bundles = FIXTURES / "ledger-0x.sqlite3.proposals"
    shutil.rmtree(bundles, ignore_errors=True)
    shutil.copytree(work / "demo" / "aios-ledger.db.proposals", bundles)


def make_postgresql(zero_x: Path, work: Path, server: str) -> None:
    sys.path.insert(0, str(zero_x / "examples"))
    demo = importlib.import_module("demo")  # the 0.x build's, from its checkout
    from aios_ledger.shell.actors import acting_as
    from aios_ledger.shell.db.engines.postgresql import PostgresDatabase, PostgresTarget

    scratch = f"aios_0x_{secrets.token_hex(4)}"
    conninfo = PostgresTarget.parse(server).conninfo
    url = UrlPath(PostgresTarget(conninfo, scratch).redacted())
    url.parent = work / "pg"
    url.parent.mkdir()
    bundles = work / "pg-bundles"
    os.environ["AIOS_LEDGER_PROPOSALS_DIR"] = str(bundles)
    os.environ[demo.AUTHORIZATION_ENV] = demo.OWNER
    examples = zero_x / "examples"
    try:
        PostgresDatabase(url).close()
        with acting_as(demo.OWNER_ACTOR):
            demo.part_two(url, examples)
            demo.part_three(url)
            demo.part_four(url, examples)
        dumped = subprocess.run(
            ["pg_dump", "--no-owner", "--no-privileges", "--inserts", "-n", scratch, conninfo],
            check=True,
            capture_output=True,
            text=True,
        ).stdout
    finally:
        with PostgresDatabase.as_found(url) as db:
            db.write(lambda conn: conn.run_write("drop_search_path_schema", None))
    # psql's meta-commands (`\restrict`) are not SQL; the schema gets one name to replace.
    lines = [line for line in dumped.splitlines() if not line.startswith("\\")]
    text = "\n".join(lines).replace(scratch, DUMP_SCHEMA) + "\n"
    (FIXTURES / "ledger-0x-postgresql.sql").write_text(text, "utf-8")
    target = FIXTURES / "ledger-0x-postgresql.proposals"
    shutil.rmtree(target, ignore_errors=True)
    shutil.copytree(bundles, target)


def main() -> int:
    parser = argparse.ArgumentParser(prog="make_0x_ledgers")
    parser.add_argument("--zero-x", type=Path, required=True, help="the 0.x checkout")
    parser.add_argument("--postgres", help="a server to make the PostgreSQL ledger on")
    args = parser.parse_args()
    FIXTURES.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as folder:
        make_sqlite(args.zero_x.resolve(), Path(folder))
        if args.postgres:
            make_postgresql(args.zero_x.resolve(), Path(folder), args.postgres)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
