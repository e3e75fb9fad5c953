"""Every statement a plan can name, with its exact parameters, so that a decision cannot name one
that does not exist or bind one it lacks."""

from __future__ import annotations

import enum
from collections.abc import Mapping
from typing import TypeAlias

import attrs

SqlParam: TypeAlias = str | int | float | bytes | None

EXPECTED_REVISION = "expected_revision"


class StatementKind(enum.Enum):
    INSERT = "insert"
    GUARDED_UPDATE = "guarded update"
    DELETE = "delete"
    GUARDED_DELETE = "guarded delete"


_INSERT = StatementKind.INSERT
_GUARDED = StatementKind.GUARDED_UPDATE
_DELETE = StatementKind.DELETE
_GUARDED_DELETE = StatementKind.GUARDED_DELETE


class Statement(enum.StrEnum):
    """A statement a plan can name; its value is the name of its text in each dialect."""

    kind: StatementKind
    guarded: bool
    parameters: frozenset[str]
    key: tuple[str, ...]
    revision_column: str | None

    def __new__(
        cls,
        name: str,
        kind: StatementKind,
        parameters: str,
        key: str = "",
        revision_column: str = "revision",
    ) -> Statement:
        member = str.__new__(cls, name)
        member._value_ = name
        member.kind = kind
        member.guarded = kind in (_GUARDED, _GUARDED_DELETE)
        member.parameters = frozenset(parameters.split())
        member.key = tuple(key.split())
        member.revision_column = revision_column if member.guarded else None
        if member.guarded and not {*member.key, EXPECTED_REVISION} <= member.parameters:
            raise ValueError(f"{name}: a guarded update takes its key and {EXPECTED_REVISION}")
        return member

    @property
    def guard(self) -> tuple[tuple[str, str], ...]:
        """(column, parameter) pairs of the WHERE clause of a guarded update, in order."""
        if self.revision_column is None:
            return ()
        return (*((name, name) for name in self.key), (self.revision_column, EXPECTED_REVISION))

    # -- tasks

    TASKS_INSERT = (
        "tasks_insert",
        _INSERT,
        """task_id goal instructions success_criteria_json required_capabilities_json
        constraints_json metadata_json deadline priority max_attempts attempt status claimed_by
        lease_token_hash lease_expires_at result_json result_digest result_idempotency_key
        verification_json revision created_at updated_at verification_mode retry_base_seconds
        retry_max_seconds not_before seq awaiting_projection""",
    )
    TASKS_CAS_UPDATE = (
        "tasks_cas_update",
        _GUARDED,
        """task_id expected_revision status attempt max_attempts not_before claimed_by
        lease_token_hash lease_expires_at result_json result_digest result_idempotency_key
        verification_json updated_at""",
        "task_id",
    )
    TASK_IDEMPOTENCY_INSERT = (
        "task_idempotency_insert",
        _INSERT,
        "idempotency_key operation subject request_sha256 response_json created_at",
    )

    # -- projections and bindings

    PROJECT_TASK_EXECUTION = (
        "project_task_execution",
        _GUARDED,
        "task_id expected_revision metadata_json required_capabilities_json updated_at",
        "task_id",
    )
    INSERT_INITIAL_PROJECTION = (
        "insert_initial_projection",
        _INSERT,
        "idempotency_key task_id job_id request_sha256 execution_digest response_json created_at",
    )
    INSERT_SOURCE_CAPTURE_RECOVERY = (
        "insert_source_capture_recovery",
        _INSERT,
        "idempotency_key task_id job_id request_sha256 execution_digest response_json created_at",
    )
    INSERT_BINDING = (
        "insert_binding",
        _INSERT,
        "task_id job_id binding_json binding_sha256 created_at",
    )

    # -- runs

    INSERT_RUN = ("insert_run", _INSERT, "run_id session_id prompt created_at")
    INSERT_ATTEMPT_RUN = ("insert_attempt_run", _INSERT, "run_id session_id prompt created_at")
    BUMP_RUN_EVENT_COUNT = (
        "bump_run_event_count",
        _GUARDED,
        "run_id expected_revision updated_at",
        "run_id",
        "event_count",
    )
    INSERT_RUN_EVENT = ("insert_run_event", _INSERT, "run_id seq kind payload_json created_at")

    # -- auxiliary runs

    INSERT_AUXILIARY_RUN = (
        "insert_auxiliary_run",
        _INSERT,
        """aux_id session_id run_id parent_json kind mode state spec_json spec_digest
        evidence_digest owner created_at_ms""",
    )
    TRANSITION_AUXILIARY_RUN = (
        "transition_auxiliary_run",
        _GUARDED,
        """aux_id expected_revision state updated_at_ms output_json output_digest error_code
        error""",
        "aux_id",
    )

    # -- API tokens (only the token's sha256 is ever stored)

    API_TOKEN_INSERT = (
        "api_token_insert",
        _INSERT,
        "name roles_json token_sha256 status revision created_at updated_at capabilities_json",
    )
    API_TOKEN_CAS_UPDATE = (
        "api_token_cas_update",
        _GUARDED,
        "name expected_revision roles_json capabilities_json token_sha256 status updated_at",
        "name",
    )

    # -- governed writes to git

    GOVERNED_REPOSITORY_INSERT = (
        "governed_repository_insert",
        _INSERT,
        """name path head_branch protected_json revision created_at updated_at
        secrets_baseline_json secrets_baseline_sha256 scan_max_bytes scan_max_seconds
        allow_gitlinks agent_scan_max_bytes agent_scan_max_seconds agent_scan_window_seconds
        pull_request_json remote_url""",
    )
    TASK_PROPOSAL_INSERT = (
        "task_proposal_insert",
        _INSERT,
        """proposal_id task_id attempt repository agent_id base_oid head_oid bundle_sha256
        bundle_bytes refs_json changed_files_json facts_json created_at scan_bytes
        scan_seconds""",
    )

    # -- a repository's settings

    GOVERNED_REPOSITORY_SETTINGS_CAS_UPDATE = (
        "governed_repository_settings_cas_update",
        _GUARDED,
        """name expected_revision secrets_baseline_json secrets_baseline_sha256 scan_max_bytes
        scan_max_seconds allow_gitlinks agent_scan_max_bytes agent_scan_max_seconds
        agent_scan_window_seconds pull_request_json updated_at""",
        "name",
    )
    REPOSITORY_SETTINGS_CHANGE_INSERT = (
        "repository_settings_change_insert",
        _INSERT,
        "idempotency_key repository request_sha256 revision response_json created_at",
    )
    AGENT_SCAN_CHARGE_INSERT = (
        "agent_scan_charge_insert",
        _INSERT,
        """charge_id repository agent_id task_id attempt bundle_sha256 code scan_bytes
        scan_seconds created_at""",
    )
    WRITER_LEASE_INSERT = (
        "writer_lease_insert",
        _INSERT,
        "lease_id repository ref holder generation revision updated_at",
    )
    WRITER_LEASE_CAS_UPDATE = (
        "writer_lease_cas_update",
        _GUARDED,
        "lease_id expected_revision holder generation updated_at",
        "lease_id",
    )
    GOVERNED_WRITE_INSERT = (
        "governed_write_insert",
        _INSERT,
        """idempotency_key task_id proposal_id repository ref old_oid new_oid generation state
        code observed_oid changed_files_json revision created_at updated_at""",
    )
    GOVERNED_WRITE_CAS_UPDATE = (
        "governed_write_cas_update",
        _GUARDED,
        "idempotency_key expected_revision state code observed_oid updated_at",
        "idempotency_key",
    )

    COMMIT_ATTESTATION_INSERT = (
        "commit_attestation_insert",
        _INSERT,
        """idempotency_key task_id repository commit_oid keyid note_json provenance_sha256
        review_sha256 created_at""",
    )

    TASK_SPEND_INSERT = (
        "task_spend_insert",
        _INSERT,
        """spend_key task_id attempt agent_id repository day input_tokens output_tokens
        cost_micros cost_currency over_budget created_at""",
    )

    # -- the sealed event log

    INSERT_EVENT = (
        "insert_event",
        _INSERT,
        "event_id task_id agent_id event_type payload_json created_at actor",
    )
    INSERT_SEAL = (
        "insert_seal",
        _INSERT,
        "event_id chain chain_seq prev_seal seal sealed_at_adoption seal_version row_changes "
        "chained_row_digest",
    )
    INSERT_SEALED_ROW = (
        "insert_sealed_row",
        _INSERT,
        "event_id position row_table row_key row_digest",
    )

    # -- the Merkle log beside the chains (core/log/merkle.py)

    MERKLE_LEAF_INSERT = ("insert_merkle_leaf", _INSERT, "leaf_index event_id leaf_hash nodes")
    MERKLE_TREE_CAS_UPDATE = (
        "merkle_tree_cas_update",
        _GUARDED,
        "only_row expected_revision size frontier",
        "only_row",
    )

    # -- archiving finished tasks: each statement takes the task whose chain is archived

    LIST_ARCHIVED_EVENTS = ("list_archived_events", _INSERT, "task_id archive_event_id")
    DELETE_ARCHIVED_SEALED_ROWS = ("delete_archived_sealed_rows", _DELETE, "task_id")
    DELETE_ARCHIVED_SEALS = ("delete_archived_seals", _DELETE, "task_id")
    DELETE_ARCHIVED_EVENTS = ("delete_archived_events", _DELETE, "task_id")
    DELETE_ARCHIVED_IDEMPOTENCY = ("delete_archived_idempotency", _DELETE, "task_id")
    DELETE_ARCHIVED_PROJECTIONS = ("delete_archived_projections", _DELETE, "task_id")
    DELETE_ARCHIVED_RECOVERIES = ("delete_archived_recoveries", _DELETE, "task_id")
    DELETE_ARCHIVED_BINDINGS = ("delete_archived_bindings", _DELETE, "task_id")
    DELETE_ARCHIVED_RUN_EVENTS = ("delete_archived_run_events", _DELETE, "task_id")
    DELETE_ARCHIVED_AUXILIARY_RUNS = ("delete_archived_auxiliary_runs", _DELETE, "task_id")
    DELETE_ARCHIVED_RUNS = ("delete_archived_runs", _DELETE, "task_id")
    DELETE_ARCHIVED_PROPOSALS = ("delete_archived_proposals", _DELETE, "task_id")
    DELETE_ARCHIVED_SCAN_CHARGES = ("delete_archived_scan_charges", _DELETE, "task_id")
    DELETE_ARCHIVED_SPEND = ("delete_archived_spend", _DELETE, "task_id")
    DELETE_ARCHIVED_TASK = (
        "delete_archived_task",
        _GUARDED_DELETE,
        "task_id expected_revision",
        "task_id",
    )

    # -- restoring an archive, beside the statements that first wrote the rows

    DELETE_RESTORED_LISTINGS = ("delete_restored_listings", _DELETE, "task_id")
    # An evidence run as archived, and an auxiliary run as its last transition left it.
    RESTORE_RUN = (
        "restore_run",
        _INSERT,
        "run_id session_id prompt event_count created_at updated_at",
    )
    RESTORE_AUXILIARY_RUN = (
        "restore_auxiliary_run",
        _INSERT,
        """aux_id session_id run_id parent_json kind mode state spec_json spec_digest
        evidence_digest owner revision created_at_ms updated_at_ms output_json output_digest
        error_code error""",
    )


def guarded_update(statement: Statement, row: object, expected_revision: int) -> SqlWrite:
    """The compare-and-swap writing `row`: each parameter is the row's field of its name."""
    values = {name: getattr(row, name) for name in statement.parameters - {EXPECTED_REVISION}}
    return SqlWrite(statement, {**values, EXPECTED_REVISION: expected_revision})


@attrs.frozen
class SqlWrite:
    """One statement of a plan and its parameters, exactly those its declaration names."""

    statement: Statement
    params: Mapping[str, SqlParam]

    def __attrs_post_init__(self) -> None:
        # A plan that names something else, or binds other parameters, is a defect of its decision:
        # refused where it is built, never half-applied.
        if self.params.keys() != self.statement.parameters:
            raise TypeError(
                f"{self.statement} takes {sorted(self.statement.parameters)}, "
                f"not {sorted(self.params)}"
            )

    @property
    def guarded(self) -> bool:
        return self.statement.guarded
