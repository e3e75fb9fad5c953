"""The current state rows as the verifier holds them against their seals.

`core.log.rows` says which tables carry state and how a row is digested; here each state table
is tied to its row record, so that a row read back from the database is digested over the same
columns, by name, that its decision digested when it wrote it.
"""

from __future__ import annotations

from collections.abc import Mapping
from itertools import combinations
from typing import Any

from aios_ledger.core.api.tokens import ApiTokenRow
from aios_ledger.core.attest.records import CommitAttestationRow
from aios_ledger.core.auxiliary.records import AuxiliaryRunRow
from aios_ledger.core.git.records import (
    GovernedWriteRow,
    ProposalRow,
    RepositoryRow,
    RepositorySettingsChangeRow,
    ScanChargeRow,
    WriterLeaseRow,
)
from aios_ledger.core.log.rows import (
    AGENT_SCAN_CHARGES,
    API_TOKENS,
    AUXILIARY_RUNS,
    COMMIT_ATTESTATIONS,
    FIRST_ANSWERS,
    GOVERNED_BINDINGS,
    GOVERNED_REPOSITORIES,
    GOVERNED_WRITES,
    INITIAL_PROJECTIONS,
    LATER_COLUMNS,
    LATER_DEFAULT_COLUMNS,
    LATER_NULL_COLUMNS,
    REPOSITORY_SETTINGS_CHANGES,
    RUN_EVENTS,
    RUNS,
    SOURCE_CAPTURE_RECOVERIES,
    STATE_TABLES,
    TASK_PROPOSALS,
    TASK_SPEND,
    TASKS,
    WRITER_LEASES,
    row_digest,
    with_later_defaults,
)
from aios_ledger.core.projection.records import BindingRow, ProjectionLedgerRow
from aios_ledger.core.records import record_columns
from aios_ledger.core.runs.records import RunEventRow, RunIdentity
from aios_ledger.core.tasks.budgets import SpendRow
from aios_ledger.core.tasks.records import FirstAnswerRow, TaskRow

# Each state table's row record and the column its rows are keyed by.
STATE_RECORDS: Mapping[str, tuple[type, str]] = {
    TASKS: (TaskRow, "task_id"),
    AUXILIARY_RUNS: (AuxiliaryRunRow, "aux_id"),
    INITIAL_PROJECTIONS: (ProjectionLedgerRow, "idempotency_key"),
    SOURCE_CAPTURE_RECOVERIES: (ProjectionLedgerRow, "idempotency_key"),
    API_TOKENS: (ApiTokenRow, "name"),
    GOVERNED_REPOSITORIES: (RepositoryRow, "name"),
    TASK_PROPOSALS: (ProposalRow, "proposal_id"),
    WRITER_LEASES: (WriterLeaseRow, "lease_id"),
    GOVERNED_WRITES: (GovernedWriteRow, "idempotency_key"),
    FIRST_ANSWERS: (FirstAnswerRow, "idempotency_key"),
    # Keyed by two columns: the statement selects their `binding_key` beside them.
    GOVERNED_BINDINGS: (BindingRow, "binding_key"),
    RUNS: (RunIdentity, "run_id"),
    REPOSITORY_SETTINGS_CHANGES: (RepositorySettingsChangeRow, "idempotency_key"),
    # Keyed by two columns: the statement selects their `run_event_key` beside them.
    RUN_EVENTS: (RunEventRow, "run_event_key"),
    AGENT_SCAN_CHARGES: (ScanChargeRow, "charge_id"),
    COMMIT_ATTESTATIONS: (CommitAttestationRow, "idempotency_key"),
    TASK_SPEND: (SpendRow, "spend_key"),
}
assert tuple(STATE_RECORDS) == STATE_TABLES


def stored_row_state(
    table: str, row: Mapping[str, Any], sealed_digest: str | None = None
) -> tuple[str, str | None]:
    """The key and digest of a stored row of `table` (None: it holds what no plan writes), to
    hold against `sealed_digest`, the digest its last seal took: over every column, or, for a
    seal taken before the `LATER_COLUMNS` existed, over the others (the digest that matches
    it, when one does). A `LATER_NULL_COLUMNS` column is left out only while it is NULL, as
    no plan since it existed writes it: a value set there by hand is digested and reported;
    a `LATER_DEFAULT_COLUMNS` column of the table, only while it holds its default."""
    record, key_column = STATE_RECORDS[table]
    key = str(row[key_column])
    row = with_later_defaults(table, row)
    columns = {name: row[name] for name in record_columns(record)}
    digest = row_digest(table, key, columns)
    later = (LATER_COLUMNS & columns.keys()) | {
        name for name in LATER_NULL_COLUMNS & columns.keys() if columns[name] is None
    }
    defaults = LATER_DEFAULT_COLUMNS.get(table)
    if defaults:
        later |= {
            name
            for name, default in defaults.items()
            if name in columns and _same(columns[name], default)
        }
    if digest == sealed_digest or sealed_digest is None or not later:
        return key, digest
    # The seal was taken before some of them existed, not necessarily all (a task sealed after
    # `seq` but before `awaiting_projection`): each set of them left out, fewest first.
    for size in range(1, len(later) + 1):
        for omitted in combinations(sorted(later), size):
            earlier = row_digest(table, key, columns, without=frozenset(omitted))
            if earlier == sealed_digest:
                return key, earlier
    return key, digest


def _same(value: object, default: object) -> bool:
    """A stored value is its column's default: equal, and of the same kind (a REAL 20.0 is the
    default 20.0; text "0" is not the integer 0)."""
    if default is None or value is None:
        return value is default
    if isinstance(default, float):
        return type(value) in (int, float) and value == default
    return type(value) is type(default) and value == default


def state_row_columns(table: str, row: Mapping[str, Any]) -> dict[str, Any]:
    """A stored row of `table` as an archive keeps it: the columns its record digests, by
    name, and its key column (a two-column key's joined text) when that is not one of them."""
    record, key_column = STATE_RECORDS[table]
    columns = {name: row[name] for name in record_columns(record)}
    columns.setdefault(key_column, row[key_column])
    return columns


def held_row_problem(table: str, key: str, digest: str | None, columns: object) -> str | None:
    """What is wrong with a row an archive's state line carries (None: nothing): it must hold
    exactly its table's columns, its key column must be its key, and digested as `verify`
    digests a stored row it must give the line's digest, which is held against its seal."""
    if table not in STATE_RECORDS:
        return f"{table!r} is no state table"
    record, key_column = STATE_RECORDS[table]
    if isinstance(columns, Mapping):
        columns = with_later_defaults(table, columns)
    expected = set(record_columns(record)) | {key_column}
    if not isinstance(columns, Mapping) or set(columns) != expected:
        return "the row does not hold exactly its table's columns"
    if not isinstance(columns[key_column], str) or columns[key_column] != key:
        return "the row's key column is not the line's key"
    if stored_row_state(table, columns, digest) != (key, digest):
        return "the row's columns do not give the digest its line holds: the row was changed"
    return None
