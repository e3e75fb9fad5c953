"""Named SQL statements, loaded once from the `aios_ledger.sql` package.

The grammar is aiosql's: a block starts with `-- name: NAME` followed by an optional operation
suffix (`!` write, `<!` write returning, `^` one row, `$` one value, none: many rows). SQL is never
assembled in Python; callers name a statement and pass parameters. The statements a plan can name
are declared in the core (`core.statements`); `aios_ledger.sql` holds SQLite's texts of them and
`aios_ledger.sql.postgresql` PostgreSQL's, under the same names. PostgreSQL's texts are written
with the same `:name` parameters and handed to psycopg as `%(name)s` (`postgresql_text`).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from functools import cache
from importlib import resources

import attrs

SQLITE_STATEMENTS = "aios_ledger.sql"
POSTGRESQL_STATEMENTS = "aios_ledger.sql.postgresql"
DIALECT_PACKAGES = {"sqlite": SQLITE_STATEMENTS, "postgresql": POSTGRESQL_STATEMENTS}
# A `:name` parameter: not the second colon of a `::type` cast, not inside a quoted literal.
_PARAMETER = re.compile(r"('(?:[^']|'')*')|(?<![:\w]):([a-z_][a-z0-9_]*)")
_NAME_LINE = re.compile(r"^--\s*name:\s*([a-z_][a-z0-9_]*)([!^$<*#]*)\s*$")


@attrs.frozen
class Statement:
    name: str
    operation: str
    sql: str


def parse_statements(source: str, content: str) -> dict[str, Statement]:
    found: dict[str, Statement] = {}
    name: str | None = None
    operation = ""
    body: list[str] = []

    def close() -> None:
        if name is None:
            return
        sql = "\n".join(line for line in body if not line.lstrip().startswith("--")).strip()
        if not sql:
            raise ValueError(f"{source}: statement {name} is empty")
        found[name] = Statement(name=name, operation=operation, sql=sql)

    for line in content.splitlines():
        match = _NAME_LINE.match(line)
        if match:
            close()
            name, operation, body = match.group(1), match.group(2), []
            if name in found:
                raise ValueError(f"{source}: statement {name} is defined twice")
        elif name is not None:
            body.append(line)
    close()
    return found


@cache
def statements(package_name: str = SQLITE_STATEMENTS) -> Mapping[str, Statement]:
    """Every named statement of a dialect's package, by name."""
    loaded: dict[str, Statement] = {}
    package = resources.files(package_name)
    for entry in sorted(package.iterdir(), key=lambda item: item.name):
        if not entry.name.endswith(".sql") or not entry.is_file():
            continue
        for name, statement in parse_statements(entry.name, entry.read_text("utf-8")).items():
            if name in loaded:
                raise ValueError(f"statement {name} is defined in two files")
            loaded[name] = statement
    return loaded


@cache
def statement_texts(dialect: str = "sqlite") -> Mapping[str, str]:
    """Name -> SQL text, for the write path, which looks a text up for every statement; a
    PostgreSQL text comes in psycopg's parameter style."""
    found = statements(DIALECT_PACKAGES[dialect])
    if dialect == "postgresql":
        return {name: postgresql_text(statement.sql) for name, statement in found.items()}
    return {name: statement.sql for name, statement in found.items()}


def postgresql_text(text: str) -> str:
    """`:name` -> `%(name)s`, and a literal `%` doubled (psycopg reads `%` as a placeholder)."""

    def replace(match: re.Match[str]) -> str:
        if match.group(1) is not None:
            return match.group(1).replace("%", "%%")
        return f"%({match.group(2)})s"

    return _PARAMETER.sub(replace, text)


def sql(name: str) -> str:
    return statement_texts()[name]


@cache
def migration_files(dialect: str = "sqlite") -> tuple[tuple[str, str], ...]:
    package = resources.files(f"{DIALECT_PACKAGES[dialect]}.migrations")
    return tuple(
        (entry.name, entry.read_text("utf-8"))
        for entry in sorted(package.iterdir(), key=lambda item: item.name)
        if entry.name.endswith(".sql") and entry.is_file()
    )
