"""No Python repr in any message: a refusal once read `the request expects (<TaskStatus.QUEUED:
'QUEUED'>, 1, 0)`. Triggering every one of the ledger's hundreds of refusals is not feasible, so
this scans the source instead: every f-string of `core/` and `shell/` (each `LedgerError`'s
message is one, or is built from one), with a small type inference over the enums the code
declares, and fails on what prints a repr of an enum:

- `{value!r}` (or `!a`, or `repr(value)`) of a value typed as an enum, which prints
  `<TaskStatus.QUEUED: 'QUEUED'>`;
- `{value}` of a plain `Enum` (not a `StrEnum`), which prints `CheckpointAction.PASSIVE`;
- a tuple, list, set or dict holding an enum formatted whole (`{(status, revision)}`), whose
  text is the repr of each item.

A value is typed as an enum when it is an enum's member (`TaskStatus.QUEUED`), a call of an
enum or of a function annotated to return one, a parameter or variable annotated with one, a
variable assigned one of those, a loop over an enum, or an attribute that some class of the
code declares (or a property returns) as one. `__repr__` methods are left alone: a repr is
their job. The checker's own examples below show it catches the bug it was written for."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
from aios_ledger.core import InitialExecutionProjectionError
from aios_ledger.shell import AUTHORIZATION_ENV, InitialExecutionProjectionStore
from conftest import ENGINES
from legacy_fixtures import OWNER, TASK, legacy_database, on_engine, projection_request, resolver

ROOT = Path(__file__).resolve().parents[1]
SOURCES = sorted([*(ROOT / "core").rglob("*.py"), *(ROOT / "shell").rglob("*.py")])
ENUM_BASES = {"Enum", "StrEnum", "IntEnum", "Flag", "IntFlag"}
TEXT_ENUM_BASES = {"StrEnum", "str"}  # whose format() is the member's value
CONTAINERS = (ast.Tuple, ast.List, ast.Set, ast.Dict)


def _name(node: ast.expr) -> str | None:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return node.attr
    return None


class Enums:
    """What the whole code declares about enums: the classes (and which format as text), the
    attributes and properties typed as one, and the functions that return one."""

    def __init__(self, trees: list[ast.Module]) -> None:
        self.classes: dict[str, bool] = {}  # name -> formats as its value (a StrEnum)
        nodes = [node for tree in trees for node in ast.walk(tree)]
        classes = [node for node in nodes if isinstance(node, ast.ClassDef)]
        changed = True
        while changed:
            changed = False
            for found in classes:
                bases = {_name(base) for base in found.bases}
                if found.name in self.classes or not bases & (ENUM_BASES | set(self.classes)):
                    continue
                textual = bool(bases & TEXT_ENUM_BASES) or any(
                    self.classes.get(str(base), False) for base in bases
                )
                self.classes[found.name] = textual
                changed = True
        self.attributes: dict[str, str] = {}
        self.functions: dict[str, str] = {}
        fields = [item for found in classes for item in found.body]
        for item in fields:
            if not (isinstance(item, ast.AnnAssign) and isinstance(item.target, ast.Name)):
                continue
            if (kind := self.annotated(item.annotation)) is not None:
                self.attributes[item.target.id] = kind
        for node in nodes:
            if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) or not node.returns:
                continue
            if (kind := self.annotated(node.returns)) is None:
                continue
            self.functions[node.name] = kind
            decorators = {_name(decorator) for decorator in node.decorator_list}
            if decorators & {"property", "cached_property"}:
                self.attributes[node.name] = kind

    def annotated(self, annotation: ast.expr) -> str | None:
        """The enum an annotation names (`TaskStatus`, `TaskStatus | None`, `"TaskStatus"`)."""
        if isinstance(annotation, ast.Constant) and isinstance(annotation.value, str):
            try:
                annotation = ast.parse(annotation.value, mode="eval").body
            except SyntaxError:
                return None
        if isinstance(annotation, ast.BinOp):
            return self.annotated(annotation.left) or self.annotated(annotation.right)
        if isinstance(annotation, ast.Subscript) and _name(annotation.value) == "Optional":
            return self.annotated(annotation.slice)
        name = _name(annotation)
        return name if name in self.classes else None


class Finder(ast.NodeVisitor):
    """Walks one module, function by function, and collects each repr an f-string prints."""

    def __init__(self, enums: Enums, path: str) -> None:
        self.enums = enums
        self.path = path
        self.scopes: list[tuple[dict[str, str], set[str]]] = [({}, set())]
        self.found: list[str] = []

    # -- types -------------------------------------------------------------------------------

    def enum_of(self, node: ast.expr) -> str | None:
        names, _ = self.scopes[-1]
        if isinstance(node, ast.Name):
            return names.get(node.id)
        if isinstance(node, ast.Attribute):
            if _name(node.value) in self.enums.classes:
                return _name(node.value)
            return self.enums.attributes.get(node.attr)
        if isinstance(node, ast.Call):
            called = _name(node.func)
            if called in self.enums.classes:
                return called
            return self.enums.functions.get(str(called))
        if isinstance(node, ast.IfExp):
            return self.enum_of(node.body) or self.enum_of(node.orelse)
        return None

    def holds_enum(self, node: ast.expr) -> bool:
        _, containers = self.scopes[-1]
        if isinstance(node, ast.Name):
            return node.id in containers
        if isinstance(node, ast.Dict):
            items = [*(key for key in node.keys if key is not None), *node.values]
        elif isinstance(node, (ast.Tuple, ast.List, ast.Set)):
            items = list(node.elts)
        else:
            return False
        return any(self.enum_of(item) or self.holds_enum(item) for item in items)

    # -- scopes ------------------------------------------------------------------------------

    def visit_FunctionDef(self, node: ast.FunctionDef) -> None:
        self._function(node)

    def visit_AsyncFunctionDef(self, node: ast.AsyncFunctionDef) -> None:
        self._function(node)

    def _function(self, node: ast.FunctionDef | ast.AsyncFunctionDef) -> None:
        if node.name == "__repr__":
            return
        names: dict[str, str] = {}
        arguments = node.args
        for argument in [*arguments.posonlyargs, *arguments.args, *arguments.kwonlyargs]:
            annotation = argument.annotation
            kind = None if annotation is None else self.enums.annotated(annotation)
            if kind is not None:
                names[argument.arg] = kind
        self.scopes.append((names, set()))
        self.generic_visit(node)
        self.scopes.pop()

    def _bind(self, target: ast.expr, value: ast.expr | None, annotation: ast.expr | None) -> None:
        names, containers = self.scopes[-1]
        if not isinstance(target, ast.Name):
            return
        kind = (annotation is not None and self.enums.annotated(annotation)) or (
            value is not None and self.enum_of(value)
        )
        if kind:
            names[target.id] = kind
        if value is not None and isinstance(value, CONTAINERS) and self.holds_enum(value):
            containers.add(target.id)

    def visit_Assign(self, node: ast.Assign) -> None:
        for target in node.targets:
            self._bind(target, node.value, None)
        self.generic_visit(node)

    def visit_AnnAssign(self, node: ast.AnnAssign) -> None:
        self._bind(node.target, node.value, node.annotation)
        self.generic_visit(node)

    def visit_NamedExpr(self, node: ast.NamedExpr) -> None:
        self._bind(node.target, node.value, None)
        self.generic_visit(node)

    def visit_For(self, node: ast.For) -> None:
        if isinstance(node.target, ast.Name) and _name(node.iter) in self.enums.classes:
            self.scopes[-1][0][node.target.id] = str(_name(node.iter))
        self.generic_visit(node)

    # -- f-strings ---------------------------------------------------------------------------

    def visit_JoinedStr(self, node: ast.JoinedStr) -> None:
        for part in node.values:
            if isinstance(part, ast.FormattedValue):
                self._check(part)
        self.generic_visit(node)

    def _check(self, part: ast.FormattedValue) -> None:
        value, where = part.value, f"{self.path}:{part.lineno}: {{{ast.unparse(part.value)}"
        kind = self.enum_of(value)
        if kind and part.conversion in (ord("r"), ord("a")):
            self.found.append(f"{where}!r}} prints the repr of a {kind}")
        elif kind and not self.enums.classes[kind] and part.conversion in (-1, ord("s")):
            self.found.append(f"{where}}} prints {kind}.NAME, not its value")
        elif self.holds_enum(value):
            self.found.append(f"{where}}} prints a container's repr, with a repr of an enum")
        for call in ast.walk(value):
            if not (isinstance(call, ast.Call) and _name(call.func) in {"repr", "ascii"}):
                continue
            if call.args and self.enum_of(call.args[0]):
                self.found.append(f"{where}}} calls repr() on an enum")


def _parsed(sources: dict[str, str]) -> dict[str, ast.Module]:
    return {path: ast.parse(text, path) for path, text in sources.items()}


def _reprs(trees: dict[str, ast.Module]) -> list[str]:
    enums = Enums(list(trees.values()))
    found: list[str] = []
    for path, tree in trees.items():
        finder = Finder(enums, path)
        finder.visit(tree)
        found.extend(finder.found)
    return found


def test_no_message_prints_a_repr_of_an_enum() -> None:
    trees = _parsed({str(path.relative_to(ROOT)): path.read_text() for path in SOURCES})
    # The scan reaches the refusals: hundreds of coded errors with an f-string message.
    messages = [
        node.args[1]
        for tree in trees.values()
        for node in ast.walk(tree)
        if isinstance(node, ast.Call) and str(_name(node.func)).endswith("Error")
        if len(node.args) >= 2
    ]
    assert sum(isinstance(message, ast.JoinedStr) for message in messages) > 300
    assert _reprs(trees) == []


@pytest.mark.parametrize("engine", ENGINES)
def test_the_refusal_that_showed_a_repr_names_the_state_in_words(
    tmp_path: Path, ledger_target: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The finding itself: a projection of a task that moved on named the expected status as
    `<TaskStatus.QUEUED: 'QUEUED'>`."""
    monkeypatch.setenv(AUTHORIZATION_ENV, OWNER)
    path = legacy_database(tmp_path / "ledger.db", task_overrides={"revision": 3})
    store = InitialExecutionProjectionStore(on_engine(path, ledger_target), resolver)
    with pytest.raises(InitialExecutionProjectionError) as refused:
        store.project(TASK, projection_request())
    assert refused.value.code == "REVISION_CONFLICT"
    assert refused.value.detail == (
        "task is QUEUED at revision 3, attempt 0, "
        "the request expects QUEUED at revision 1, attempt 0"
    )


ENUMS = """
import enum
class TaskStatus(enum.StrEnum):
    QUEUED = "QUEUED"
class Step(enum.Enum):
    ONE = 1
class Request:
    expected_status: TaskStatus
def next_status() -> TaskStatus: ...
"""

BAD = {
    "the bug it was written for": """
def check(task, request: Request):
    expected = (request.expected_status, request.expected_revision)
    raise LedgerError("REVISION_CONFLICT", f"the request expects {expected}")
""",
    "!r of an enum parameter": """
def refuse(status: TaskStatus):
    raise LedgerError("INVALID_TRANSITION", f"a task {status!r} does not allow it")
""",
    "!r of an enum-typed attribute": """
def refuse(request):
    return f"expected {request.expected_status!r}"
""",
    "!r of a member": 'MESSAGE = f"{TaskStatus.QUEUED!r}"',
    "a plain Enum formatted": """
def refuse(step: Step):
    return f"step {step}"
""",
    "an enum from a call, in a tuple": """
def refuse():
    status = next_status()
    return f"{(status, 1)}"
""",
    "repr() of an enum": """
def refuse(status: TaskStatus | None):
    return f"{repr(status)}"
""",
    "a loop over an enum": """
def refuse():
    for status in TaskStatus:
        yield f"{status!r}"
""",
}
GOOD = """
def fine(status: TaskStatus, step: Step, task_id: str, request: Request):
    yield f"a {status} task {task_id!r}"  # a StrEnum formats as its value; a str's quotes
    yield f"expects {request.expected_status}, revision {request.expected_revision}"
    yield f"step {step.value} {step.name}"
    yield f"{(task_id, 1)}"  # no enum in it
def __repr__(self):
    return f"{TaskStatus.QUEUED!r}"
"""


@pytest.mark.parametrize("case", BAD)
def test_the_scan_catches_each_kind_of_repr(case: str) -> None:
    assert len(_reprs(_parsed({"enums.py": ENUMS, "bad.py": BAD[case]}))) == 1


def test_the_scan_leaves_text_alone() -> None:
    assert _reprs(_parsed({"enums.py": ENUMS, "good.py": GOOD})) == []
