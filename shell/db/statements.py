"""Named SQL statements in aiosql's grammar, loaded once from the `aios_ledger.sql` package.
A text the same on both engines is written once in `sql/*.sql` and a dialect's folder holds only
those that differ; a name in both is refused, so a dialect never shadows a shared text silently.
Added to the grammar: `-- fragment: NAME` blocks spliced in as `{{NAME}}`, and `-- returns:
RECORD`, the core record a read selects into."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from functools import cache
from importlib import resources

import attrs
from aios_ledger.shell.db.engines import ENGINES
from aios_ledger.shell.db.read_records import READ_RECORDS
from aios_ledger.shell.db.table_statements import SHAPES_FILE, parse_shapes, rendered

DIALECTS = tuple(engine.name for engine in ENGINES)
SHARED_PACKAGE = "aios_ledger.sql"
CATALOGUE_SOURCE = "catalogue.py"
DIALECT_PACKAGES = {engine.name: engine.sql for engine in ENGINES}
MIGRATION_PACKAGES = {engine.name: engine.migrations for engine in ENGINES}
# A block's first line: a statement's name and operation, or a fragment's name.
_BLOCK_LINE = re.compile(
    r"^--[ \t]*(?:name:[ \t]*([a-z_][a-z0-9_]*)([!^$<*#]*)|fragment:[ \t]*([a-z_][a-z0-9_]*))"
    r"[ \t\r]*$",
    re.M,
)
_RETURNS_LINE = re.compile(r"^\s*--\s*returns:\s*([A-Za-z_][A-Za-z0-9_]*)\s*$")
_FRAGMENT_USE = re.compile(r"\{\{([a-z_][a-z0-9_]*)\}\}")
_READS = ("^", "")


@attrs.frozen
class Statement:
    name: str
    operation: str
    sql: str
    returns: str | None = None  # the core record a read selects into (`-- returns:`)


@attrs.frozen
class SqlSource:
    """One file's blocks, before fragments are put in."""

    statements: dict[str, Statement]
    fragments: dict[str, str]


def parse_source(source: str, content: str) -> SqlSource:
    found: dict[str, Statement] = {}
    fragments: dict[str, str] = {}
    heads = list(_BLOCK_LINE.finditer(content))
    for head, after in zip(heads, [*heads[1:], None], strict=True):
        statement, operation, fragment = head.groups()
        name = statement or fragment
        if name in (fragments if fragment else found):
            raise ValueError(f"{source}: {name} is defined twice")
        body = content[head.end() : len(content) if after is None else after.start()].splitlines()
        sql = "\n".join(line for line in body if not line.lstrip().startswith("--")).strip()
        if not sql:
            raise ValueError(f"{source}: {'fragment' if fragment else 'statement'} {name} is empty")
        if fragment:
            fragments[name] = sql
            continue
        declared = [m.group(1) for line in body if (m := _RETURNS_LINE.match(line))]
        if len(declared) > 1:
            raise ValueError(f"{source}: statement {name} declares `returns` twice")
        returns = declared[0] if declared else None
        if returns is not None and operation not in _READS:
            raise ValueError(f"{source}: statement {name} is a write; only a read returns rows")
        found[name] = Statement(name=name, operation=operation, sql=sql, returns=returns)
    return SqlSource(statements=found, fragments=fragments)


def _resolved(statement: Statement, fragments: Mapping[str, str], source: str) -> Statement:
    def put_in(match: re.Match[str]) -> str:
        fragment = fragments.get(match.group(1))
        if fragment is None:
            raise ValueError(
                f"{source}: {statement.name} uses an unknown fragment {match.group(0)}"
            )
        return fragment

    if "{{" not in statement.sql:
        return statement
    sql = _FRAGMENT_USE.sub(put_in, statement.sql)
    # A fragment may use another (a rendered one, a dialect's lookup): one level more, no deeper.
    sql = _FRAGMENT_USE.sub(put_in, sql)
    if _FRAGMENT_USE.search(sql):
        raise ValueError(f"{source}: {statement.name} nests fragments more than two deep")
    return attrs.evolve(statement, sql=sql)


def _sql_files(package_name: str) -> tuple[tuple[str, str], ...]:
    """A package's `.sql` files in name order: each one's name and text."""
    package = resources.files(package_name)
    return tuple(
        (entry.name, entry.read_text("utf-8"))
        for entry in sorted(package.iterdir(), key=lambda item: item.name)
        if entry.name.endswith(".sql") and entry.is_file()
    )


def _package_sources(package_name: str) -> list[tuple[str, SqlSource]]:
    files = _sql_files(package_name)
    return [(name, parse_source(name, text)) for name, text in files if name != SHAPES_FILE]


@cache
def table_shapes(dialect: str) -> Mapping[str, str]:
    """The shapes of the per-table statements: the shared ones and the dialect's own."""
    found: dict[str, str] = {}
    for package in (SHARED_PACKAGE, DIALECT_PACKAGES[dialect]):
        source = resources.files(package) / SHAPES_FILE
        for name, text in parse_shapes(source.name, source.read_text("utf-8")).items():
            if name in found:
                raise ValueError(f"shape {name} is defined in two files")
            found[name] = text
    return found


def rendered_source(dialect: str) -> SqlSource:
    """The statements and fragments the catalogue of tables renders for a dialect."""
    found, fragments = rendered(table_shapes(dialect))
    return SqlSource(
        statements={
            name: Statement(name=name, operation=operation, sql=text)
            for name, (operation, text) in found.items()
        },
        fragments=fragments,
    )


@cache
def statements(dialect: str = "sqlite") -> Mapping[str, Statement]:
    """Every named statement a dialect runs: shared, its own, and those the catalogue renders."""
    if dialect not in DIALECT_PACKAGES:
        raise ValueError(f"no SQL dialect {dialect!r}; known: {', '.join(DIALECTS)}")
    return combine_statements(
        _package_sources(SHARED_PACKAGE),
        _package_sources(DIALECT_PACKAGES[dialect]),
        dialect,
        rendered_source(dialect),
    )


def combine_statements(
    shared: Sequence[tuple[str, SqlSource]],
    own: Sequence[tuple[str, SqlSource]],
    dialect: str,
    catalogue: SqlSource | None = None,
) -> dict[str, Statement]:
    """The shared, a dialect's own and the catalogue's statements, each name once, fragments in."""
    generated = [] if catalogue is None else [(CATALOGUE_SOURCE, catalogue)]
    fragments: dict[str, str] = {}
    for source, parsed in (*shared, *own, *generated):
        for name, fragment in parsed.fragments.items():
            if name in fragments:
                raise ValueError(f"{source}: fragment {name} is defined in two files")
            fragments[name] = fragment
    loaded: dict[str, Statement] = {}
    origin: dict[str, str] = {}
    for where, sources in (
        ("the shared texts", shared),
        (f"{dialect}'s own", own),
        ("the catalogue of tables", generated),
    ):
        for source, parsed in sources:
            for name, statement in parsed.statements.items():
                if name in loaded:
                    raise ValueError(
                        f"statement {name} is defined in {origin[name]} and in {where} ({source}):"
                        " write a text once when both dialects share it, else once per dialect"
                    )
                loaded[name] = _resolved(statement, fragments, source)
                origin[name] = f"{where} ({source})"
                if statement.returns is not None and statement.returns not in READ_RECORDS:
                    raise ValueError(
                        f"{dialect}: statement {name} returns {statement.returns!r}, which is no"
                        f" row record of the core (known: {', '.join(sorted(READ_RECORDS))})"
                    )
    return loaded


def dialect_specific(dialect: str) -> frozenset[str]:
    """The names a dialect's folder defines: its own texts and its own statements."""
    return frozenset(
        name
        for _, parsed in _package_sources(DIALECT_PACKAGES[dialect])
        for name in parsed.statements
    )


@cache
def statement_texts(dialect: str = "sqlite") -> Mapping[str, str]:
    """Name -> SQL text, cached for the write path, which looks a text up for every statement."""
    return {name: statement.sql for name, statement in statements(dialect).items()}


def sql(name: str) -> str:
    return statement_texts()[name]


@cache
def migration_files(dialect: str = "sqlite") -> tuple[tuple[str, str], ...]:
    return _sql_files(MIGRATION_PACKAGES[dialect])
