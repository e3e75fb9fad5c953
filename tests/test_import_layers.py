"""No import cycle between the units of a package: its subpackages and its top-level modules.

Every import counts, wherever it is written (at module level, inside a function, under
`TYPE_CHECKING`): a cycle hidden from the interpreter is still two units that cannot be read,
tested or changed one without the other. A package's own `__init__` is the aggregate of its
units, not one of them.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from itertools import pairwise
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _unit(package: Path, parts: list[str]) -> str | None:
    """The unit a module path (`parts`, inside `package`) belongs to, or None for the package's
    own `__init__` or a name that is no module of it."""
    if not parts:
        return None
    head = parts[0]
    if (package / head).is_dir() or (package / f"{head}.py").is_file():
        return head
    return None


def _imported(module: Path, package: Path, name: str) -> Iterator[list[str]]:
    """The paths, inside `package` (`aios_ledger.NAME`), of everything `module` imports."""
    location = list(module.relative_to(package).parts[:-1])
    for node in ast.walk(ast.parse(module.read_text(), str(module))):
        if isinstance(node, ast.Import):
            for alias in node.names:
                path = alias.name.split(".")
                if path[:2] == ["aios_ledger", name]:
                    yield path[2:]
        elif isinstance(node, ast.ImportFrom):
            written = (node.module or "").split(".") if node.module else []
            if node.level:
                path = location[: len(location) - (node.level - 1)] + written
            elif written[:2] == ["aios_ledger", name]:
                path = written[2:]
            else:
                continue
            # `from package import unit` names a unit; `from package.unit import name` is in it.
            yield from ([[alias.name] for alias in node.names] if not path else [path])


def import_edges(package: Path, name: str) -> dict[tuple[str, str], str]:
    """Each import from one unit of `package` (`aios_ledger.NAME`) into another, with the file
    it is written in."""
    edges: dict[tuple[str, str], str] = {}
    for module in sorted(package.rglob("*.py")):
        source = _unit(package, [module.relative_to(package).parts[0].removesuffix(".py")])
        if source is None or module == package / "__init__.py":
            continue
        for path in _imported(module, package, name):
            target = _unit(package, path)
            if target is not None and target != source:
                edges.setdefault((source, target), module.relative_to(package).as_posix())
    return edges


def find_cycle(edges: dict[tuple[str, str], str]) -> list[str] | None:
    """One cycle of units (its first unit repeated at its end), or None when there is none."""
    following: dict[str, list[str]] = {}
    for source, target in sorted(edges):
        following.setdefault(source, []).append(target)
    done: set[str] = set()
    for start in sorted(following):
        path: list[str] = []
        on_path: set[str] = set()
        stack = [(start, iter(following.get(start, [])))]
        path.append(start)
        on_path.add(start)
        while stack:
            unit, onward = stack[-1]
            step = next(onward, None)
            if step is None:
                stack.pop()
                path.pop()
                on_path.discard(unit)
                done.add(unit)
            elif step in on_path:
                return [*path[path.index(step) :], step]
            elif step not in done:
                stack.append((step, iter(following.get(step, []))))
                path.append(step)
                on_path.add(step)
    return None


@pytest.mark.parametrize("name", ["core"])
def test_no_import_cycle_between_the_units_of_a_package(name: str) -> None:
    edges = import_edges(ROOT / name, name)
    assert edges, f"no imports found between the units of {name}/"
    cycle = find_cycle(edges)
    if cycle is not None:
        steps = [f"{step[0]} ({edges[step]})" for step in pairwise(cycle)]
        pytest.fail(f"{name}/ imports in a cycle: {' -> '.join(steps)} -> {cycle[-1]}")


def test_a_cycle_is_found_wherever_its_imports_are_written(tmp_path: Path) -> None:
    """Imports inside a function and under TYPE_CHECKING count, relative ones too."""
    package = tmp_path / "pkg"
    (package / "low").mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "low" / "__init__.py").write_text("")
    (package / "low" / "rows.py").write_text(
        "import typing\nif typing.TYPE_CHECKING:\n    from aios_ledger.pkg.high import Thing\n"
    )
    (package / "high.py").write_text("def f():\n    from .low import rows\n")
    (package / "apart.py").write_text("from aios_ledger.pkg import high\n")
    edges = import_edges(package, "pkg")
    assert set(edges) == {("low", "high"), ("high", "low"), ("apart", "high")}
    assert find_cycle(edges) == ["high", "low", "high"]
    del edges[("low", "high")]
    assert find_cycle(edges) is None
