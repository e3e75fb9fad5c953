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
import shutil
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import aios_ledger.core
import aios_ledger.shell
import pytest

ROOT = Path(__file__).resolve().parents[1]
API = (ROOT / "docs" / "api.md").read_text()
CODEMOD = ROOT / "tools" / "public_api_codemod.py"
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
def test_a_subpackage_loads_what_it_declares_to_type_checkers(module: str) -> None:
    """A subpackage imports its names for type checkers and loads them on first use: the two
    agree, name for name and object for object, and importing it imports none of its modules."""
    path = ROOT / "core" / module.rpartition(".")[2] / "__init__.py"
    declared: dict[str, str] = {}
    for node in ast.parse(path.read_text()).body:
        if isinstance(node, ast.If) and ast.unparse(node.test) == "typing.TYPE_CHECKING":
            for child in node.body:
                assert isinstance(child, ast.ImportFrom) and child.module, ast.unparse(child)
                declared.update({alias.name: child.module for alias in child.names})
    assert sorted(declared) == sorted(MODULES[module].__all__)
    for name, source in declared.items():
        assert getattr(MODULES[module], name) is getattr(importlib.import_module(source), name)
    script = (
        "import json, sys, aios_ledger.core\n"
        "before = set(sys.modules)\n"
        f"import {module}\n"
        f"print(json.dumps(sorted(set(sys.modules) - before - {{'{module}'}})))\n"
    )
    loaded = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, check=True
    )
    # Beyond what `aios_ledger.core` itself imports, importing the subpackage imports nothing.
    assert json.loads(loaded.stdout) == []


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


# --- the codemod that gives each name its home -------------------------------------------------


def test_the_tree_is_as_the_codemod_leaves_it() -> None:
    """Every `__init__`, the page and every import are where `tools/public_api_codemod.py`
    puts them: a name added to `aios_ledger.core` outside its list, or imported from a module
    that does not export it, is the codemod's to move (or its list's to keep)."""
    done = subprocess.run(
        [sys.executable, str(CODEMOD), "--check"], capture_output=True, text=True, cwd=ROOT
    )
    assert done.returncode == 0, done.stdout + done.stderr


def _copy_for_the_codemod(tmp_path: Path) -> Path:
    copy = tmp_path / "tree"
    for folder in ("core", "tools"):
        shutil.copytree(ROOT / folder, copy / folder, ignore=shutil.ignore_patterns("__pycache__"))
    (copy / "docs").mkdir()
    shutil.copy(ROOT / "docs" / "api.md", copy / "docs" / "api.md")
    shutil.copy(ROOT / "pyproject.toml", copy / "pyproject.toml")
    return copy


def _codemod(tree: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(tree / "tools" / "public_api_codemod.py"), *args],
        capture_output=True,
        text=True,
        cwd=tree,
    )


def test_the_codemod_moves_what_a_merge_put_back_and_rewrites_its_imports(
    tmp_path: Path,
) -> None:
    """From the state a merge of an older branch leaves (a subpackage's name exported by the
    core again, documented in its section, imported from it), one run moves the name home and
    rewrites every import; a second run changes nothing."""
    tree = _copy_for_the_codemod(tmp_path)
    init = tree / "core" / "__init__.py"
    init.write_text(
        init.read_text()
        .replace(
            "from aios_ledger.core.digests import",
            "from aios_ledger.core.auxiliary.decisions import decide_spawn\n"
            "from aios_ledger.core.digests import",
        )
        .replace('    "Timestamp",\n', '    "Timestamp",\n    "decide_spawn",\n')
    )
    page = tree / "docs" / "api.md"
    line = next(x for x in page.read_text().splitlines() if x.startswith("- `decide_spawn`:"))
    text = page.read_text().replace(line + "\n", "")
    page.write_text(text.replace("### Time\n\n", f"### Time\n\n{line}\n", 1))
    (tree / "tests").mkdir()
    (tree / "tests" / "test_merged.py").write_text(
        "from aios_ledger.core import Timestamp, decide_spawn, verify_export_lines\n"
        "from aios_ledger.core.runs import TaskRow\n\n"
        "__all__ = ['Timestamp', 'decide_spawn', 'verify_export_lines', 'TaskRow']\n"
    )
    (tree / "core" / "tasks" / "merged.py").write_text(
        "from aios_ledger.core.log import LogVerifier\n\n__all__ = ['LogVerifier']\n"
    )
    (tree / "docs" / "merged.md").write_text(
        "# Merged\n\n```python\nfrom aios_ledger.core import LogTail, decide_spawn\n```\n"
    )

    first = _codemod(tree)
    assert first.returncode == 0, first.stderr

    assert "decide_spawn" not in init.read_text()
    assert (
        (tree / "tests" / "test_merged.py").read_text()
        == "from aios_ledger.core import TaskRow, Timestamp\n"
        "from aios_ledger.core.auxiliary import decide_spawn\n"
        "from aios_ledger.core.log import verify_export_lines\n\n"
        '__all__ = ["Timestamp", "decide_spawn", "verify_export_lines", "TaskRow"]\n'
    )
    # Inside the core, a name comes from the module that defines it (no package `__init__`
    # between two core modules: no import cycle).
    assert (
        (tree / "core" / "tasks" / "merged.py")
        .read_text()
        .startswith("from aios_ledger.core.log.verification import LogVerifier\n")
    )
    assert (
        "from aios_ledger.core import LogTail\nfrom aios_ledger.core.auxiliary import "
        in (tree / "docs" / "merged.md").read_text()
    )
    moved = page.read_text()
    auxiliary = moved.split("## aios_ledger.core.auxiliary\n")[1].split("\n## ")[0]
    assert line in auxiliary and moved.count(line) == 1
    assert "### Time" in auxiliary  # under the heading it had, made in its home's section
    assert _codemod(tree, "--check").returncode == 0


def test_the_codemod_moves_a_name_the_core_keeps_out_of_its_subpackage(tmp_path: Path) -> None:
    """A name of a subpackage's module that the codemod's list keeps (or that is defined in a
    top-level module of the core) is exported by `aios_ledger.core`, wherever it was found."""
    tree = _copy_for_the_codemod(tmp_path)
    tasks = tree / "core" / "tasks" / "__init__.py"
    text = tasks.read_text()
    tasks.write_text(
        text.replace(
            "if typing.TYPE_CHECKING:\n",
            "if typing.TYPE_CHECKING:\n    from aios_ledger.core.timestamps import Timestamp\n",
            1,
        )
    )
    init = tree / "core" / "__init__.py"
    init.write_text(init.read_text().replace('    "Timestamp",\n', ""))
    assert _codemod(tree).returncode == 0
    assert '"Timestamp"' in init.read_text()
    assert "Timestamp" not in tasks.read_text()
    assert tasks.read_text() == text


def test_the_codemod_exports_a_name_a_merge_left_documented_only(tmp_path: Path) -> None:
    """A merge that kept this side's `__init__` and the other side's page leaves a new name
    documented and exported nowhere, and an old import from a module that no longer defines
    a name: the codemod exports the one from its home, and imports the other from the module
    that defines it."""
    tree = _copy_for_the_codemod(tmp_path)
    evidence = tree / "core" / "runs" / "evidence.py"
    evidence.write_text(evidence.read_text() + '\nRUN_PAUSED = "RUN_PAUSED"\n')
    page = tree / "docs" / "api.md"
    line = "- `RUN_PAUSED`: event type: a run was paused."
    page.write_text(page.read_text().replace("### Time\n\n", f"### Time\n\n{line}\n", 1))
    init = tree / "core" / "__init__.py"
    before = init.read_text()
    defined = "from aios_ledger.core.tasks.transitions import TaskStatus\n"
    assert defined in before
    init.write_text(
        before.replace(defined, "from aios_ledger.core.tasks.decisions import TaskStatus\n")
    )

    assert _codemod(tree).returncode == 0
    assert init.read_text() == before
    runs = (tree / "core" / "runs" / "__init__.py").read_text()
    assert "RUN_PAUSED,\n" in runs and '    "RUN_PAUSED",\n' in runs
    section = page.read_text().split("## aios_ledger.core.runs\n")[1].split("\n## ")[0]
    assert line in section
    assert _codemod(tree, "--check").returncode == 0
