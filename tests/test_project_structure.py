"""House rules that keep the layout honest: a pure core, a complete package list, SQL in sql/."""

from __future__ import annotations

import ast
import json
import re
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
IMPURE_MODULES = {
    "apsw",
    "sqlite3",
    "os",
    "time",
    "random",
    "uuid",
    "subprocess",
    "socket",
    "asyncio",
    "pathlib",
    "secrets",
    "shutil",
    "tempfile",
    "io",
    "threading",
    "multiprocessing",
    "signal",
    "importlib",
    "aios_ledger.shell",
    "shell",
    "sys",
    # Ed25519 keys and signatures are the shell's (shell/proofs/keys.py): the core builds and
    # parses signed notes and is handed a signature check.
    "cryptography",
}
IMPURE_CALLS = {"open", "print", "input", "exec", "eval", "__import__"}


def python_files(folder: str) -> list[Path]:
    return sorted((ROOT / folder).rglob("*.py"))


def impurities(node: ast.AST) -> list[str]:
    names: list[str] = []
    if isinstance(node, ast.Import):
        names = [alias.name for alias in node.names]
    elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
        names = [node.module]
    found = [
        f"imports {name}"
        for name in names
        if name.split(".")[0] in IMPURE_MODULES or name in IMPURE_MODULES
    ]
    called = node.func.id if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) else ""
    if called in IMPURE_CALLS:
        found.append(f"calls {called}()")
    if isinstance(node, ast.Attribute) and node.attr in {"now", "utcnow", "today"}:
        found.append("reads the clock")
    return found


def test_core_imports_nothing_impure() -> None:
    offences = [
        f"{path.name}:{getattr(node, 'lineno', 0)} {what}"
        for path in python_files("core")
        for node in ast.walk(ast.parse(path.read_text(), filename=str(path)))
        for what in impurities(node)
    ]
    assert offences == []


def test_package_list_misses_no_folder() -> None:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    mapping = config["package-dir"]
    declared = set(config["packages"])
    needed = set()
    for package, folder in mapping.items():
        for path in (ROOT / folder).rglob("*"):
            if path.suffix in {".py", ".sql", ".json"} and "__pycache__" not in path.parts:
                relative = path.parent.relative_to(ROOT / folder)
                needed.add(".".join([package, *relative.parts]))
    assert needed - declared == set()
    for package in declared:
        top = next(name for name in mapping if package == name or package.startswith(name + "."))
        folder = (
            ROOT
            / mapping[top]
            / Path(*package[len(top) + 1 :].split(".") if package != top else ())
        )
        assert (folder / "__init__.py").is_file(), f"{package} needs an __init__.py"


def test_sql_lives_in_sql_files() -> None:
    statement = re.compile(
        r"[\"'](\s*)(SELECT|INSERT|UPDATE|DELETE|CREATE|ALTER|DROP|PRAGMA|BEGIN)\s"
    )
    offences = [
        f"{path.relative_to(ROOT)}:{number}"
        for folder in ("core", "shell")
        for path in python_files(folder)
        for number, line in enumerate(path.read_text().splitlines(), 1)
        if statement.search(line) and not line.lstrip().startswith("#")
    ]
    assert offences == []


def test_public_names_are_exported_explicitly() -> None:
    from aios_ledger import core, shell

    for module in (core, shell):
        assert sorted(module.__all__) == sorted(set(module.__all__))
        for name in module.__all__:
            assert hasattr(module, name), name


def test_wheel_ships_every_module_statement_and_contract(tmp_path: Path) -> None:
    """`pip install .` must carry what the editable install finds in the tree, and the
    `py.typed` markers that let a caller's mypy read the core's and the shell's types."""
    import subprocess
    import sys
    import zipfile

    build = subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "--no-deps",
            "--no-build-isolation",
            "--quiet",
            "-w",
            str(tmp_path),
            str(ROOT),
        ],
        capture_output=True,
        text=True,
    )
    assert build.returncode == 0, build.stderr[-2000:]
    wheel = next(tmp_path.glob("aios_ledger-*.whl"))
    shipped = set(zipfile.ZipFile(wheel).namelist())
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    assert {"aios_ledger/core/py.typed", "aios_ledger/shell/py.typed"} <= shipped
    for package, folder in config["package-dir"].items():
        for path in (ROOT / folder).rglob("*"):
            shippable = path.suffix in {".py", ".sql", ".json"} or path.name == "py.typed"
            if shippable and "__pycache__" not in path.parts:
                relative = path.relative_to(ROOT / folder)
                name = "/".join([*package.split("."), *relative.parts])
                assert name in shipped, name


LAYERS = {"core": "aios_ledger.core", "shell": "aios_ledger.shell"}


def module_names(folder: str) -> dict[str, Path]:
    names = {}
    for path in python_files(folder):
        parts = path.relative_to(ROOT / folder).with_suffix("").parts
        if parts[-1] == "__init__":
            parts = parts[:-1]
        names[".".join([LAYERS[folder], *parts])] = path
    return names


def imported_modules(module: str, path: Path, known: set[str]) -> set[str]:
    """Every module of `known` that `module` imports anywhere in its text: at the top, inside
    functions or under TYPE_CHECKING, since an import hidden in a function still ties the
    two modules together."""
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = package.rsplit(".", node.level - 1)[0] if node.level else ""
            source = ".".join(part for part in (base, node.module or "") if part)
            found.add(source)
            found.update(f"{source}.{alias.name}" for alias in node.names)
    return (found & known) - {module}


def import_graph(folder: str) -> dict[str, set[str]]:
    names = module_names(folder)
    return {name: imported_modules(name, path, set(names)) for name, path in names.items()}


def find_cycle(graph: dict[str, set[str]]) -> list[str]:
    """One cycle of the graph (empty when there is none), by depth-first search."""
    state: dict[str, str] = {}
    stack: list[str] = []

    def visit(name: str) -> list[str]:
        state[name] = "open"
        stack.append(name)
        for target in sorted(graph[name]):
            if state.get(target) == "open":
                return [*stack[stack.index(target) :], target]
            if target not in state and (cycle := visit(target)):
                return cycle
        state[name] = "done"
        stack.pop()
        return []

    for name in sorted(graph):
        if name not in state and (cycle := visit(name)):
            return cycle
    return []


@pytest.mark.parametrize("folder", sorted(LAYERS))
def test_modules_import_each_other_without_a_cycle(folder: str) -> None:
    assert find_cycle(import_graph(folder)) == []


def test_an_import_inside_a_function_closes_a_cycle(tmp_path: Path) -> None:
    first, second = tmp_path / "first.py", tmp_path / "second.py"
    first.write_text("def later():\n    from aios_ledger.shell.second import x\n")
    second.write_text("from aios_ledger.shell import first\n")
    known = {"aios_ledger.shell.first", "aios_ledger.shell.second"}
    graph = {
        "aios_ledger.shell.first": imported_modules("aios_ledger.shell.first", first, known),
        "aios_ledger.shell.second": imported_modules("aios_ledger.shell.second", second, known),
    }
    assert find_cycle(graph) == [
        "aios_ledger.shell.first",
        "aios_ledger.shell.second",
        "aios_ledger.shell.first",
    ]
    assert find_cycle({**graph, "aios_ledger.shell.second": set()}) == []


@pytest.mark.parametrize("folder", sorted(LAYERS))
def test_each_module_imports_alone(folder: str) -> None:
    """Each module imported first (its folder's modules unloaded): no module depends on another
    having been imported before it.

    Importing `a.b.c` first imports `a`, then `a.b`, then `c`, each only if not yet loaded, and
    the same way whichever module was asked for: so one interpreter, holding what the modules
    import from elsewhere, imports the layer's package and forks a child to import each module
    from there, and a module that a package imported
    first already loads is checked by that package. The shell's folder keeps the core loaded:
    the core imports nothing of the shell (the script checks), so a shell module meets it
    exactly as it would fresh."""
    import subprocess
    import sys

    script = (
        "import importlib, json, os, sys\n"
        "layer, names = sys.argv[1], json.loads(sys.argv[2])\n"
        "if layer != 'aios_ledger.core':\n"
        "    importlib.import_module('aios_ledger.core')\n"
        "    assert not [m for m in sys.modules if m.startswith(layer)], 'core loads shell'\n"
        "def unload():\n"
        "    for loaded in [m for m in sys.modules if m == layer or m.startswith(layer + '.')]:\n"
        "        del sys.modules[loaded]\n"
        "for name in names:  # what they import from elsewhere, loaded once for every child\n"
        "    try:\n"
        "        importlib.import_module(name)\n"
        "    except Exception:\n"
        "        pass\n"
        "unload()\n"
        "importlib.import_module(layer)\n"
        "failures, loaded_by = {}, {layer: set(sys.modules)}\n"
        "def imported_first(name):\n"
        "    read, write = os.pipe()\n"
        "    if os.fork() == 0:\n"
        "        try:\n"
        "            importlib.import_module(name)\n"
        "            report = {'loaded': sorted(sys.modules)}\n"
        "        except BaseException as exc:\n"
        "            report = {'loaded': [], 'failure': repr(exc)}\n"
        "        with os.fdopen(write, 'w') as out:\n"
        "            json.dump(report, out)\n"
        "        os._exit(0)\n"
        "    os.close(write)\n"
        "    with os.fdopen(read, 'rb') as pipe:\n"
        "        report = json.loads(pipe.read())\n"
        "    os.wait()\n"
        "    if 'failure' in report:\n"
        "        failures[name] = report['failure']\n"
        "    return set(report['loaded'])\n"
        "def first(name):\n"
        "    if name not in loaded_by:\n"
        "        parts = name.split('.')\n"
        "        for end in range(len(layer.split('.')), len(parts)):\n"
        "            if name in first('.'.join(parts[:end])):\n"
        "                loaded_by[name] = loaded_by['.'.join(parts[:end])]\n"
        "                return loaded_by[name]\n"
        "        loaded_by[name] = imported_first(name)\n"
        "    return loaded_by[name]\n"
        "for name in names:\n"
        "    first(name)\n"
        "print(json.dumps(failures))\n"
    )
    names = sorted(module_names(folder))
    done = subprocess.run(
        [sys.executable, "-c", script, LAYERS[folder], json.dumps(names)],
        capture_output=True,
        text=True,
        check=True,
    )
    assert json.loads(done.stdout) == {}
