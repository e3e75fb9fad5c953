"""`bench.ab` measures two builds through the public API only: its worker must keep running on
the current build, or the next side-by-side comparison has nothing to compare."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from bench.ab import export_tree
from bench.ab_worker import FIGURES


@pytest.mark.parametrize("name", sorted(FIGURES))
def test_each_figure_runs_on_the_current_build(name: str, tmp_path: Path) -> None:
    assert FIGURES[name](3, tmp_path / f"{name}.db") > 0


def test_the_working_tree_is_built_from_what_git_sees(tmp_path: Path) -> None:
    """An ignored `build/` an earlier `pip install` left fed a later comparison stale SQL: the
    copy it builds from holds tracked and untracked files, never ignored ones."""
    tree = tmp_path / "tree"
    (tree / "sql").mkdir(parents=True)
    (tree / "build" / "lib" / "sql").mkdir(parents=True)
    subprocess.run(["git", "init", "-q", str(tree)], check=True)
    (tree / ".gitignore").write_text("build/\n")
    (tree / "sql" / "tasks.sql").write_text("-- the tracked text\n")
    (tree / "build" / "lib" / "sql" / "tasks.sql").write_text("-- a stale copy\n")
    subprocess.run(["git", "-C", str(tree), "add", "."], check=True)
    (tree / "sql" / "new.sql").write_text("-- not added yet\n")
    copy = tmp_path / "copy"
    copy.mkdir()
    export_tree(tree, copy)
    assert sorted(str(p.relative_to(copy)) for p in copy.rglob("*") if p.is_file()) == [
        ".gitignore",
        "sql/new.sql",
        "sql/tasks.sql",
    ]
