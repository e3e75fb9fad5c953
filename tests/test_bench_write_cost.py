"""The Merkle append's counted cost (bench/write_cost.py, docs/proofs.md "Cost") counts what it
says: the reference run appends no leaf, the tree's statements are all the two runs differ by,
and the pages are the log's growth, commit by commit."""

from __future__ import annotations

from pathlib import Path

import aios_ledger.shell.db.apply as plan_apply
import apsw

from bench.transitions import TRANSITIONS_PER_TASK
from bench.write_cost import APPEND, append_switched_off, compare, count

TASKS = 8


def _leaves(path: Path) -> int:
    conn = apsw.Connection(str(path), flags=apsw.SQLITE_OPEN_READONLY)
    try:
        leaves = conn.execute("SELECT count(*) FROM merkle_leaves").fetchall()[0][0]
        assert isinstance(leaves, int)
        return leaves
    finally:
        conn.close()


def test_the_tree_is_all_the_built_and_reference_runs_differ_by(tmp_path: Path) -> None:
    figures = compare(tmp_path, TASKS)
    built, reference = figures["built"], figures["reference"]
    transitions = TASKS * TRANSITIONS_PER_TASK
    assert built["transitions"] == built["commits"] == transitions
    assert reference["transitions"] == reference["commits"] == transitions
    assert reference["tree_statements_per_transition"] == 0
    # Today's append: one leaf row and the head row's compare-and-swap per transition (its read
    # carried from the writer's last COMMIT); the figure docs/proofs.md quotes.
    assert built["tree_statements_per_transition"] == 2.0
    assert (
        built["statements_per_transition"] - reference["statements_per_transition"]
        == built["tree_statements_per_transition"]
    )
    assert built["wal_pages_per_commit"] > reference["wal_pages_per_commit"]
    assert figures["wal_pages_added"] > 0
    # Every transition (and the warm-up's) has its leaf in the built file, none in the other.
    assert _leaves(tmp_path / "built.db") == transitions + TRANSITIONS_PER_TASK
    assert _leaves(tmp_path / "reference.db") == 0


def test_the_switch_puts_the_append_back(tmp_path: Path) -> None:
    built = getattr(plan_apply, APPEND)
    with append_switched_off():
        assert getattr(plan_apply, APPEND) is not built
        count(tmp_path / "reference.db", 1)
    assert getattr(plan_apply, APPEND) is built
    counted = count(tmp_path / "built.db", 1)
    assert counted.tree_statements == 2 * TRANSITIONS_PER_TASK
    assert _leaves(tmp_path / "built.db") == 2 * TRANSITIONS_PER_TASK
