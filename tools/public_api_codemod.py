#!/usr/bin/env python3
"""Give every public name of the core one home, and import it from there (issue 27, part 5).

`aios_ledger.core` keeps what an embedder of the task ledger needs in one hand (`KEEP` below,
and every name defined in the core's own top-level modules: errors, `Timestamp`, digests,
JSON types, plans and statements); every other public name lives in the public API of the
subpackage whose module defines it (`aios_ledger.core.tasks`, `.runs`, `.auxiliary`, ...).

Run from anywhere, as often as you like (it is idempotent, and it works from any state: after
merging a branch that added names to `aios_ledger.core`, or imports of moved names from it):

    python3 tools/public_api_codemod.py          # rewrite the tree in place
    python3 tools/public_api_codemod.py --check  # exit 1, listing the files, if it would change any

What it does, in order:

1. Rebalances the `__init__.py` of `core/` and of each `core/<subpackage>/`: every name that
   one of them exports (its `__all__` or its imports), or that a core section of `docs/api.md`
   documents, goes to its home, imported from the module that defines it, and is listed in that
   home's `__all__` (names that stay keep their place in it; arrivals are appended). A
   subpackage's `__init__` is generated whole but for its docstring: the imports under
   `TYPE_CHECKING`, `__all__`, and the `__getattr__` that loads them on first use.
2. Moves each name's line in `docs/api.md` to its home's section (`## aios_ledger.core.tasks`,
   ...), under the same `###` heading (created when missing), creating the section when missing.
3. Rewrites every `from aios_ledger.core[.<subpackage>] import ...` in `core/ shell/ entry/
   tests/ bench/ examples/ docs/` (Python files, and Python code blocks of the Markdown pages,
   `README.md` too) so that each name is imported from the public module that exports it.
   Inside `core/` a name is imported from the module that defines it instead, so that no core
   module depends on a package's `__init__` (no import cycles). Names no public module exports
   (submodules, private helpers) are left alone.
4. Sorts and formats what it changed with the project's ruff (`ruff check --select I --fix`,
   `ruff format`), through stdin, so that `--check` sees exactly what a run would write.

It uses nothing but the standard library and the project's ruff (`.venv/bin/ruff`, else `ruff`
on the PATH). It does not rewrite attribute access (`aios_ledger.core.NAME`), imports inside
strings (a subprocess's script), or prose; an import with a comment inside its parentheses is
named on stderr, for a person.

After merging a branch written against the old `aios_ledger.core` (202 names), resolve its
conflicts so that the codemod can finish the work:

- `core/__init__.py`, `core/*/__init__.py`: keep this side's (`git checkout --ours` when
  merging the other branch into a tree that has this one; its new names are recovered from
  their lines in `docs/api.md`, or from a kept import);
- `docs/api.md`: keep both sides of each conflict (a moved line replaces its older copy);
- a conflict in the import block of any other file: the other branch's imports (or both: the
  duplicates are merged), since this side only rewrote imports there;

then run the codemod, `make lint` and the tests. To keep a name in `aios_ledger.core`, add it
to `KEEP`; to add one to a subpackage, import it under `TYPE_CHECKING` in its `__init__.py`
(and write its line in `docs/api.md`), then run the codemod.
"""

from __future__ import annotations

import argparse
import ast
import re
import shutil
import subprocess
import sys
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import TypeGuard

ROOT = Path(__file__).resolve().parents[1]
CORE = ROOT / "core"
PACKAGE = "aios_ledger.core"
API_PAGE = ROOT / "docs" / "api.md"

# What `aios_ledger.core` keeps of its subpackages' names: the task ledger in one hand. Every
# name defined in a top-level module of the core (`core/errors.py`, `core/digests.py`, ...)
# stays in `aios_ledger.core` as well, without being listed here.
KEEP = frozenset(
    {
        # tasks: the rows, the requests, the states, the decisions, the answers, the enums
        "TaskRow",
        "IdempotencyRow",
        "TaskCreateRequest",
        "TaskCreateCommand",
        "ClaimRequest",
        "ClaimBatchRequest",
        "HeartbeatRequest",
        "SubmitRequest",
        "VerifyRequest",
        "CancelRequest",
        "RetryRequest",
        "RetryPolicy",
        "ExpireRequest",
        "TaskReadRequest",
        "TaskListRequest",
        "TaskState",
        "ExpiryState",
        "decide_create",
        "decide_claim",
        "decide_heartbeat",
        "decide_submit",
        "decide_verify",
        "decide_cancel",
        "decide_retry",
        "decide_expire",
        "lease_token_sha256",
        "TaskSummary",
        "CreateAnswer",
        "ClaimAnswer",
        "HeartbeatAnswer",
        "SubmitAnswer",
        "VerifyAnswer",
        "CancelAnswer",
        "RetryAnswer",
        "ExpireAnswer",
        "TaskView",
        "EventView",
        "HistoryEntry",
        "TaskStatus",
        "VerifyDecision",
        "VerificationMode",
        # log: the event and seal rows, what a plan appends, the tail a state is built with
        "EventRow",
        "SealRow",
        "AppendedEvent",
        "LogTail",
        "ChainTip",
        "chain_of",
        # projection: the seed's two names (it runs with `from aios_ledger.core import *`) and
        # the envelope digest an embedder checks
        "GovernedExecutionBinding",
        "project_execution_envelope",
        "verify_execution_envelope",
        # auxiliary: its error, beside the core's own
        "AuxiliaryRunError",
    }
)

# The order of the subpackages' sections in docs/api.md (others follow, by name).
SECTION_ORDER = ("tasks", "runs", "auxiliary", "projection", "git", "log", "api", "contracts")

SOURCE_FOLDERS = ("core", "shell", "entry", "tests", "bench", "examples", "docs")
SKIPPED_PARTS = {".venv", "__pycache__", "site", "node_modules", ".git"}


class CodemodError(Exception):
    """A state the codemod cannot rebalance on its own (it names what to fix)."""


# --- the public modules: what each exports, and from where ------------------------------------


@dataclass
class Init:
    """One public `__init__.py`: its text, its exports in order, where each comes from."""

    module: str
    path: Path
    text: str
    exports: list[str] = field(default_factory=list)
    sources: dict[str, str] = field(default_factory=dict)


def subpackages() -> list[str]:
    return sorted(
        path.parent.name
        for path in CORE.glob("*/__init__.py")
        if not path.parent.name.startswith(("_", "."))
    )


def top_level_modules() -> set[str]:
    return {path.stem for path in CORE.glob("*.py") if path.stem != "__init__"}


def read_init(module: str, path: Path) -> Init:
    text = path.read_text()
    init = Init(module, path, text)
    tree = ast.parse(text, filename=str(path))
    for imported in _export_imports(tree):
        for alias in imported.names:
            if alias.asname not in (None, alias.name):
                raise CodemodError(f"{path}: `{alias.name} as {alias.asname}` is not handled")
            init.sources[alias.name] = imported.module or ""
    for node in tree.body:
        if _is_all(node) and node.value is not None:
            init.exports = [str(name) for name in ast.literal_eval(node.value)]
    for name in init.sources:
        if not name.startswith("_") and name not in init.exports:
            init.exports.append(name)
    return init


def _export_imports(tree: ast.Module) -> Iterator[ast.ImportFrom]:
    """The imports an `__init__` exports: at its top, or under `if TYPE_CHECKING:`."""
    for node in tree.body:
        if _is_import(node):
            yield node
        elif isinstance(node, ast.If) and _is_type_checking(node.test):
            yield from (child for child in node.body if _is_import(child))


def _is_all(node: ast.stmt) -> TypeGuard[ast.Assign | ast.AnnAssign]:
    if isinstance(node, ast.Assign):
        targets = node.targets
    elif isinstance(node, ast.AnnAssign):
        targets = [node.target]
    else:
        return False
    return len(targets) == 1 and isinstance(targets[0], ast.Name) and targets[0].id == "__all__"


def _is_import(node: ast.stmt) -> TypeGuard[ast.ImportFrom]:
    return isinstance(node, ast.ImportFrom) and node.level == 0 and node.module != "__future__"


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _is_lazy_block(node: ast.stmt) -> bool:
    return (
        isinstance(node, ast.If)
        and isinstance(node.test, ast.UnaryOp)
        and isinstance(node.test.op, ast.Not)
        and _is_type_checking(node.test.operand)
    )


def defining_module(name: str, where: Path) -> str:
    found = sorted(
        ".".join([PACKAGE, *path.relative_to(CORE).with_suffix("").parts])
        for path in CORE.rglob("*.py")
        if path.name != "__init__.py" and name in top_level_names(path)
    )
    if len(found) != 1:
        raise CodemodError(
            f"{where}: {name} is imported from nowhere, and defined in "
            + (" and ".join(found) if found else "no module of the core")
        )
    return found[0]


def module_path(module: str) -> Path:
    return CORE.joinpath(*module.split(".")[2:]).with_suffix(".py")


def bound_names(module: str) -> set[str]:
    """What a module of the core binds at its top: its definitions and its imports."""
    path = module_path(module)
    names = set(top_level_names(path))
    if not path.exists():
        return names
    for node in ast.parse(path.read_text(), filename=str(path)).body:
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            names.update((alias.asname or alias.name).split(".")[0] for alias in node.names)
    return names


@cache
def top_level_names(path: Path) -> frozenset[str]:
    """What a module defines at its top (not what it imports)."""
    names: set[str] = set()
    if not path.exists():
        return frozenset()
    for node in ast.parse(path.read_text(), filename=str(path)).body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, ast.Assign):
            names.update(target.id for target in node.targets if isinstance(target, ast.Name))
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            names.add(node.target.id)
    return frozenset(names)


def home_of(name: str, source: str, subs: list[str], tops: set[str]) -> str:
    parts = source.split(".")
    if parts[:2] != PACKAGE.split(".") or len(parts) < 3:
        raise CodemodError(f"{name} is exported from {source}, outside {PACKAGE}")
    if name in KEEP or parts[2] in tops:
        return PACKAGE
    if parts[2] not in subs:
        raise CodemodError(f"{name} comes from {source}: no subpackage {parts[2]} to export it")
    return f"{PACKAGE}.{parts[2]}"


def rebalance(inits: dict[str, Init]) -> dict[str, Init]:
    """Every exported name in its home's `__init__`, in the same order where it stays."""
    subs, tops = subpackages(), top_level_modules()
    source: dict[str, str] = {}
    for init in inits.values():
        for name, where in init.sources.items():
            if name in init.exports and source.setdefault(name, where) != where:
                raise CodemodError(f"{name} is imported from both {source[name]} and {where}")
    for init in inits.values():
        for name in init.exports:
            # In an `__all__` without its import (a merge kept the one and not the other): the
            # module another `__init__` imports it from, else the one module defining it.
            if name not in source:
                source[name] = defining_module(name, init.path)
    for name, where in source.items():
        # Imported from the module that defines it: a merged branch may have moved the
        # definition, leaving an import behind (which mypy does not take as an export), or
        # nothing at all.
        if name not in top_level_names(module_path(where)):
            try:
                source[name] = defining_module(name, CORE / "__init__.py")
            except CodemodError:
                if name not in bound_names(where):
                    raise
    homes = {name: home_of(name, where, subs, tops) for name, where in source.items()}
    balanced = {}
    for module, init in inits.items():
        stay = [name for name in init.exports if homes[name] == module]
        arrive = [
            name
            for other in inits.values()
            if other.module != module
            for name in other.exports
            if homes[name] == module and name not in stay
        ]
        exports = list(dict.fromkeys([*stay, *arrive]))
        balanced[module] = Init(
            module, init.path, init.text, exports, {name: source[name] for name in exports}
        )
    return balanced


def render_init(init: Init) -> str:
    return render_core(init) if init.module == PACKAGE else render_subpackage(init)


def render_core(init: Init) -> str:
    """`aios_ledger.core`'s `__init__`: its imports and `__all__` rewritten, the rest kept."""
    tree = ast.parse(init.text, filename=str(init.path))
    lines = init.text.splitlines(keepends=True)
    imports = [node for node in tree.body if _is_import(node)]
    assigned = [node for node in tree.body if _is_all(node)]
    spans = sorted(
        [(node.lineno, node.end_lineno or node.lineno, "imports") for node in imports[:1]]
        + [(node.lineno, node.end_lineno or node.lineno, "drop") for node in imports[1:]]
        + [(node.lineno, node.end_lineno or node.lineno, "all") for node in assigned]
    )
    import_text = "".join(f"{line}\n" for line in import_lines(init))
    all_text = render_all(init, assigned[0] if assigned else None, lines)
    out: list[str] = []
    cursor = 1
    for start, end, kind in spans:
        out.extend(lines[cursor - 1 : start - 1])
        if kind == "imports":
            out.append(import_text)
        elif kind == "all":
            out.append(all_text)
        cursor = end + 1
    out.extend(lines[cursor - 1 :])
    text = "".join(out)
    if not imports and import_text:
        text = _after_docstring(text, tree, import_text)
    if not assigned:
        text = text.rstrip("\n") + "\n\n" + all_text
    return text


def import_lines(init: Init) -> list[str]:
    by_module: dict[str, list[str]] = {}
    for name in init.exports:
        by_module.setdefault(init.sources[name], []).append(name)
    return [
        f"from {module} import {', '.join(sorted(names))}"
        for module, names in sorted(by_module.items())
    ]


def _after_docstring(text: str, tree: ast.Module, insert: str) -> str:
    lines = text.splitlines(keepends=True)
    first = tree.body[0] if tree.body else None
    docstring = (
        isinstance(first, ast.Expr)
        and isinstance(first.value, ast.Constant)
        and isinstance(first.value.value, str)
    )
    at = (first.end_lineno or 0) if docstring and first is not None else 0
    head, tail = "".join(lines[:at]), "".join(lines[at:])
    return head + ("\n" if head else "") + insert + tail


LAZY = """
if not typing.TYPE_CHECKING:

    def __getattr__(name: str) -> object:
        \"\"\"Each public name, loaded on first use (PEP 562): the core's modules import each
        other's across its subpackages, so a package that imported all of its modules as it is
        imported would close import cycles. The imports above, for type checkers, are these.\"\"\"
        if name not in __all__:
            raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
{imports}
        loaded = locals()
        globals().update({export: loaded[export] for export in __all__})
        return loaded[name]

    def __dir__() -> list[str]:
        return sorted({*globals(), *__all__})
"""


def render_subpackage(init: Init) -> str:
    """A subpackage's `__init__`: its docstring, its exports for type checkers, its `__all__`,
    and the `__getattr__` that loads them at run time (everything generated but the docstring)."""
    tree = ast.parse(init.text, filename=str(init.path))
    lines = init.text.splitlines(keepends=True)
    kept: list[str] = []
    for index, node in enumerate(tree.body):
        docstring = (
            index == 0 and isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant)
        )
        known = (
            _is_import(node)
            or _is_all(node)
            or _is_lazy_block(node)
            or (isinstance(node, ast.If) and _is_type_checking(node.test))
            or (isinstance(node, ast.Import) and [a.name for a in node.names] == ["typing"])
            or (isinstance(node, ast.ImportFrom) and node.module in ("__future__", "typing"))
        )
        if docstring:
            kept.append("".join(lines[node.lineno - 1 : node.end_lineno]))
        elif not known:
            raise CodemodError(
                f"{init.path}:{node.lineno}: not an export, a docstring or the lazy loader; "
                "move it to a module of the package"
            )
    parts = ["".join(kept).rstrip("\n") + "\n"] if kept else []
    if not init.exports:
        return "".join(parts) + "\n__all__: list[str] = []\n"
    statements = import_lines(init)
    checking = "".join(f"    {line}\n" for line in statements)
    loading = "".join(f"        {line}  # noqa: F401\n" for line in statements)
    parts += [
        "\nimport typing\n\n",
        f"if typing.TYPE_CHECKING:\n{checking}\n",
        render_all(init, None, []),
        LAZY.replace("{imports}", loading.rstrip("\n")),
    ]
    return "".join(parts)


def render_all(init: Init, node: ast.stmt | None, lines: list[str]) -> str:
    """The `__all__` list, its comments and order kept: gone names dropped, arrivals appended."""
    wanted = set(init.exports)
    kept: list[str] = []
    present: set[str] = set()
    if node is not None:
        body = lines[node.lineno - 1 : node.end_lineno]
        for line in body[1:-1]:
            match = re.fullmatch(r"\s*[\"']([A-Za-z_][A-Za-z0-9_]*)[\"'],?\s*", line)
            if match is None:
                kept.append(line if line.endswith("\n") else line + "\n")
            elif match.group(1) in wanted - present:  # once, though a merge kept it twice
                kept.append(f'    "{match.group(1)}",\n')
                present.add(match.group(1))
    if node is not None and len(lines[node.lineno - 1 : node.end_lineno]) == 1:
        present = set()  # a one-line __all__: written again one name a line
        kept = []
    kept += [f'    "{name}",\n' for name in init.exports if name not in present]
    kept = _without_empty_groups(kept)
    return "__all__ = [\n" + "".join(kept) + "]\n"


def _without_empty_groups(lines: list[str]) -> list[str]:
    """Drop a comment line whose group lost every name (the next line is a comment or the end)."""
    out: list[str] = []
    for index, line in enumerate(lines):
        if line.strip().startswith("#"):
            following = lines[index + 1] if index + 1 < len(lines) else None
            if following is None or following.strip().startswith("#"):
                continue
        out.append(line)
    return out


# --- docs/api.md: each name's line in its home's section ---------------------------------------


ITEM = re.compile(r"^- `([A-Za-z_][A-Za-z0-9_]*)`: \S")


@dataclass
class Section:
    title: str
    lines: list[str]  # the whole section, its `## ` line first


def split_sections(text: str) -> tuple[list[str], list[Section]]:
    head: list[str] = []
    sections: list[Section] = []
    for line in text.splitlines(keepends=True):
        if line.startswith("## "):
            sections.append(Section(line[3:].strip(), [line]))
        elif sections:
            sections[-1].lines.append(line)
        else:
            head.append(line)
    return head, sections


def items_of(section: Section) -> Iterator[tuple[str, str, int, int]]:
    """(name, heading, first line, end line) of each item of a section."""
    heading = ""
    index = 0
    lines = section.lines
    while index < len(lines):
        line = lines[index]
        if line.startswith("### "):
            heading = line[4:].strip()
        match = ITEM.match(line)
        if match:
            end = index + 1
            while end < len(lines) and lines[end].startswith("  ") and lines[end].strip():
                end += 1
            yield match.group(1), heading, index, end
            index = end
            continue
        index += 1


def insert_item(section: Section, heading: str, item: list[str]) -> None:
    """The item after the last item under `### heading` (the heading made when missing)."""
    lines = section.lines
    start = next(
        (
            i
            for i, line in enumerate(lines)
            if line.startswith("### ") and line[4:].strip() == heading
        ),
        None,
    )
    if start is None:
        while len(lines) > 1 and not lines[-1].strip():
            lines.pop()
        lines.extend(["\n", f"### {heading}\n", "\n", *item, "\n"])
        return
    end = next((i for i in range(start + 1, len(lines)) if lines[i].startswith("### ")), len(lines))
    stops = [stop for _, _, first, stop in items_of(section) if start < first < end]
    if stops:
        lines[stops[-1] : stops[-1]] = item
        return
    block = [line for line in lines[start + 1 : end]]
    while block and not block[0].strip():
        block.pop(0)
    while block and not block[-1].strip():
        block.pop()
    lines[start + 1 : end] = ["\n", *block, *(["\n"] if block else []), *item, "\n"]


def replace_item(section: Section, item: list[str]) -> bool:
    """Put a moved item in place of its name's item in the section, if it has one: a merge
    that kept both sides of a conflict leaves the other branch's line where it was (the
    newer one), and the line of this side in the name's home."""
    match = ITEM.match(item[0])
    assert match is not None
    for name, _, first, end in items_of(section):
        if name == match.group(1):
            if section.lines[first:end] != item:
                print(
                    f"docs/api.md: {name}: its line in {section.title} replaced by the moved one",
                    file=sys.stderr,
                )
                section.lines[first:end] = item
            return True
    return False


def drop_empty_headings(section: Section) -> None:
    lines = section.lines
    index = 0
    while index < len(lines):
        if lines[index].startswith("### "):
            end = next(
                (i for i in range(index + 1, len(lines)) if lines[i].startswith("### ")),
                len(lines),
            )
            if all(not line.strip() for line in lines[index + 1 : end]):
                del lines[index:end]
                continue
        index += 1


def docstring_paragraph(path: Path) -> str:
    doc = ast.get_docstring(ast.parse(path.read_text())) or ""
    return " ".join(doc.split("\n\n")[0].split())


def rebalance_page(text: str, homes: dict[str, str]) -> str:
    """Each exported name's line in its home's section, under the heading it had."""
    head, sections = split_sections(text)
    public = {section.title: section for section in sections if _is_core(section.title)}
    moving: list[tuple[str, str, list[str]]] = []
    for section in public.values():
        found = [
            (name, heading, first, end)
            for name, heading, first, end in items_of(section)
            if homes.get(name, section.title) != section.title
        ]
        moving += [
            (homes[name], heading, section.lines[first:end]) for name, heading, first, end in found
        ]
        for _, _, first, end in reversed(found):
            del section.lines[first:end]
        drop_empty_headings(section)
    for home, heading, item in moving:
        if home not in public:
            short = home.rpartition(".")[2]
            intro = docstring_paragraph(CORE / short / "__init__.py")
            public[home] = Section(home, [f"## {home}\n", "\n", f"{intro}\n", "\n"])
            sections.insert(_section_place(sections, home), public[home])
        if not replace_item(public[home], item):
            insert_item(public[home], heading, item)
    for section in public.values():
        while len(section.lines) > 1 and not section.lines[-1].strip():
            section.lines.pop()
        section.lines.append("\n")
    out = "".join(head) + "".join("".join(section.lines) for section in sections)
    return out.rstrip("\n") + "\n"


def _is_core(title: str) -> bool:
    return title == PACKAGE or title.startswith(PACKAGE + ".")


def _rank(title: str) -> tuple[int, str]:
    short = title.rpartition(".")[2] if title != PACKAGE else ""
    if not short:
        return (-1, "")
    return (SECTION_ORDER.index(short) if short in SECTION_ORDER else len(SECTION_ORDER), short)


def _section_place(sections: list[Section], title: str) -> int:
    core = [i for i, section in enumerate(sections) if _is_core(section.title)]
    for i in core:
        if _rank(sections[i].title) > _rank(title):
            return i
    return core[-1] + 1 if core else len(sections)


# --- imports across the tree ------------------------------------------------------------------


@dataclass
class Exports:
    by_module: dict[str, set[str]]
    owner: dict[str, str]  # name -> the public module that exports it
    source: dict[str, str]  # name -> the module that defines it

    @classmethod
    def of(cls, inits: dict[str, Init]) -> Exports:
        by_module = {module: set(init.exports) for module, init in inits.items()}
        owner = {name: module for module, init in inits.items() for name in init.exports}
        source = {name: init.sources[name] for init in inits.values() for name in init.exports}
        return cls(by_module, owner, source)


def rewrite_python(text: str, exports: Exports, *, inside_core: bool, where: str = "") -> str:
    """Each name imported from a public module, imported from the one that exports it (a
    trailing comment stays on the first statement; one inside the parentheses would be lost,
    so such an import is left for a person, and named)."""
    tree = ast.parse(text)
    lines = text.splitlines(keepends=True)
    edits: list[tuple[int, int, str]] = []
    for node in ast.walk(tree):
        if not (
            isinstance(node, ast.ImportFrom)
            and node.level == 0
            and node.module in exports.by_module
        ):
            continue
        replacement = rewritten_import(node, exports, inside_core=inside_core)
        if replacement is None:
            continue
        start, end = node.lineno, node.end_lineno or node.lineno
        prefix = lines[start - 1][: node.col_offset]
        suffix = lines[end - 1].encode()[node.end_col_offset or 0 :].decode()
        inside = (
            "".join(lines[start - 1 : end - 1])
            + lines[end - 1][: len(lines[end - 1]) - len(suffix)]
        )
        comment = suffix.strip()
        if prefix.strip() or "#" in inside or (comment and not comment.startswith("#")):
            print(f"{where}:{start}: an import to rewrite by hand: {replacement}", file=sys.stderr)
            continue
        replacement[0] += f"  {comment}" if comment else ""
        body = "".join(f"{prefix}{statement}\n" for statement in replacement)
        edits.append((start, end, body))
    for start, end, body in sorted(edits, reverse=True):
        lines[start - 1 : end] = [body]
    return "".join(lines)


def rewritten_import(
    node: ast.ImportFrom, exports: Exports, *, inside_core: bool
) -> list[str] | None:
    module = node.module or ""
    targets: dict[str, list[str]] = {}
    changed = False
    for alias in node.names:
        name = alias.name
        target = module
        if inside_core and name in exports.source:
            target = exports.source[name]
        elif name not in exports.by_module[module] and name in exports.owner:
            target = exports.owner[name]
        changed = changed or target != module
        spelled = name if alias.asname is None else f"{name} as {alias.asname}"
        targets.setdefault(target, []).append(spelled)
    if not changed:
        return None
    order = sorted(targets, key=lambda target: (target != module, target))
    return [f"from {target} import {', '.join(targets[target])}" for target in order]


FENCE = re.compile(r"^(?P<fence>```+|~~~+)[ \t]*(?P<info>[^\n]*)\n(?P<body>.*?)^(?P=fence)[ \t]*$",
                   re.MULTILINE | re.DOTALL)  # fmt: skip


def rewrite_markdown(text: str, exports: Exports, ruff: Ruff, path: Path) -> str:
    def block(match: re.Match[str]) -> str:
        info = match.group("info").strip().split()
        if not info or info[0] not in {"python", "py", "python3"}:
            return match.group(0)
        body = match.group("body")
        if "aios_ledger.core" not in body:
            return match.group(0)
        try:
            new = rewrite_python(body, exports, inside_core=False, where=str(path))
        except SyntaxError:
            print(f"{path}: a python block that does not parse, left as it is", file=sys.stderr)
            return match.group(0)
        if new == body:
            return match.group(0)
        new = ruff.sort_imports(new, path.with_suffix(".py"))
        start, end = match.start("body") - match.start(0), match.end("body") - match.start(0)
        whole = match.group(0)
        return whole[:start] + new + whole[end:]

    return FENCE.sub(block, text)


class Ruff:
    def __init__(self) -> None:
        beside = [ROOT / ".venv" / "bin" / "ruff", Path(sys.executable).parent / "ruff"]
        found = next((str(path) for path in beside if path.exists()), shutil.which("ruff"))
        if found is None:
            raise CodemodError("no ruff: run `make setup`, or put ruff on the PATH")
        self.binary = found

    def _run(self, args: list[str], text: str, path: Path) -> str:
        done = subprocess.run(
            [self.binary, *args, "--stdin-filename", str(path), "-"],
            input=text,
            capture_output=True,
            text=True,
            cwd=ROOT,
        )
        if done.returncode not in (0, 1) or not done.stdout:
            raise CodemodError(f"ruff {' '.join(args)} failed on {path}: {done.stderr}")
        return done.stdout

    def sort_imports(self, text: str, path: Path) -> str:
        return self._run(["check", "--select", "I", "--fix", "--exit-zero", "--quiet"], text, path)

    def tidy(self, text: str, path: Path) -> str:
        return self._run(["format", "--quiet"], self.sort_imports(text, path), path)


def tree_files() -> Iterator[Path]:
    for folder in SOURCE_FOLDERS:
        for path in sorted((ROOT / folder).rglob("*")):
            if path.suffix in {".py", ".md"} and not SKIPPED_PARTS & set(path.parts):
                yield path
    for path in sorted(ROOT.glob("*.md")):
        if path.name != "CHANGELOG.md":  # history says what was true then
            yield path


# --- the run ----------------------------------------------------------------------------------


def plan() -> dict[Path, str]:
    """Every file the codemod would change, and its new text."""
    modules = {PACKAGE: CORE / "__init__.py"} | {
        f"{PACKAGE}.{sub}": CORE / sub / "__init__.py" for sub in subpackages()
    }
    found = {module: read_init(module, path) for module, path in modules.items()}
    adopt_documented(found, API_PAGE.read_text())
    inits = rebalance(found)
    ruff = Ruff()
    changes: dict[Path, str] = {}
    for init in inits.values():
        new = ruff.tidy(render_init(init), init.path)
        if new != init.text:
            changes[init.path] = new
    exports = Exports.of(inits)
    homes = dict(exports.owner)
    page = API_PAGE.read_text()
    new_page = rebalance_page(page, homes)
    init_paths = set(modules.values())
    for path in tree_files():
        if path in init_paths:
            continue
        text = changes.get(path, path.read_text())
        if path == API_PAGE:
            text = new_page
        if path.suffix == ".py":
            new = rewrite_python(text, exports, inside_core=CORE in path.parents, where=str(path))
            if new != text:
                new = ruff.tidy(new, path)
        else:
            new = rewrite_markdown(text, exports, ruff, path)
        if new != path.read_text():
            changes[path] = new
    return changes


def adopt_documented(inits: dict[str, Init], page: str) -> None:
    """A name the page documents in a section of the core that no `__init__` exports (a merge
    kept one side's `__init__` and the other side's line) is exported again, from the one
    module of the core that defines it; `rebalance` then sends it home."""
    exported = {name for init in inits.values() for name in init.exports}
    _, sections = split_sections(page)
    core = inits[PACKAGE]
    for section in sections:
        if not _is_core(section.title):
            continue
        for name, _, _, _ in items_of(section):
            if name in exported:
                continue
            try:
                source = defining_module(name, API_PAGE)
            except CodemodError as error:
                print(f"public_api_codemod: left for a person: {error}", file=sys.stderr)
                continue
            core.exports.append(name)
            core.sources[name] = source
            exported.add(name)


def main(argv: Iterable[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true", help="change nothing; exit 1 if it would")
    args = parser.parse_args(list(argv) if argv is not None else None)
    try:
        changes = plan()
    except CodemodError as error:
        print(f"public_api_codemod: {error}", file=sys.stderr)
        return 2
    for path, text in sorted(changes.items()):
        print(path.relative_to(ROOT))
        if not args.check:
            path.write_text(text)
    if args.check:
        return 1 if changes else 0
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
