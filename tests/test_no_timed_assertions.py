"""No test asserts on a duration (CONTRIBUTING.md: no timed assertions): on a loaded machine any
"it took less than N" fails by chance. A test checks what the time stood for (a count, an order
of events, an outcome that only a timeout or a kill explains); a speed is a figure of bench/.
A clock may still bound a wait: a deadline checked inside the loop that polls fails the test
after a minute instead of hanging it.

The check reads each file's syntax, so it is reasonable rather than perfect: within a function
it follows the names bound from a clock (`time.monotonic()`, `perf_counter()`, `time.time()`,
`process_time()`, `datetime.now()`, ... and names bound from those), and finds an `assert` (or
an `if` that fails the test) comparing a difference of them, or comparing a reading outside any
loop (a deadline checked once is a duration in disguise). A time measured elsewhere (a child
process, a browser, a helper that returns it) is not seen.
"""

from __future__ import annotations

import ast
import re
import textwrap
from collections.abc import Iterable, Iterator
from pathlib import Path

import pytest

TESTS = Path(__file__).resolve().parent
TIME_CLOCKS = frozenset(
    f"{name}{suffix}"
    for name in ("monotonic", "perf_counter", "process_time", "thread_time", "time")
    for suffix in ("", "_ns")
)
DATETIME_CLOCKS = frozenset({"now", "utcnow", "today"})
LOOPS = (ast.While, ast.For, ast.AsyncFor)
FUNCTIONS = (ast.FunctionDef, ast.AsyncFunctionDef)
SCOPES = (*FUNCTIONS, ast.Lambda)


def _clock_functions(tree: ast.Module) -> frozenset[str]:
    """The names a module calls a clock by: `from time import perf_counter as clock`."""
    return frozenset(
        alias.asname or alias.name
        for node in tree.body
        if isinstance(node, ast.ImportFrom) and node.module == "time"
        for alias in node.names
        if alias.name in TIME_CLOCKS
    )


def _calls_text(names: Iterable[str]) -> re.Pattern[str]:
    """A call of one of `names`, in source text: the cheap look that spares most files and
    functions the walk of their syntax."""
    return re.compile(rf"\b(?:{'|'.join(sorted(names))})\s*\(")


ANY_CLOCK_TEXT = _calls_text(TIME_CLOCKS | DATETIME_CLOCKS)


def _is_clock_call(node: ast.AST, clocks: frozenset[str]) -> bool:
    if not isinstance(node, ast.Call):
        return False
    called = node.func
    if isinstance(called, ast.Name):
        return called.id in clocks
    if not isinstance(called, ast.Attribute) or not isinstance(called.value, ast.Name):
        return False
    owner = called.value.id
    return (owner == "time" and called.attr in TIME_CLOCKS) or (
        owner in {"datetime", "date"} and called.attr in DATETIME_CLOCKS
    )


def _mentions(node: ast.AST, names: set[str]) -> bool:
    return bool(names) and any(
        isinstance(part, ast.Name | ast.Attribute) and ast.unparse(part) in names
        for part in ast.walk(node)
    )


class _Scope:
    """One function's (or the module's) names bound from a clock: readings, and durations
    (differences of readings)."""

    def __init__(self, clocks: frozenset[str], body: list[ast.stmt]) -> None:
        self.clocks = clocks
        self.readings: set[str] = set()
        self.durations: set[str] = set()
        bindings = [
            (_bindable(target), node.value)
            for statement in body
            for node in ast.walk(statement)
            if isinstance(node, ast.Assign | ast.AnnAssign | ast.AugAssign | ast.NamedExpr)
            and node.value is not None
            for target in (node.targets if isinstance(node, ast.Assign) else [node.target])
        ]
        # Until nothing changes: `t0 = clock()`, `spent = clock() - t0`, `ms = spent * 1000`.
        while True:
            before = (len(self.readings), len(self.durations))
            for names, value in bindings:
                if self.is_duration(value):
                    self.durations |= names
                elif self.is_reading(value):
                    self.readings |= names
            if (len(self.readings), len(self.durations)) == before:
                return

    def is_reading(self, node: ast.AST) -> bool:
        return _mentions(node, self.readings) or any(
            _is_clock_call(part, self.clocks) for part in ast.walk(node)
        )

    def is_duration(self, node: ast.AST) -> bool:
        return _mentions(node, self.durations) or any(
            isinstance(part, ast.BinOp)
            and isinstance(part.op, ast.Sub)
            and (self.is_reading(part.left) or self.is_reading(part.right))
            for part in ast.walk(node)
        )


def _bindable(target: ast.AST) -> set[str]:
    return {
        ast.unparse(node)
        for node in ast.walk(target)
        if isinstance(node, ast.Name | ast.Attribute) and isinstance(node.ctx, ast.Store)
    }


def _fails_the_test(statement: ast.If) -> bool:
    """`if ...: pytest.fail(...)` or `raise AssertionError(...)`: an assert written out."""
    for node in statement.body:
        if isinstance(node, ast.Raise) and node.exc is not None:
            raised = node.exc.func if isinstance(node.exc, ast.Call) else node.exc
            if isinstance(raised, ast.Name) and raised.id == "AssertionError":
                return True
        if (
            isinstance(node, ast.Expr)
            and isinstance(node.value, ast.Call)
            and ast.unparse(node.value.func) == "pytest.fail"
        ):
            return True
    return False


def _comparisons(test: ast.expr) -> Iterator[ast.Compare]:
    for node in ast.walk(test):
        if isinstance(node, ast.Compare) and any(
            isinstance(op, ast.Lt | ast.LtE | ast.Gt | ast.GtE) for op in node.ops
        ):
            yield node


def _checks(scope: _Scope, node: ast.AST, in_loop: bool) -> Iterator[tuple[int, str]]:
    if isinstance(node, ast.Assert) or (isinstance(node, ast.If) and _fails_the_test(node)):
        for compared in _comparisons(node.test):
            if scope.is_duration(compared):
                yield node.lineno, "asserts on a duration"
            elif scope.is_reading(compared) and not in_loop:
                yield node.lineno, "checks a deadline once, outside the loop that waits"
    for child in ast.iter_child_nodes(node):
        if isinstance(child, SCOPES):
            yield from _checks(scope, child, False)
        else:
            yield from _checks(scope, child, in_loop or isinstance(node, LOOPS))


def timed_assertions(source: str) -> list[tuple[int, str]]:
    """(line, what) for each assertion of `source` on a time its code measured."""
    if not ANY_CLOCK_TEXT.search(source) and "from time import" not in source:
        return []
    tree = ast.parse(source)
    clocks = _clock_functions(tree)
    clock_text = _calls_text(TIME_CLOCKS | DATETIME_CLOCKS | clocks)
    lines = source.splitlines()
    found: list[tuple[int, str]] = []
    # The module's functions and its classes' methods, each one scope with the functions it
    # defines (a closure reads the clock names of the function around it); the rest, one more.
    outermost = [
        part
        for statement in tree.body
        for part in (statement.body if isinstance(statement, ast.ClassDef) else [statement])
    ]
    functions = [part for part in outermost if isinstance(part, FUNCTIONS)]
    module_level = [part for part in outermost if not isinstance(part, FUNCTIONS)]
    for body in [module_level, *(function.body for function in functions)]:
        text = "\n".join("\n".join(lines[part.lineno - 1 : part.end_lineno]) for part in body)
        if not clock_text.search(text):
            continue  # no clock read here: nothing measured
        scope = _Scope(clocks, body)
        for part in body:
            found.extend(_checks(scope, part, False))
    return sorted(set(found))


def test_no_test_asserts_on_a_duration() -> None:
    found = [
        f"{path.relative_to(TESTS)}:{line}: {what}"
        for path in sorted(TESTS.rglob("*.py"))
        for line, what in timed_assertions(path.read_text())
    ]
    assert found == []


TIMED = {
    "a difference against a bound": """
        import time
        def test_x():
            started = time.monotonic()
            work()
            assert time.monotonic() - started < 10
        """,
    "a name bound from a difference": """
        import time
        def test_x():
            t0 = time.perf_counter()
            work()
            elapsed_ms = (time.perf_counter() - t0) * 1000
            assert elapsed_ms <= 132
        """,
    "a clock imported by another name": """
        from time import perf_counter as clock
        def test_x():
            t0 = clock()
            work()
            spent = clock() - t0
            assert 0 < spent < 1.0, spent
        """,
    "a deadline checked once": """
        import time
        def test_x():
            deadline = time.monotonic() + 0.1
            work()
            assert time.monotonic() < deadline
        """,
    "a difference of datetimes": """
        from datetime import UTC, datetime
        def test_x():
            began = datetime.now(UTC)
            work()
            assert (datetime.now(UTC) - began).total_seconds() < 5
        """,
    "an attribute bound from a clock, in a method": """
        import time
        class Case:
            def test_x(self):
                self.started = time.monotonic()
                work()
                if time.monotonic() - self.started > 1:
                    pytest.fail("too slow")
        """,
    "inside a polling loop too": """
        import time
        def test_x():
            killed_at = time.monotonic()
            while alive():
                assert time.monotonic() - killed_at < 1.0
                time.sleep(0.01)
        """,
}
UNTIMED = {
    "a deadline bounding a wait": """
        import time
        def test_x():
            deadline = time.monotonic() + 60
            while not ready():
                assert time.monotonic() < deadline, "timed out"
                time.sleep(0.05)
        """,
    "a clock that only paces the test": """
        import time
        def test_x():
            time.sleep(max(0.0, expires - time.time()) + 0.3)
            assert count() == 3
        """,
    "an order of recorded events": """
        def test_x():
            moments = [event["created_at"] for event in events()]
            assert moments == sorted(moments)
            assert first["event_id"] < second["event_id"]
        """,
}


@pytest.mark.parametrize("name", sorted(TIMED))
def test_the_check_finds_an_assertion_on_a_duration(name: str) -> None:
    assert timed_assertions(textwrap.dedent(TIMED[name])) != []


@pytest.mark.parametrize("name", sorted(UNTIMED))
def test_the_check_leaves_bounded_waits_and_orders_alone(name: str) -> None:
    assert timed_assertions(textwrap.dedent(UNTIMED[name])) == []
