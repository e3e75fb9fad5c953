"""The Merkle append's cost on the write path, counted, not timed (docs/proofs.md, "Cost").

Part 1's loop (create, claim, heartbeat, submit, verify: one transaction each, on a SQLite file
at FULL) runs twice, once as built and once with the append switched off (`leaf_writes` handing
back no writes: the reference). Each run counts the statements its connection executes, with
apsw's exec trace, and the tree's among them by name (`MERKLE_STATEMENTS`), and the pages each
commit adds to the write-ahead log, with its WAL hook (checkpoints off, so the log only grows).
A warm-up lifecycle first leaves the tree built and the statements prepared. The counts are the
same on every run and every machine, unlike the timings, so a change to the write path shows
in them exactly:

    .venv/bin/python -m bench.write_cost            # 300 tasks, as docs/proofs.md quotes
    .venv/bin/python -m bench.write_cost --tasks 50
"""

from __future__ import annotations

import argparse
import contextlib
import json
import sys
import tempfile
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import aios_ledger.shell.db.apply as plan_apply
import apsw
import attrs
from aios_ledger.core.log.merkle import MerkleTreeRow
from aios_ledger.core.log.tail import AppendedEvent
from aios_ledger.core.statements import SqlWrite
from aios_ledger.shell.db.run import Connection
from aios_ledger.shell.db.statements import statement_texts

from .transitions import TRANSITIONS_PER_TASK, LedgerLoop

TASKS = 300
# What a plan's executor calls for its events' leaves (`PlanExecutor.apply`).
APPEND = "leaf_writes"
# The statements of the Merkle log (sql/merkle.sql and its engines' own texts).
MERKLE_STATEMENTS = frozenset(
    name for name in statement_texts() if name.startswith(("merkle_", "insert_merkle_"))
)


@attrs.frozen
class WriteCost:
    """One run's counts over `transitions` transitions (as many commits)."""

    transitions: int
    commits: int
    statements: int
    tree_statements: int
    wal_pages: int

    def public(self) -> dict[str, Any]:
        return {
            "transitions": self.transitions,
            "commits": self.commits,
            "statements_per_transition": round(self.statements / self.transitions, 2),
            "tree_statements_per_transition": round(self.tree_statements / self.transitions, 2),
            "wal_pages_per_commit": round(self.wal_pages / self.commits, 2),
        }


def _no_leaves(
    conn: Connection, events: Sequence[AppendedEvent], tree: MerkleTreeRow | None = None
) -> tuple[tuple[SqlWrite, ...], MerkleTreeRow | None]:
    return (), tree


@contextlib.contextmanager
def append_switched_off() -> Iterator[None]:
    """The reference build: every write as the ledger plans it, without its leaves."""
    built = getattr(plan_apply, APPEND)
    setattr(plan_apply, APPEND, _no_leaves)
    try:
        yield
    finally:
        setattr(plan_apply, APPEND, built)


def count(path: Path, tasks: int = TASKS) -> WriteCost:
    """Part 1's loop of `tasks` lifecycles on a new file at `path`, counted."""
    loop = LedgerLoop(path, "FULL")
    try:
        conn = loop.database.conn
        loop.lifecycle()
        conn.wal_checkpoint("main", apsw.SQLITE_CHECKPOINT_TRUNCATE)
        texts = {text: name for name, text in statement_texts().items()}
        statements = tree_statements = commits = pages = 0
        in_log = 0

        def traced(cursor: apsw.Cursor, text: str, bindings: Any) -> bool:
            nonlocal statements, tree_statements
            statements += 1
            tree_statements += texts.get(text, "") in MERKLE_STATEMENTS
            return True

        def committed(connection: apsw.Connection, name: str, pages_in_log: int) -> int:
            # Checkpoints are off here: the log only grows, by what each commit wrote.
            nonlocal commits, pages, in_log
            commits += 1
            pages += pages_in_log - in_log
            in_log = pages_in_log
            return apsw.SQLITE_OK

        conn.set_wal_hook(committed)
        conn.exec_trace = traced
        try:
            for _ in range(tasks):
                loop.lifecycle()
        finally:
            conn.exec_trace = None
            conn.set_wal_hook(None)
        return WriteCost(tasks * TRANSITIONS_PER_TASK, commits, statements, tree_statements, pages)
    finally:
        loop.close()


def compare(scratch: Path, tasks: int = TASKS) -> dict[str, Any]:
    """The build's counts, the reference's, and what the tree adds to each commit's pages."""
    built = count(scratch / "built.db", tasks)
    with append_switched_off():
        reference = count(scratch / "reference.db", tasks)
    return {
        "tasks": tasks,
        "built": built.public(),
        "reference": reference.public(),
        "wal_pages_added": round(
            built.wal_pages / built.commits / (reference.wal_pages / reference.commits) - 1, 4
        ),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", type=int, default=TASKS)
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="aios-write-cost-") as tmp:
        figures = compare(Path(tmp), args.tasks)
    json.dump(figures, sys.stdout, indent=2)
    sys.stdout.write("\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
