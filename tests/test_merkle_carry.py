"""SQLite's one writer carries the Merkle tree's head row from one write transaction to the next
(inside `SqliteConnection`: its `fetch_record` answers the head row its last append left),
re-reading it only when the file changed since its COMMIT: never a stale edge, whoever else
writes."""

from __future__ import annotations

from functools import partial
from pathlib import Path

import pytest
from aios_ledger.core import chain_of
from aios_ledger.core.log.merkle import MerkleTreeRow
from aios_ledger.core.log.plan import sealed_plan
from aios_ledger.shell import Database, verify_log
from aios_ledger.shell.db.apply import PlanExecutor
from aios_ledger.shell.db.engines.sqlite import SqliteConnection
from aios_ledger.shell.db.merkle import TREE_FOR_UPDATE, current_tree_head, prove_consistency
from aios_ledger.shell.db.run import Connection
from aios_ledger.shell.db.statements import statement_texts
from test_log_support import build_log, event, tamper

# The write `_append` is running, if any.
_WRITING: list[int] = []


def _reads_of_the_head_row(*dbs: Database) -> list[str]:
    """The head row's reads the engines sent to SQLite within writes (apsw's trace of each
    statement run; a read's `merkle_tree` has the same text on SQLite)."""
    seen: list[str] = []
    text = statement_texts()[TREE_FOR_UPDATE]

    def trace(cursor: object, sql: str, bindings: object) -> bool:
        if _WRITING and sql.strip() == text.strip():
            seen.append(TREE_FOR_UPDATE)
        return True

    for db in dbs:
        _sqlite(db).exec_trace = trace
    return seen


def test_the_head_row_is_carried_between_writes_of_one_writer(tmp_path: Path) -> None:
    path = tmp_path / "ledger.db"
    build_log(path, ["t-a"])
    with Database(path) as db:
        reads = _reads_of_the_head_row(db)
        for number in range(6):
            _append(db, number)
            current_tree_head(db)  # a read between writes changes nothing
        # The first write read the row; each one after took it from the one before.
        assert reads == [TREE_FOR_UPDATE]
        carried = _sqlite(db)._carried
        assert carried is not None and isinstance(carried[1], MerkleTreeRow)
        assert carried[1].size == 7 == current_tree_head(db).size
        assert verify_log(db).intact


def build_on(conn: Connection, number: int) -> None:
    plans = PlanExecutor(conn)
    plan = sealed_plan((), (event("t-a", 10 + number),), None, tail=plans.tail(chain_of("t-a")))
    plans.apply(plan)


def _append(db: Database, number: int) -> None:
    _WRITING.append(number)
    try:
        db.write(partial(build_on, number=number))
    finally:
        _WRITING.clear()


def _sqlite(db: Database) -> SqliteConnection:
    conn = vars(db)["conn"]
    assert isinstance(conn, SqliteConnection)
    return conn


def test_two_writers_on_one_file_never_use_a_stale_edge(tmp_path: Path) -> None:
    path = tmp_path / "ledger.db"
    build_log(path, ["t-a"])
    with Database(path) as one, Database(path) as other:
        reads = _reads_of_the_head_row(one, other)
        old = current_tree_head(one)
        for number in range(5):
            _append(one, 2 * number)
            _append(other, 2 * number + 1)
        # Each writer read the row again after the other wrote: no REVISION_CONFLICT, and one
        # tree of 11 leaves that extends the first.
        assert len(reads) == 10
        head = current_tree_head(other)
        assert head.size == 11 == current_tree_head(one).size
        prove_consistency(one, old.size).check(head.root, old.root)
        assert verify_log(one).intact


def test_a_write_that_rolls_back_carries_nothing(tmp_path: Path) -> None:
    path = tmp_path / "ledger.db"
    build_log(path, ["t-a"])
    with Database(path) as db:
        _append(db, 0)
        assert _sqlite(db)._carried is not None

        def fails(conn: Connection) -> None:
            build_on(conn, 1)
            raise RuntimeError("after the append")

        with pytest.raises(RuntimeError):
            db.write(fails)
        assert _sqlite(db)._carried is None
        tamper(path, ("UPDATE events SET payload_json = payload_json WHERE 0", ()))
        _append(db, 2)
        assert current_tree_head(db).size == 3
        assert verify_log(db).intact
