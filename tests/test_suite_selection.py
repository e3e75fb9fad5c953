"""`make test` and `make check` split the suite: every test runs in exactly one of them.

The two selections are the `-m` expressions the Makefile names; tests/conftest.py marks each test
from what it uses (`selection_markers`). At the end: the quick ledgers conftest gives a test."""

from __future__ import annotations

import ast
import itertools
import re
import tomllib
from pathlib import Path
from types import SimpleNamespace
from typing import cast

import pytest
from _pytest.mark.expression import Expression
from aios_ledger.shell import Database
from conftest import (
    BROWSER_MODULES,
    CHECK_MARKERS,
    DURABLE_MODULES,
    KILL_TESTS,
    selection_markers,
)
from engine_support import sqlite_database
from legacy_fixtures import dump

ROOT = Path(__file__).resolve().parents[1]
TESTS = ROOT / "tests"
# PRAGMA synchronous answers its level as a number.
SYNCHRONOUS_OFF, SYNCHRONOUS_FULL = 0, 2


def selection(name: str) -> str:
    """The `-m` expression the Makefile assigns to `name` (TEST_SELECTION, CHECK_SELECTION)."""
    found = re.search(rf"^{name} := (.+)$", (ROOT / "Makefile").read_text(), re.MULTILINE)
    assert found is not None, f"the Makefile assigns no {name}"
    return found.group(1).strip()


def test_the_makefile_runs_each_selection_with_its_expression() -> None:
    makefile = (ROOT / "Makefile").read_text()
    for target, name in (("test", "TEST_SELECTION"), ("check", "CHECK_SELECTION")):
        recipe = re.search(rf"^{target}:.*\n((?:\t.*\n)+)", makefile, re.MULTILINE)
        assert recipe is not None, f"no `{target}` target"
        assert f'-m "$({name})"' in recipe.group(1), recipe.group(1)


# Every marker the suite declares, the selections' own and the others.
MARKERS = [*CHECK_MARKERS, "slow", "durable"]


def test_pytest_declares_every_marker() -> None:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["pytest"]
    declared = [line.split(":")[0] for line in config["ini_options"]["markers"]]
    assert sorted(declared) == sorted(MARKERS)


@pytest.mark.parametrize(
    "markers",
    [
        set(chosen)
        for size in range(len(MARKERS) + 1)
        for chosen in itertools.combinations(MARKERS, size)
    ],
)
def test_every_combination_of_markers_is_in_exactly_one_selection(markers: set[str]) -> None:
    def carries(marker: str, /, **arguments: str | int | bool | None) -> bool:
        return marker in markers

    chosen = [
        name
        for name in ("TEST_SELECTION", "CHECK_SELECTION")
        if Expression.compile(selection(name)).evaluate(carries)
    ]
    assert len(chosen) == 1, (markers, chosen)
    assert chosen == ["CHECK_SELECTION" if markers & set(CHECK_MARKERS) else "TEST_SELECTION"]


def test_the_tests_named_for_a_selection_exist() -> None:
    """A renamed test or module would otherwise leave its selection without a word."""
    for module in BROWSER_MODULES | DURABLE_MODULES:
        assert (TESTS / f"{module}.py").is_file(), module
    for module, functions in KILL_TESTS.items():
        tree = ast.parse((TESTS / f"{module}.py").read_text())
        defined = {node.name for node in tree.body if isinstance(node, ast.FunctionDef)}
        assert functions <= defined, (module, functions - defined)


class Collected:
    """What `selection_markers` reads of a collected test."""

    def __init__(
        self, test: str, fixtures: tuple[str, ...] = (), engine: str | None = None
    ) -> None:
        module, self.originalname = test.split("::")
        self.path = TESTS / module
        self.name = self.originalname if engine is None else f"{self.originalname}[{engine}]"
        self.fixturenames = fixtures
        self.callspec = None if engine is None else SimpleNamespace(params={"engine": engine})


@pytest.mark.parametrize(
    ("test", "expected"),
    [
        (Collected("test_tasks_pause.py::test_x", ("engine",), "sqlite"), []),
        (Collected("test_tasks_pause.py::test_x", ("engine",), "postgresql"), ["postgresql"]),
        (Collected("test_api_http.py::test_x", ("pg_server", "postgres_database")), ["postgresql"]),
        (Collected("test_console_task.py::test_x", ("page", "chromium")), ["browser"]),
        (Collected("test_console_task.py::test_x", ("server",)), []),
        (Collected("test_bench_paint.py::test_x"), ["browser"]),
        (
            Collected("test_reliability_wal.py::test_x", ("engine",), "postgresql"),
            ["postgresql", "kills"],
        ),
        (
            Collected("test_worker_e2e.py::test_a_killed_worker_is_rescued_after_its_lease"),
            ["kills"],
        ),
        (Collected("test_worker_e2e.py::test_a_worker_works_a_task"), []),
        (
            Collected("test_git_remote_repositories.py::test_x", ("ssh_git_server", "tmp_path")),
            ["git_servers"],
        ),
        (
            Collected(
                "test_git_remote_repositories.py::test_x",
                ("engine", "http_git_server"),
                "postgresql",
            ),
            ["postgresql", "git_servers"],
        ),
    ],
)
def test_a_test_is_marked_from_what_it_uses(test: Collected, expected: list[str]) -> None:
    assert selection_markers(cast(pytest.Item, test)) == expected


# -- the ledgers a test opens (tests/conftest.py, `_quick_sqlite_ledgers`) ---------------------


def synchronous_level(path: Path) -> int:
    with Database(path) as db:
        level = sqlite_database(db).conn.execute("PRAGMA synchronous").fetchall()[0][0]
    assert isinstance(level, int)
    return level


def test_a_new_ledger_is_the_migrated_copy_at_synchronous_off(tmp_path: Path) -> None:
    assert synchronous_level(tmp_path / "ledger.db") == SYNCHRONOUS_OFF


@pytest.mark.durable
def test_a_durable_test_migrates_its_ledger_and_keeps_full(
    tmp_path: Path, migrated_ledger: tuple[Path, object]
) -> None:
    """What the copy stands for: a ledger migrated for real, row for row and table for table."""
    assert synchronous_level(tmp_path / "ledger.db") == SYNCHRONOUS_FULL
    template, _ = migrated_ledger
    assert dump(tmp_path / "ledger.db") == dump(template)
