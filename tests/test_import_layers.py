"""The core and the shell are layered: no import cycle between the units of either. A unit is a
subpackage (`shell/db/`, `core/log/`, ...) or a top-level module (`shell/cli.py`, ...); the
package's `__init__.py` is the unit `aios_ledger.shell` (or `.core`). Every import counts wherever
it is written (module level, inside a function, under `TYPE_CHECKING`), relative ones too, and so
does a string that names a module (what `importlib.import_module` loads from a table: the command
groups, the engines, the package's own names): a cycle hidden from the interpreter is still two
units that cannot be read, tested or changed one without the other."""

from __future__ import annotations

import ast
from collections.abc import Iterator, Mapping
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SHELL = ROOT / "shell"
PACKAGE = "aios_ledger.shell"


def _package(root: Path) -> str:
    return f"aios_ledger.{root.name}"


def unit_of(module: str, shell: Path = SHELL) -> str | None:
    """The unit a shell module belongs to (`aios_ledger.shell.db.run` is in `db`), or None
    for a module outside the shell or one that does not exist."""
    parts = module.split(".")
    if parts[:2] != _package(shell).split("."):
        return None
    if len(parts) == 2:
        return _package(shell)
    first = parts[2]
    if (shell / first / "__init__.py").is_file() or (shell / f"{first}.py").is_file():
        return first
    return None


def _module_name(path: Path, shell: Path) -> str:
    relative = path.relative_to(shell).with_suffix("")
    parts = [part for part in relative.parts if part != "__init__"]
    return ".".join([_package(shell), *parts])


def _resolve(node: ast.ImportFrom, importer: str, is_package: bool) -> str:
    """The absolute module an import-from names (a relative one resolved from its importer)."""
    if not node.level:
        return node.module or ""
    base = importer.split(".")
    if not is_package:
        base = base[:-1]
    base = base[: len(base) - (node.level - 1)]
    return ".".join([*base, node.module] if node.module else base)


def imported_modules(path: Path, shell: Path = SHELL) -> Iterator[str]:
    """Every module one file of the shell imports or names, wherever in the file."""
    importer = _module_name(path, shell)
    is_package = path.name == "__init__.py"
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            yield from (alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            module = _resolve(node, importer, is_package)
            for alias in node.names:
                # `from aios_ledger.shell import cli` imports a module, not a name of the package.
                submodule = f"{module}.{alias.name}"
                yield submodule if unit_of(submodule, shell) is not None else module
        elif isinstance(node, ast.Constant) and isinstance(node.value, str):
            yield node.value.partition(":")[0]


def unit_graph(shell: Path = SHELL) -> dict[str, set[str]]:
    """Which units each unit imports (an edge to itself left out)."""
    graph: dict[str, set[str]] = {}
    for path in sorted(shell.rglob("*.py")):
        source = unit_of(_module_name(path, shell), shell)
        assert source is not None, path
        targets = graph.setdefault(source, set())
        for module in imported_modules(path, shell):
            target = unit_of(module, shell)
            if target is not None and target != source:
                targets.add(target)
    return graph


def cycles(graph: Mapping[str, set[str]]) -> list[tuple[list[str], list[str]]]:
    """Each group of units that import one another, however far round (a strongly connected
    component, by Tarjan's algorithm), sorted, with one cycle through it: the units it passes,
    each importing the next and the last importing the first."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    groups: list[set[str]] = []

    def visit(unit: str) -> None:
        index[unit] = low[unit] = len(index)
        stack.append(unit)
        for target in sorted(graph.get(unit, ())):
            if target not in index:
                visit(target)
                low[unit] = min(low[unit], low[target])
            elif target in stack:
                low[unit] = min(low[unit], index[target])
        if low[unit] == index[unit]:
            group = set()
            while True:
                member = stack.pop()
                group.add(member)
                if member == unit:
                    break
            if len(group) > 1:
                groups.append(group)

    for unit in sorted(graph):
        if unit not in index:
            visit(unit)
    return sorted((sorted(group), _a_cycle_in(group, graph)) for group in groups)


def _a_cycle_in(group: set[str], graph: Mapping[str, set[str]]) -> list[str]:
    """The shortest way from the group's first unit back to itself, inside the group."""
    start = min(group)
    paths = {start: [start]}
    frontier = [start]
    while frontier:
        following = []
        for unit in frontier:
            for target in sorted(graph.get(unit, set()) & group):
                if target == start:
                    return paths[unit]
                if target not in paths:
                    paths[target] = [*paths[unit], target]
                    following.append(target)
        frontier = following
    raise AssertionError(f"no cycle in {sorted(group)}")


@pytest.mark.parametrize("name", ["core", "shell"])
def test_no_import_cycle_between_the_units_of_a_package(name: str) -> None:
    graph = unit_graph(ROOT / name)
    assert any(graph.values()), f"no imports found between the units of {name}/"
    found = [
        f"{', '.join(members)}: e.g. {' -> '.join([*cycle, cycle[0]])}"
        for members, cycle in cycles(graph)
    ]
    assert found == [], f"units of {name}/ that import one another:\n" + "\n".join(found)


def test_every_kind_of_import_is_an_edge(tmp_path: Path) -> None:
    """An import inside a function, under `TYPE_CHECKING`, relative, of a submodule by
    `from package import module`, or by a module's name in a string, is an edge."""
    shell = tmp_path / "shell"
    for unit in ("a", "b", "c", "d", "e", "f"):
        (shell / unit).mkdir(parents=True)
        (shell / unit / "__init__.py").write_text("")
    (shell / "top.py").write_text("")
    (shell / "__init__.py").write_text("")
    (shell / "a" / "x.py").write_text(
        "from typing import TYPE_CHECKING\n"
        "if TYPE_CHECKING:\n    from aios_ledger.shell.b.y import Y\n"
        "def f() -> None:\n    import aios_ledger.shell.c\n"
        "from ..d import z\n"
        "from aios_ledger.shell import top\n"
        'GROUPS = ("aios_ledger.shell.e.cli", "aios_ledger.shell.f:app", "see aios_ledger.shell")\n'
    )
    assert unit_graph(shell)["a"] == {"b", "c", "d", "e", "f", "top"}


def test_a_cycle_is_found_however_long() -> None:
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [
        (["a", "b", "c"], ["a", "b", "c"])
    ]
    assert cycles({"a": {"b", "c"}, "b": {"a"}, "c": {"a"}}) == [(["a", "b", "c"], ["a", "b"])]
    assert cycles({"a": {"b"}, "b": set()}) == []


def test_the_shell_s_tables_of_modules_are_edges() -> None:
    """`shell/cli.py` loads each command group by its module's name, and the package each of its
    names by its home's: those count as imports."""
    graph = unit_graph()
    assert {"tasks", "log", "serve"} <= graph["cli"]
    assert {"tasks", "db", "cli"} <= graph[PACKAGE]


def test_a_unit_is_a_subpackage_or_a_top_level_module() -> None:
    assert unit_of("aios_ledger.shell.db.engines.sqlite") == "db"
    assert unit_of("aios_ledger.shell.cli") == "cli"
    assert unit_of("aios_ledger.shell") == PACKAGE
    assert unit_of("aios_ledger.shell.nothing_here") is None
    assert unit_of("aios_ledger.core.log") is None
