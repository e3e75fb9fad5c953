"""The per-table statements, rendered when the statements are loaded: the shapes in
`sql/table_shapes.sql` (and a dialect's own in its folder) filled from the catalogue of tables,
so each shape is written once for all the tables and no SQL is spelled here."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping, Sequence

from aios_ledger.core.log.tables import SealedTable, Table
from aios_ledger.core.sealed_tables import SEALED_TABLES, TABLES

SHAPES_FILE = "table_shapes.sql"
_WIDTH = 96
_SHAPE_LINE = re.compile(r"^--[ \t]*shape:[ \t]*([a-z_][a-z0-9_]*)[ \t\r]*$", re.M)
_SLOT = re.compile(r"\{\{([a-z_][a-z0-9_]*)\}\}")

# A slot takes a text, or a list of items written apart by commas and wrapped.
Slot = str | Sequence[str]


def parse_shapes(source: str, content: str) -> dict[str, str]:
    """A file's `-- shape: NAME` blocks without comment lines; their spacing is the statement's."""
    shapes: dict[str, str] = {}
    heads = list(_SHAPE_LINE.finditer(content))
    for head, after in zip(heads, [*heads[1:], None], strict=True):
        if head.group(1) in shapes:
            raise ValueError(f"{source}: shape {head.group(1)} is defined twice")
        body = content[head.end() : len(content) if after is None else after.start()].splitlines()
        text = "\n".join(line for line in body if not line.lstrip().startswith("--")).strip("\n")
        if not text.strip():
            raise ValueError(f"{source}: shape {head.group(1)} is empty")
        shapes[head.group(1)] = text
    return shapes


def _listed(items: Iterable[str], indent: int) -> str:
    """`a, b, c`, wrapped before _WIDTH, every line but the first indented by `indent`."""
    lines: list[str] = []
    line = ""
    for item in items:
        if line and indent + len(line) + len(item) + 2 > _WIDTH:
            lines.append(line + ",")
            line = item
        else:
            line = f"{line}, {item}" if line else item
    lines.append(line)
    return f"\n{' ' * indent}".join(lines)


def fill(shape: str, slots: Mapping[str, Slot]) -> str:
    """A shape with every slot filled: a list wraps with its lines indented to the slot."""

    def put_in(match: re.Match[str]) -> str:
        value = slots.get(match.group(1))
        if value is None:
            raise ValueError(f"shape slot {match.group(0)} is not given")
        if isinstance(value, str):
            return value
        return _listed(value, match.start() - (shape.rfind("\n", 0, match.start()) + 1))

    return _SLOT.sub(put_in, shape)


class _Renderer:
    """The shapes of one dialect, filled table by table."""

    def __init__(self, shapes: Mapping[str, str]) -> None:
        self.shapes = shapes

    def __call__(self, shape: str, **slots: Slot) -> str:
        return fill(self.shapes[shape], slots)

    def key(self, table: Table | SealedTable, column: Callable[[str], str]) -> str:
        """The key as the seals record it: one column, or two apart by a space."""
        parts = [column(name) for name in table.key_columns]
        return (
            parts[0] if len(parts) == 1 else self("two_column_key", first=parts[0], second=parts[1])
        )

    def stored(self, column: str) -> str:
        return self("stored_column", column=column)

    def selected(self, table: SealedTable) -> str:
        if table.key_name is None:
            return self("stored_row")
        key = self.key(table, self.stored)
        return self("stored_row_and_key", key=key, key_name=table.key_name)

    def all_rows(self, table: Table | SealedTable) -> str:
        return self("all_rows", table=table.name, columns=table.columns, key=table.key_columns)

    def insert(self, table: Table | SealedTable) -> str:
        parameters = [self("parameter", column=column) for column in table.columns]
        if not table.insert_replaces:
            return self("insert", table=table.name, columns=table.columns, parameters=parameters)
        updates = [
            self("set_excluded", column=column)
            for column in table.columns
            if column not in table.key_columns
        ]
        return self(
            "insert_or_replace",
            table=table.name,
            columns=table.columns,
            parameters=parameters,
            key=table.key_columns,
            updates=updates,
        )

    def state_rows(self, table: SealedTable) -> str:
        history = (
            self("no_sealed_history")
            if table.history is None
            else self("sealed_history", history=fragment_use(table.history))
        )
        order = ""
        if table.in_key_order:
            columns = [self("key_in_bytes_order", column=column) for column in table.key_columns]
            order = "\n" + self("in_key_order", columns=columns)
        return self(
            "state_rows",
            table=table.name,
            selected=self.selected(table),
            history=history,
            key=self.key(table, self.stored),
            in_key_order=order,
        )

    def state_row_exists(self, tables: Iterable[SealedTable]) -> str:
        """`state_rows_gone`'s CASE arms: per sealed table, whether a sealed row is there."""
        arms = []
        for table in tables:
            lookup = (
                self("sealed_row_key", key=self.key(table, str))
                if table.lookup is None
                else fragment_use(table.lookup)
            )
            arms.append(self("state_row_exists", table=table.name, lookup=lookup))
        return "\n".join(arms)

    def archive_rows(self, table: SealedTable, of_task: str) -> str:
        return self(
            "archive_rows",
            table=table.name,
            selected=self.selected(table),
            key=self.key(table, self.stored),
            of_task=self(of_task),
            key_columns=[self.stored(column) for column in table.key_columns],
        )

    def archived_key_taken(self, tables: Iterable[SealedTable]) -> str:
        """`restore_row_taken`'s arms: per archived table, whether a row of the key is there now."""
        arms = [
            self("archived_key_taken", table=table.name, key=self.key(table, str))
            for table in tables
            if table.of_task is not None
        ]
        return f"\n{self('union_all')}\n".join(arms)


def fragment_use(name: str) -> str:
    return "{{" + name + "}}"


def rendered(shapes: Mapping[str, str]) -> tuple[dict[str, tuple[str, str]], dict[str, str]]:
    """The statements a dialect's shapes render (name -> (operation, text)) and fragments."""
    render = _Renderer(shapes)
    found: dict[str, tuple[str, str]] = {}
    for table in TABLES:
        found[f"all_{table.name}"] = ("", render.all_rows(table))
        found[table.insert_name] = ("!", render.insert(table))
        if not isinstance(table, SealedTable):
            continue
        found[f"state_rows_{table.name}"] = ("", render.state_rows(table))
        if table.of_task is not None:
            found[f"archive_rows_{table.name}"] = ("", render.archive_rows(table, table.of_task))
            if table.delete is not None:
                delete = render("delete_archived", table=table.name, of_task=render(table.of_task))
                found[table.delete] = ("!", delete)
    fragments = {
        "state_row_exists": render.state_row_exists(SEALED_TABLES.values()),
        "archived_key_taken": render.archived_key_taken(SEALED_TABLES.values()),
    }
    for table in TABLES:
        # A read that selects a table's every column names them by its fragment.
        columns = "task_columns" if table.name == "tasks" else f"columns_of_{table.name}"
        fragments[columns] = render("columns", columns=table.columns)
    return found, fragments
