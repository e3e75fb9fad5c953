"""The rows a sealed event proves: the state tables, and the digest of a row as it was written.

A later column is left out of the digest while it holds the value its migration gave it, so rows
sealed before it still verify; a whole-second timestamp digests in its whole-second spelling
(`…:05Z`), because older seals, append-only, were taken over that spelling.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from functools import lru_cache
from json.encoder import encode_basestring_ascii as _ascii
from typing import cast

import attrs
from aios_ledger.core.digests import canonical_json, digest_bytes, digest_json
from aios_ledger.core.errors import LedgerError
from aios_ledger.core.jsonvalue import JsonObject

ROW_SCHEMA = "aios.state_row.v1"

# The state tables the log itself reads by name (a domain names its others).
TASKS = "tasks"
AUXILIARY_RUNS = "auxiliary_runs"
INITIAL_PROJECTIONS = "task_initial_execution_projections"
SOURCE_CAPTURE_RECOVERIES = "task_source_capture_projection_recoveries"
TASK_PROPOSALS = "task_proposals"
AGENT_SCAN_CHARGES = "agent_scan_charges"
RECORDED_ANSWERS = "task_idempotency"
GOVERNED_BINDINGS = "governed_bindings"
RUNS = "runs"
RUN_EVENTS = "run_events"
TASK_SPEND = "task_spend"
# The state columns that hold timestamp text (auxiliary runs count integer milliseconds).
TIMESTAMP_COLUMNS = frozenset(
    {"created_at", "updated_at", "deadline", "lease_expires_at", "not_before"}
)
LATER_COLUMNS = frozenset({"seq"})
# Columns added to a state table whose rows from before them hold NULL there (a token's
# capability grant, 0.x migration 0012): a seal taken before the column is held against the row
# without it, but only while it is NULL.
LATER_NULL_COLUMNS = frozenset({"capabilities_json", "scan_bytes", "scan_seconds"})
_WHOLE_SECOND_FRACTION = ".000Z"
_MILLISECOND_TEXT_WIDTH = 24  # `YYYY-MM-DDTHH:MM:SS.mmmZ`


@attrs.frozen
class RowImage:
    """A state row as a transition wrote it: its table, its key and the digest of its columns."""

    table: str
    key: str
    digest: str

    def public(self) -> dict[str, str]:
        return {"table": self.table, "key": self.key, "digest": self.digest}


def row_digest(
    table: str, key: str, columns: Mapping[str, object], *, without: frozenset[str] = frozenset()
) -> str | None:
    """`digest_json(ROW_SCHEMA, {table, key, columns})`, or None when a stored value is one no
    plan writes (a blob, a NaN). A flat row is written out column by column, which is faster
    than walking it as an untrusted value (tests hold the two equal)."""
    if type(table) is not str or type(key) is not str:
        return _checked_row_digest(table, key, columns, without)
    layout = _layout(tuple(columns), without)
    written = _flat_object(layout, tuple(columns.values()), respell=True)
    if written is None:
        return _checked_row_digest(table, key, columns, without)
    document = '{"columns":' + written + ',"key":' + _ascii(key) + ',"table":' + _ascii(table)
    return digest_bytes(ROW_SCHEMA, (document + "}").encode("ascii"))


def _flat_object(
    layout: Sequence[tuple[str, int, bool]],
    values: Sequence[object],
    before: Sequence[object] | None = None,
    *,
    respell: bool = False,
) -> str | None:
    """The canonical JSON text of the columns in `layout` (those that differ from `before`,
    when given), written out column by column; None when a value is not text, an integer or
    NULL. `respell`: timestamps in their digest spelling."""
    parts = []
    for prefix, index, timestamp in layout:
        value = values[index]
        if before is not None and before[index] == value:
            continue
        if isinstance(value, str):  # a status is a StrEnum member: its text, as json writes it
            if respell and timestamp:
                value = digest_spelling(value)
            parts.append(prefix + _ascii(value))
        elif value is None:
            parts.append(prefix + "null")
        elif type(value) is int:
            parts.append(prefix + int.__repr__(value))
        else:
            return None
    return "{" + ",".join(parts) + "}"


def digest_spelling(text: str) -> str:
    """The spelling a timestamp text is digested in: a whole second written to the millisecond
    loses its `.000`; any other text is itself."""
    if len(text) == _MILLISECOND_TEXT_WIDTH and text.endswith(_WHOLE_SECOND_FRACTION):
        return text[:19] + "Z"
    return text


@lru_cache(maxsize=64)
def _layout(names: tuple[str, ...], without: frozenset[str]) -> tuple[tuple[str, int, bool], ...]:
    """Each column's `"name":` text, its place among the row's values and whether it holds a
    timestamp, in key order: worked out once per table."""
    return tuple(
        (_ascii(name) + ":", names.index(name), name in TIMESTAMP_COLUMNS)
        for name in sorted(names)
        if name not in without
    )


def _checked_row_digest(
    table: str, key: str, columns: Mapping[str, object], without: frozenset[str]
) -> str | None:
    spelled = {
        name: digest_spelling(value)
        if name in TIMESTAMP_COLUMNS and isinstance(value, str)
        else value
        for name, value in columns.items()
        if name not in without
    }
    document: JsonObject = {"table": table, "key": key, "columns": cast(JsonObject, spelled)}
    try:
        return digest_json(ROW_SCHEMA, document)
    except (LedgerError, TypeError, ValueError):
        return None


def binding_key(task_id: str, job_id: str) -> str:
    """The key a `governed_bindings` row is sealed under: its two key columns, apart by a space
    (no identifier holds one, so two bindings never share a key)."""
    return f"{task_id} {job_id}"


def run_event_key(run_id: str, seq: int) -> str:
    """The key a `run_events` row is sealed under: its run and its place there, apart by a
    space (no identifier holds one)."""
    return f"{run_id} {seq}"


def row_image(table: str, key: str, columns: Mapping[str, object]) -> RowImage:
    """The image of a row a decision writes (every value a plan writes has a digest)."""
    digest = row_digest(table, key, columns)
    if digest is None:
        raise ValueError(f"a row of {table} that has no digest: {key!r}")
    return RowImage(table, key, digest)


# A seal's chained row digest (see `chained_row_digest`).
ROW_CHAIN_SCHEMA = "aios.row_chain.v1"


@attrs.frozen
class RowWrite:
    """A row a transition wrote, as it was (`before`, None when inserted) and as it is
    (`after`), its values in the order of `names`."""

    table: str
    key: str
    names: tuple[str, ...]
    before: tuple[object, ...] | None
    after: tuple[object, ...]

    def changes(self, *, full: bool) -> str:
        """The changed columns (all of them when `full` or the row is new) as canonical JSON
        text, values as written; `changes_text` gives the same text (tests hold them equal)."""
        whole = full or self.before is None
        before = None if whole else self.before
        written = _flat_object(_layout(self.names, frozenset()), self.after, before)
        return changes_text(self._changed(whole)) if written is None else written

    def _changed(self, whole: bool) -> dict[str, object]:
        before = self.before
        return {
            name: value
            for index, (name, value) in enumerate(zip(self.names, self.after, strict=True))
            if whole or before is None or before[index] != value
        }


def changes_text(columns: Mapping[str, object]) -> str:
    """Canonical JSON of a flat object, written out column by column as `row_digest` writes its
    rows; any other value takes the checked path."""
    written = _flat_object(_layout(tuple(columns), frozenset()), tuple(columns.values()))
    return canonical_json(cast(JsonObject, dict(columns))) if written is None else written


def chained_row_digest(previous: str | None, table: str, key: str, changes: str) -> str:
    """The digest a seal covers for the chain's task row, over the chain's previous one and the
    row's `changes`: each link commits to the row's whole history without digesting the row."""
    text = ",".join(
        ("null" if previous is None else _ascii(previous), _ascii(table), _ascii(key), changes)
    )
    return digest_bytes(ROW_CHAIN_SCHEMA, text.encode("ascii"))
