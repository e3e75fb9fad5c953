"""The public API is a contract: each public module exports exactly what `docs/api.md` lists
(that each exported name exists is `test_project_structure`'s). The public modules are
`aios_ledger.core` (at most 90 names: the task ledger in one hand), each of its domain
subpackages, and `aios_ledger.shell`; every name of the core has one home among them."""

from __future__ import annotations

import ast
import importlib
import json
import pkgutil
import re
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import aios_ledger.core
import aios_ledger.shell
import pytest

ROOT = Path(__file__).resolve().parents[1]
API = (ROOT / "docs" / "api.md").read_text()
SUBPACKAGES = sorted(
    f"aios_ledger.core.{found.name}"
    for found in pkgutil.iter_modules(aios_ledger.core.__path__)
    if found.ispkg
)
MODULES: dict[str, ModuleType] = {
    "aios_ledger.core": aios_ledger.core,
    "aios_ledger.shell": aios_ledger.shell,
    **{name: importlib.import_module(name) for name in SUBPACKAGES},
}
CORE_MODULES = ["aios_ledger.core", *SUBPACKAGES]


def documented(module: str) -> list[str]:
    """The names listed (`- \\`name\\`: what it is`) in the module's section of the page."""
    section = re.search(
        rf"^## {re.escape(module)}\n(.*?)(?=^## |\Z)", API, re.DOTALL | re.MULTILINE
    )
    assert section is not None, f"docs/api.md has no section {module}"
    return re.findall(r"^- `([A-Za-z_][A-Za-z0-9_]*)`: \S", section.group(1), re.MULTILINE)


@pytest.mark.parametrize("name", sorted(MODULES))
def test_the_exports_are_the_documented_names(name: str) -> None:
    names = documented(name)
    assert len(names) == len(set(names)), "a name is documented twice"
    assert sorted(MODULES[name].__all__) == sorted(names)


def test_the_core_holds_at_most_90_names() -> None:
    assert len(aios_ledger.core.__all__) <= 90


def test_every_subpackage_has_its_public_api_and_its_section() -> None:
    """A folder of the core with an `__init__.py` is a domain subpackage: it declares its
    public names, and the page has its section (and no section of a subpackage that is gone)."""
    folders = sorted(
        f"aios_ledger.core.{path.parent.name}" for path in (ROOT / "core").glob("*/__init__.py")
    )
    assert folders == SUBPACKAGES
    for name in SUBPACKAGES:
        assert isinstance(vars(MODULES[name]).get("__all__"), list), name
        assert MODULES[name].__all__, f"{name} exports nothing"
    sections = re.findall(r"^## (aios_ledger\.core\.\w+)$", API, re.MULTILINE)
    assert sorted(sections) == SUBPACKAGES


def test_each_name_of_the_core_has_one_home() -> None:
    homes: dict[str, list[str]] = {}
    for module in CORE_MODULES:
        for name in MODULES[module].__all__:
            homes.setdefault(name, []).append(module)
    assert {name: where for name, where in homes.items() if len(where) > 1} == {}


@pytest.mark.parametrize("module", CORE_MODULES)
def test_what_is_not_exported_is_not_importable(module: str) -> None:
    """Helpers stay in their modules: a public module's namespace, once every name it exports
    is loaded, is its `__all__` (and its submodules)."""
    exec(f"from {module} import *", {})
    namespace = MODULES[module]
    public = set(namespace.__all__)
    extra = {
        name
        for name, value in vars(namespace).items()
        if not name.startswith("_") and name not in public and not _is_module(value)
    }
    assert extra == set()


def _is_module(value: object) -> bool:
    return type(value).__name__ == "module"


@pytest.mark.parametrize("module", SUBPACKAGES)
def test_a_subpackage_imports_its_names_plainly(module: str) -> None:
    """A subpackage's `__init__` is its docstring, the imports of its public names from the
    modules that define them, and `__all__`: nothing loaded on first use, nothing imported
    for type checkers alone, each imported name exported."""
    path = ROOT / "core" / module.rpartition(".")[2] / "__init__.py"
    imported: dict[str, str] = {}
    for node in ast.parse(path.read_text()).body:
        if isinstance(node, ast.ImportFrom) and node.module:
            imported.update({alias.name: node.module for alias in node.names})
        elif isinstance(node, ast.Assign):
            assert [ast.unparse(target) for target in node.targets] == ["__all__"]
        else:
            assert isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant), (
                f"{path}: {ast.unparse(node)}"
            )
    assert sorted(imported) == sorted(MODULES[module].__all__)
    for name, source in imported.items():
        assert getattr(MODULES[module], name) is getattr(importlib.import_module(source), name)


def test_the_shell_loads_each_name_from_the_one_list_of_its_homes() -> None:
    """`aios_ledger.shell` lists each name once, as an explicit re-export under `TYPE_CHECKING`
    (so type checkers see its type), and loads it from that home on first use: its `__all__` is
    that list's names, and nothing else in the file names a home."""
    tree = ast.parse((ROOT / "shell" / "__init__.py").read_text())
    (guarded,) = [node for node in tree.body if isinstance(node, ast.If)]
    listed = [
        (alias.name, alias.asname, statement.module)
        for statement in guarded.body
        if isinstance(statement, ast.ImportFrom)
        for alias in statement.names
    ]
    assert all(name == asname for name, asname, _ in listed)
    assert not [
        node
        for node in ast.walk(tree)
        if isinstance(node, ast.Constant)
        and isinstance(node.value, str)
        and node.value.startswith("aios_ledger.")
    ]
    homes = vars(aios_ledger.shell)["_HOMES"]
    assert homes == {name: module for name, _, module in listed}
    assert aios_ledger.shell.__all__ == list(homes)
    for name, source in homes.items():
        assert getattr(aios_ledger.shell, name) is getattr(importlib.import_module(source), name)


def test_importing_the_shell_imports_none_of_its_modules() -> None:
    """Every process of the command line imports `aios_ledger.shell`; what it loads is what
    its command asks for, not the whole store (nor the core, nor a third-party package)."""
    script = (
        "import json, sys\n"
        "before = set(sys.modules)\n"
        "import aios_ledger.shell\n"
        "print(json.dumps(sorted(set(sys.modules) - before)))\n"
    )
    loaded = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, check=True
    )
    assert [name for name in json.loads(loaded.stdout) if name.startswith("aios_ledger")] == [
        "aios_ledger",
        "aios_ledger.shell",
    ]
    misspelled = "TaskLedgr"
    with pytest.raises(AttributeError, match="no attribute 'TaskLedgr'"):
        getattr(aios_ledger.shell, misspelled)


def test_a_missing_name_is_an_attribute_error() -> None:
    missing = "decide_nothing"
    with pytest.raises(AttributeError, match="no attribute 'decide_nothing'"):
        getattr(MODULES["aios_ledger.core.tasks"], missing)
    with pytest.raises(ImportError):
        exec("from aios_ledger.core.auxiliary import TaskRow", {})


def test_the_seed_finds_its_names() -> None:
    """The seed runs with `from aios_ledger.core import *` and `from aios_ledger.shell import *`."""
    core: dict[str, object] = {}
    shell: dict[str, object] = {}
    exec("from aios_ledger.core import *", core)
    exec("from aios_ledger.shell import *", shell)
    assert {"GovernedExecutionBinding", "project_execution_envelope"} <= core.keys()
    assert {
        "InitialExecutionProjectionError",
        "InitialExecutionProjectionRequest",
        "InitialExecutionProjectionStore",
        "SourceCaptureProjectionRecoveryRequest",
    } <= shell.keys()
