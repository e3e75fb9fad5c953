"""One record per table row: every table the ledger reads has exactly one row record, whose
fields are the table's columns in order (the shell builds records from selected columns by
position, so a record that drifts from its table would read the wrong column)."""

from __future__ import annotations

import sqlite3

import pytest
from aios_ledger.core import EventRow, IdempotencyRow, SealRow, TaskRow
from aios_ledger.core.api.tokens import ApiTokenRow
from aios_ledger.core.attest.records import CommitAttestationRow
from aios_ledger.core.auxiliary import AuxiliaryRunRow
from aios_ledger.core.git import (
    GovernedWriteRow,
    ProposalRow,
    RepositoryRow,
    RepositorySettingsChangeRow,
    ScanChargeRow,
    WriterLeaseRow,
)
from aios_ledger.core.log import SealedRow
from aios_ledger.core.log.archived import ArchivedEventRow
from aios_ledger.core.projection import BindingRow
from aios_ledger.core.proofs.checkpoints import CheckpointRow
from aios_ledger.core.records import record_columns
from aios_ledger.core.runs import RunEventRow, RunRow
from aios_ledger.core.tasks.budgets import SpendRow

ROW_RECORDS: dict[str, type] = {
    "tasks": TaskRow,
    "events": EventRow,
    "event_seals": SealRow,
    "event_seal_rows": SealedRow,
    "runs": RunRow,
    "run_events": RunEventRow,
    "auxiliary_runs": AuxiliaryRunRow,
    "governed_bindings": BindingRow,
    "archived_events": ArchivedEventRow,
    "api_tokens": ApiTokenRow,
    "governed_repositories": RepositoryRow,
    "repository_settings_changes": RepositorySettingsChangeRow,
    "agent_scan_charges": ScanChargeRow,
    "task_proposals": ProposalRow,
    "writer_leases": WriterLeaseRow,
    "governed_writes": GovernedWriteRow,
    "checkpoints": CheckpointRow,
    "commit_attestations": CommitAttestationRow,
    "task_spend": SpendRow,
}
# The idempotency ledgers are read only for their recorded answer: the columns they share.
RECORDED_ANSWER_TABLES = (
    "task_idempotency",
    "task_initial_execution_projections",
    "task_source_capture_projection_recoveries",
)
# The migrator's own bookkeeping: read as a list of versions, never into a record.
# Tables no decision reads into a record: the migrator's, and 0.x migration 0014's list of each
# run's last event at the upgrade (written once by it, append-only, read by `verify` alone).
# A checkpoint's cosignatures are read back only as the signature lines they store; the Merkle
# log's leaves (each with the subtrees it completes) only as the hashes a proof names, its head
# row (MerkleTreeRow) without the key column that keeps it one row.
UNRECORDED_TABLES = {
    "schema_migrations",
    "run_events_before_seals",
    "checkpoint_cosignatures",
    "merkle_leaves",
    "merkle_tree",
}


def columns(schema: sqlite3.Connection, table: str) -> tuple[str, ...]:
    return tuple(row[1] for row in schema.execute("SELECT * FROM pragma_table_info(?)", (table,)))


def test_every_table_has_its_row_record(sqlite_schema: sqlite3.Connection) -> None:
    tables = {
        row[0]
        for row in sqlite_schema.execute(
            "SELECT name FROM sqlite_schema WHERE type = 'table' AND name NOT LIKE 'sqlite_%'"
        )
    }
    assert tables == set(ROW_RECORDS) | set(RECORDED_ANSWER_TABLES) | UNRECORDED_TABLES
    assert len(set(ROW_RECORDS.values())) == len(ROW_RECORDS)


@pytest.mark.parametrize("table", sorted(ROW_RECORDS))
def test_a_row_record_holds_its_table_columns_in_order(
    sqlite_schema: sqlite3.Connection, table: str
) -> None:
    assert record_columns(ROW_RECORDS[table]) == columns(sqlite_schema, table)


@pytest.mark.parametrize("table", RECORDED_ANSWER_TABLES)
def test_a_recorded_answer_is_columns_every_idempotency_ledger_holds(
    sqlite_schema: sqlite3.Connection, table: str
) -> None:
    assert set(record_columns(IdempotencyRow)) <= set(columns(sqlite_schema, table))
