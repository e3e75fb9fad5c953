"""The catalogue of the tables whose rows the ledger reads and writes the same way each, as data.

`shell/db/table_statements.py` renders it, when the statements are loaded, into the named
statements that would otherwise be copied by hand per table (they print, run and are checked
like any other):
- for every table, `all_TABLE` (its rows in key order, for `copy`, `verify` and the lists that
  show them all) and its whole-row insert (under the name the ledger's plans write it by, or
  `copy_insert_TABLE` where only a copy writes whole rows);
- for every sealed state table, `state_rows_TABLE` (its rows beside the last sealed row of
  each, for `verify`) and its arm of the fragment `{{state_row_exists}}` (whether a sealed row
  is still there);
- for every table an archive takes rows of, `archive_rows_TABLE` (a task's rows with the
  digest their last seal took), their delete, and their arm of the fragment
  `{{archived_key_taken}}` (whether a restore's row is taken).
Statements with a meaning of their own (compare-and-swap, claims, reads that decide) stay
hand-written in the `.sql` files.

Columns are in the schema's order (a test holds them to both engines' schemas); a table's key is
its primary key, which orders every read of all its rows.
"""

from __future__ import annotations

import attrs


def _words(text: str) -> tuple[str, ...]:
    return tuple(text.split())


@attrs.frozen
class Sealed:
    """How `verify` reads a state table that seals cover."""

    # The SQL file's fragment that says whether a row no seal proves may have been written
    # before the ledger sealed such rows; None: whether the log holds v1 seals says.
    history: str | None = None
    # A key of two columns is selected beside them as this one text (`TASK_ID JOB_ID`).
    key_name: str | None = None
    # The fragment that finds a sealed row by its key text, where the key's own expression
    # cannot use the primary key's index; the key as an expression otherwise.
    lookup: str | None = None
    # Read in key order, byte by byte (verify folds the task chains beside the task rows).
    in_key_order: bool = False
    # The rows an archive takes with a task, as a condition on the table's columns and the
    # task's `:task_id`; None: an archive leaves the table's rows in place.
    of_task: str | None = None
    # The plan's statement that deletes an archived task's rows (`core/statements.py`); None:
    # a delete of its own (the task row's is guarded by its revision).
    delete: str | None = None


@attrs.frozen
class Table:
    name: str
    key: tuple[str, ...] = attrs.field(converter=_words)
    columns: tuple[str, ...] = attrs.field(converter=_words)
    # The name its whole-row insert goes by where the ledger's own plans write rows with it.
    insert: str | None = None
    # The target of a copy already holds this table's one row (an empty tree's head): the
    # insert replaces it.
    insert_replaces: bool = False
    sealed: Sealed | None = None

    @property
    def insert_name(self) -> str:
        return self.insert or f"copy_insert_{self.name}"


# In the order a copy writes them, the one the target's foreign keys need.
TABLES: tuple[Table, ...] = (
    Table(
        "tasks",
        key="task_id",
        columns=(
            "task_id goal instructions success_criteria_json required_capabilities_json "
            "constraints_json metadata_json deadline priority max_attempts attempt status "
            "claimed_by lease_token_hash lease_expires_at result_json result_digest "
            "result_idempotency_key verification_json revision created_at updated_at "
            "verification_mode retry_base_seconds retry_max_seconds not_before seq "
            "awaiting_projection"
        ),
        insert="tasks_insert",
        sealed=Sealed(
            history="sealed_history_of_tasks",
            in_key_order=True,
            of_task="of_task_by_task_id",
        ),
    ),
    Table(
        "events",
        key="event_id",
        columns="event_id task_id agent_id event_type payload_json created_at actor",
        insert="insert_event",
    ),
    Table(
        "event_seals",
        key="event_id",
        columns=(
            "event_id chain chain_seq prev_seal seal sealed_at_adoption seal_version "
            "row_changes chained_row_digest"
        ),
        insert="insert_seal",
    ),
    Table(
        "event_seal_rows",
        key="event_id position",
        columns="event_id position row_table row_key row_digest",
        insert="insert_sealed_row",
    ),
    Table(
        "archived_events",
        key="event_id",
        columns="event_id archive_event_id chain seal",
    ),
    Table(
        "task_idempotency",
        key="idempotency_key",
        columns="idempotency_key operation subject request_sha256 response_json created_at",
        insert="task_idempotency_insert",
        sealed=Sealed(
            history="sealed_history_of_first_answers",
            of_task="of_task_by_subject",
            delete="delete_archived_idempotency",
        ),
    ),
    Table(
        "task_initial_execution_projections",
        key="idempotency_key",
        columns=(
            "idempotency_key task_id job_id request_sha256 execution_digest response_json "
            "created_at"
        ),
        insert="insert_initial_projection",
        sealed=Sealed(
            history="sealed_history_of_projections",
            of_task="of_task_by_task_id",
            delete="delete_archived_projections",
        ),
    ),
    Table(
        "task_source_capture_projection_recoveries",
        key="idempotency_key",
        columns=(
            "idempotency_key task_id job_id request_sha256 execution_digest response_json "
            "created_at"
        ),
        insert="insert_source_capture_recovery",
        sealed=Sealed(
            history="sealed_history_of_projections",
            of_task="of_task_by_task_id",
            delete="delete_archived_recoveries",
        ),
    ),
    Table(
        "governed_bindings",
        key="task_id job_id",
        columns="task_id job_id binding_json binding_sha256 created_at",
        insert="insert_binding",
        sealed=Sealed(
            history="sealed_history_of_bindings",
            key_name="binding_key",
            of_task="of_task_by_task_id",
            delete="delete_archived_bindings",
        ),
    ),
    Table(
        "runs",
        key="run_id",
        columns="run_id session_id prompt event_count created_at updated_at",
        insert="restore_run",
        sealed=Sealed(
            history="sealed_history_of_runs",
            of_task="of_task_by_session",
            delete="delete_archived_runs",
        ),
    ),
    Table(
        "run_events",
        key="run_id seq",
        columns="run_id seq kind payload_json created_at",
        insert="insert_run_event",
        sealed=Sealed(
            history="sealed_history_of_run_events",
            key_name="run_event_key",
            lookup="run_event_of_row_key",
            of_task="of_task_by_session_runs",
            delete="delete_archived_run_events",
        ),
    ),
    Table(
        "run_events_before_seals",
        key="run_id",
        columns="run_id last_seq",
    ),
    Table(
        "auxiliary_runs",
        key="aux_id",
        columns=(
            "aux_id session_id run_id parent_json kind mode state spec_json spec_digest "
            "evidence_digest owner revision created_at_ms updated_at_ms output_json "
            "output_digest error_code error"
        ),
        insert="restore_auxiliary_run",
        sealed=Sealed(
            of_task="of_task_by_session",
            delete="delete_archived_auxiliary_runs",
        ),
    ),
    Table(
        "api_tokens",
        key="name",
        columns=(
            "name roles_json token_sha256 status revision created_at updated_at capabilities_json"
        ),
        insert="api_token_insert",
        sealed=Sealed(),
    ),
    Table(
        "governed_repositories",
        key="name",
        columns=(
            "name path head_branch protected_json revision created_at updated_at "
            "secrets_baseline_json secrets_baseline_sha256 scan_max_bytes scan_max_seconds "
            "allow_gitlinks agent_scan_max_bytes agent_scan_max_seconds "
            "agent_scan_window_seconds"
        ),
        insert="governed_repository_insert",
        sealed=Sealed(),
    ),
    Table(
        "repository_settings_changes",
        key="idempotency_key",
        columns="idempotency_key repository request_sha256 revision response_json created_at",
        insert="repository_settings_change_insert",
        sealed=Sealed(),
    ),
    Table(
        "task_proposals",
        key="proposal_id",
        columns=(
            "proposal_id task_id attempt repository agent_id base_oid head_oid bundle_sha256 "
            "bundle_bytes refs_json changed_files_json facts_json created_at scan_bytes "
            "scan_seconds"
        ),
        insert="task_proposal_insert",
        sealed=Sealed(
            of_task="of_task_by_task_id",
            delete="delete_archived_proposals",
        ),
    ),
    Table(
        "agent_scan_charges",
        key="charge_id",
        columns=(
            "charge_id repository agent_id task_id attempt bundle_sha256 code scan_bytes "
            "scan_seconds created_at"
        ),
        insert="agent_scan_charge_insert",
        sealed=Sealed(
            of_task="of_task_by_task_id",
            delete="delete_archived_scan_charges",
        ),
    ),
    Table(
        "writer_leases",
        key="lease_id",
        columns="lease_id repository ref holder generation revision updated_at",
        insert="writer_lease_insert",
        sealed=Sealed(),
    ),
    Table(
        "governed_writes",
        key="idempotency_key",
        columns=(
            "idempotency_key task_id proposal_id repository ref old_oid new_oid generation "
            "state code observed_oid changed_files_json revision created_at updated_at"
        ),
        insert="governed_write_insert",
        sealed=Sealed(),
    ),
    Table(
        "commit_attestations",
        key="idempotency_key",
        columns=(
            "idempotency_key task_id repository commit_oid keyid note_json provenance_sha256 "
            "review_sha256 created_at"
        ),
        insert="commit_attestation_insert",
        sealed=Sealed(),
    ),
    Table(
        "task_spend",
        key="spend_key",
        columns=(
            "spend_key task_id attempt agent_id repository day input_tokens output_tokens "
            "cost_micros cost_currency over_budget created_at"
        ),
        insert="task_spend_insert",
        sealed=Sealed(
            of_task="of_task_by_task_id",
            delete="delete_archived_spend",
        ),
    ),
    Table(
        "merkle_leaves",
        key="leaf_index",
        columns="leaf_index event_id leaf_hash nodes",
        insert="insert_merkle_leaf",
    ),
    Table(
        "merkle_tree",
        key="only_row",
        columns="only_row size frontier revision",
        insert_replaces=True,
    ),
)
BY_NAME = {table.name: table for table in TABLES}
