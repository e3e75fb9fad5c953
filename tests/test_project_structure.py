"""House rules that keep the layout honest: a pure core, a complete package list, SQL in sql/."""

from __future__ import annotations

import ast
import re
import tomllib
from pathlib import Path

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
    """`pip install .` must carry what the editable install finds in the tree."""
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
    for package, folder in config["package-dir"].items():
        for path in (ROOT / folder).rglob("*"):
            if path.suffix in {".py", ".sql", ".json"} and "__pycache__" not in path.parts:
                relative = path.relative_to(ROOT / folder)
                name = "/".join([*package.split("."), *relative.parts])
                assert name in shipped, name
