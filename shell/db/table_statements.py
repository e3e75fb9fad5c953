"""The per-table statements, rendered from the catalogue of tables (`aios_ledger.sql.catalogue`)
when the statements are loaded: the one place outside `sql/*.sql` that spells SQL, and only the
mechanical shapes (every row of a table, a whole row inserted, a state row beside its last
sealed row, a sealed row still there, an archived task's rows read, deleted and looked for).
Each shape is written once here for all the tables."""

from __future__ import annotations

from collections.abc import Iterable

from aios_ledger.sql.catalogue import BY_NAME, DIALECTS, TABLES, Dialect, Sealed, Table

_WIDTH = 96
# The alias of the state row in a `state_rows_*` read; the history fragments name it too.
STORED = "stored"
# The alias of the sealed row in `state_rows_gone`; the lookup fragments name it too.
SEALED = "r"


def _listed(items: Iterable[str], indent: str) -> str:
    """`a, b, c`, wrapped before _WIDTH with `indent` on every line but the first."""
    lines: list[str] = []
    line = ""
    for item in items:
        if line and len(indent) + len(line) + len(item) + 2 > _WIDTH:
            lines.append(line + ",")
            line = item
        else:
            line = f"{line}, {item}" if line else item
    lines.append(line)
    return f"\n{indent}".join(lines)


def _key_text(table: Table, alias: str) -> str:
    """The key as the seals record it: one column, or two joined by a space."""
    return " || ' ' || ".join(f"{alias}{column}" for column in table.key)


def all_rows(table: Table) -> str:
    return (
        f"SELECT {_listed(table.columns, '       ')}\n"
        f"FROM {table.name} ORDER BY {', '.join(table.key)};"
    )


def insert(table: Table) -> str:
    text = (
        f"INSERT INTO {table.name}(\n  {_listed(table.columns, '  ')})\n"
        f"VALUES (\n  {_listed((f':{column}' for column in table.columns), '  ')})"
    )
    if table.insert_replaces:
        others = [column for column in table.columns if column not in table.key]
        text += (
            f"\nON CONFLICT ({', '.join(table.key)}) DO UPDATE\n"
            f"SET {_listed((f'{column} = excluded.{column}' for column in others), '    ')}"
        )
    return text + ";"


def state_rows(table: Table, sealed: Sealed, dialect: Dialect) -> str:
    key = _key_text(table, f"{STORED}.")
    selected = f"SELECT {STORED}.*"
    if sealed.key_name is not None:
        selected += f", {key} AS {sealed.key_name}"
    history = (
        dialect.no_number
        if sealed.history is None
        else dialect.number.format(f"{{{{{sealed.history}}}}}")
    )
    text = (
        f"{selected},\n"
        "       s.event_id AS sealed_event_id, s.row_digest AS sealed_row_digest,\n"
        f"       {history} AS sealed_history\n"
        f"FROM {table.name} AS {STORED}\n"
        "LEFT JOIN event_seal_rows AS s\n"
        f"  ON s.row_table = '{table.name}' AND s.row_key = {key}\n"
        " AND s.event_id = (SELECT max(event_id) FROM event_seal_rows\n"
        f"                   WHERE row_table = '{table.name}'\n"
        f"                     AND row_key = {key})"
    )
    if sealed.in_key_order:
        text += "\nORDER BY " + ", ".join(
            f"{STORED}.{column}{dialect.bytewise}" for column in table.key
        )
    return text + ";"


def state_row_exists(tables: Iterable[Table]) -> str:
    """`state_rows_gone`'s CASE arms: per sealed table, whether the row a seal names is there."""
    arms = []
    for table in tables:
        if table.sealed is None:
            continue
        lookup = (
            f"{_key_text(table, '')} = {SEALED}.row_key"
            if table.sealed.lookup is None
            else f"{{{{{table.sealed.lookup}}}}}"
        )
        arms.append(
            f"  WHEN '{table.name}' THEN EXISTS (\n    SELECT 1 FROM {table.name} WHERE {lookup})"
        )
    return "\n".join(arms)


def archive_rows(table: Table, sealed: Sealed, of_task: str) -> str:
    key = _key_text(table, f"{STORED}.")
    selected = f"SELECT {STORED}.*"
    if sealed.key_name is not None:
        selected += f", {key} AS {sealed.key_name}"
    return (
        f"{selected},\n"
        "       (SELECT s.row_digest FROM event_seal_rows AS s\n"
        f"        WHERE s.row_table = '{table.name}' AND s.row_key = {key}\n"
        "        ORDER BY s.event_id DESC LIMIT 1) AS sealed_row_digest\n"
        f"FROM {table.name} AS {STORED}\n"
        f"WHERE {of_task}\n"
        f"ORDER BY {', '.join(f'{STORED}.{column}' for column in table.key)};"
    )


def archived_key_taken(tables: Iterable[Table]) -> str:
    """`restore_row_taken`'s arms: per table an archive takes rows of, whether a row of the
    file's key (`:row_table`, `:row_key`) is in the table now."""
    return "\nUNION ALL\n".join(
        f"SELECT 'key' FROM {table.name}\n"
        f"WHERE :row_table = '{table.name}' AND {_key_text(table, '')} = :row_key"
        for table in tables
        if table.sealed is not None and table.sealed.of_task is not None
    )


def rendered(dialect: str) -> tuple[dict[str, tuple[str, str]], dict[str, str]]:
    """The rendered statements of a dialect (name -> (operation, text), fragments still to put
    in) and the rendered fragments (name -> text)."""
    spelled = DIALECTS[dialect]
    found: dict[str, tuple[str, str]] = {}
    for table in TABLES:
        found[f"all_{table.name}"] = ("", all_rows(table))
        found[table.insert_name] = ("!", insert(table))
        sealed = table.sealed
        if sealed is None:
            continue
        found[f"state_rows_{table.name}"] = ("", state_rows(table, sealed, spelled))
        if sealed.of_task is not None:
            found[f"archive_rows_{table.name}"] = ("", archive_rows(table, sealed, sealed.of_task))
        if sealed.delete is not None:
            found[sealed.delete] = ("!", f"DELETE FROM {table.name} WHERE {sealed.of_task};")
    fragments = {
        "state_row_exists": state_row_exists(TABLES),
        "archived_key_taken": archived_key_taken(TABLES),
        "task_columns": _listed(BY_NAME["tasks"].columns, ""),
    }
    return found, fragments
