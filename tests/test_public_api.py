"""The public API is a contract: each module exports exactly what `docs/api.md` lists (that
each exported name exists is `test_project_structure`'s)."""

from __future__ import annotations

import re
from pathlib import Path

import aios_ledger.core
import aios_ledger.shell
import pytest

ROOT = Path(__file__).resolve().parents[1]
API = (ROOT / "docs" / "api.md").read_text()
MODULES = {"aios_ledger.core": aios_ledger.core, "aios_ledger.shell": aios_ledger.shell}


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


def test_what_is_not_exported_is_not_importable_from_the_core() -> None:
    """Helpers of the shell stay in their modules: the core's namespace is its `__all__` (and
    its subpackages)."""
    public = set(aios_ledger.core.__all__)
    extra = {
        name
        for name, value in vars(aios_ledger.core).items()
        if not name.startswith("_") and name not in public and not _is_module(value)
    }
    assert extra == set()


def _is_module(value: object) -> bool:
    return type(value).__name__ == "module"


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
