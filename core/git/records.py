"""The rows of governed writes, each a NamedTuple built by column name and a state row sealed by its
event, so that `verify` holds them against the log."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, NamedTuple

import attrs
from aios_ledger.core.errors import LedgerError
from aios_ledger.core.git.policy import require_agreement
from aios_ledger.core.git.secrets import DEFAULT_SCAN_BYTES, DEFAULT_SCAN_SECONDS
from aios_ledger.core.git.settings import (
    DEFAULT_AGENT_SCAN_BYTES,
    DEFAULT_AGENT_SCAN_SECONDS,
    DEFAULT_AGENT_SCAN_WINDOW_SECONDS,
    DEFAULT_SETTINGS,
    RepositorySettings,
)
from aios_ledger.core.jsonvalue import JsonObject, JsonValue, loads_document, loads_object
from aios_ledger.core.log.rows import AGENT_SCAN_CHARGES, TASK_PROPOSALS, RowImage, row_image
from aios_ledger.core.records import record_from_row

GOVERNED_REPOSITORIES = "governed_repositories"
REPOSITORY_SETTINGS_CHANGES = "repository_settings_changes"
WRITER_LEASES = "writer_leases"
GOVERNED_WRITES = "governed_writes"


def _json_column(table: str, key: str, column: str, raw: object) -> JsonValue:
    if not isinstance(raw, str):
        raise LedgerError("GIT_ROW_CORRUPT", f"{table} {key}: {column} is not JSON text")
    try:
        return loads_document(raw, what=column)
    except LedgerError as refused:
        raise LedgerError("GIT_ROW_CORRUPT", f"{table} {key}: {refused}") from None


def _texts(table: str, key: str, column: str, raw: object) -> tuple[str, ...]:
    value = _json_column(table, key, column, raw)
    if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
        raise LedgerError("GIT_ROW_CORRUPT", f"{table} {key}: {column} is not a list of texts")
    return tuple(str(item) for item in value)


class RepositoryRow(NamedTuple):
    """One row of `governed_repositories`, with its settings."""

    name: str
    path: str
    head_branch: str | None
    protected_json: str
    revision: int
    created_at: str
    updated_at: str
    secrets_baseline_json: str | None = None
    secrets_baseline_sha256: str | None = None
    scan_max_bytes: int = DEFAULT_SCAN_BYTES
    scan_max_seconds: float = DEFAULT_SCAN_SECONDS
    allow_gitlinks: int = 0
    agent_scan_max_bytes: int = DEFAULT_AGENT_SCAN_BYTES
    agent_scan_max_seconds: float = DEFAULT_AGENT_SCAN_SECONDS
    agent_scan_window_seconds: int = DEFAULT_AGENT_SCAN_WINDOW_SECONDS
    pull_request_json: str | None = None
    # Where a repository on a git server is (no credential in it); None: governed in place.
    remote_url: str | None = None

    @classmethod
    def from_row(cls, row: Mapping[str, Any]) -> RepositoryRow:
        return record_from_row(cls, row)

    def image(self) -> RowImage:
        return row_image(GOVERNED_REPOSITORIES, self.name, self._asdict())

    def protected(self) -> tuple[str, ...]:
        return _texts(GOVERNED_REPOSITORIES, self.name, "protected_json", self.protected_json)

    def settings(self) -> RepositorySettings:
        """The settings its columns hold, each as its setting's type (`allow_gitlinks` a bool)."""
        row = self._asdict()
        return RepositorySettings(
            **{
                name: row[name] if default is None else type(default)(row[name])
                for name, default in attrs.asdict(DEFAULT_SETTINGS).items()
            }
        )

    def with_settings(self, settings: RepositorySettings) -> RepositoryRow:
        return self._replace(**settings.columns())


class RepositorySettingsChangeRow(NamedTuple):
    """One row of `repository_settings_changes`: a change and its key's answer."""

    idempotency_key: str
    repository: str
    request_sha256: str
    revision: int
    response_json: str
    created_at: str

    def image(self) -> RowImage:
        return row_image(REPOSITORY_SETTINGS_CHANGES, self.idempotency_key, self._asdict())

    def response(self) -> JsonObject:
        try:
            return loads_object(self.response_json, what="response_json")
        except LedgerError as refused:
            raise LedgerError(
                "GIT_ROW_CORRUPT",
                f"{REPOSITORY_SETTINGS_CHANGES} {self.idempotency_key}: {refused}",
            ) from None


class ProposalRow(NamedTuple):
    """One row of `task_proposals`: an attempt's bundle and what the ledger found in it."""

    proposal_id: str
    task_id: str
    attempt: int
    repository: str
    agent_id: str | None
    base_oid: str
    head_oid: str
    bundle_sha256: str
    bundle_bytes: int
    refs_json: str
    changed_files_json: str
    facts_json: str
    created_at: str
    # What its scan spent (0.x migration 0013; None in a proposal recorded before it).
    scan_bytes: int | None = None
    scan_seconds: float | None = None

    @classmethod
    def from_row(cls, row: Mapping[str, Any]) -> ProposalRow:
        return record_from_row(cls, row)

    def image(self) -> RowImage:
        return row_image(TASK_PROPOSALS, self.proposal_id, self._asdict())

    def changed_files(self) -> tuple[str, ...]:
        return _texts(
            TASK_PROPOSALS, self.proposal_id, "changed_files_json", self.changed_files_json
        )

    def require_stated_work(self, result: Mapping[str, JsonValue]) -> None:
        require_agreement(result, None, self.changed_files(), self.head_oid)

    def facts(self) -> dict[str, JsonValue]:
        value = _json_column(TASK_PROPOSALS, self.proposal_id, "facts_json", self.facts_json)
        if not isinstance(value, dict):
            raise LedgerError("GIT_ROW_CORRUPT", f"proposal {self.proposal_id}: facts")
        return value


class ScanChargeRow(NamedTuple):
    """One row of `agent_scan_charges`; the `n`-th of an attempt is `TASK#ATTEMPT#n`."""

    charge_id: str
    repository: str
    agent_id: str
    task_id: str
    attempt: int
    bundle_sha256: str
    code: str
    scan_bytes: int
    scan_seconds: float
    created_at: str

    def image(self) -> RowImage:
        return row_image(AGENT_SCAN_CHARGES, self.charge_id, self._asdict())


class WriterLeaseRow(NamedTuple):
    """One row of `writer_leases`: the write in flight and the generation fencing lower ones."""

    lease_id: str
    repository: str
    ref: str
    holder: str | None
    generation: int
    revision: int
    updated_at: str

    def image(self) -> RowImage:
        return row_image(WRITER_LEASES, self.lease_id, self._asdict())


class GovernedWriteRow(NamedTuple):
    """One row of `governed_writes`: an INTENDED write and its outcome as the ref was read."""

    idempotency_key: str
    task_id: str
    proposal_id: str
    repository: str
    ref: str
    old_oid: str
    new_oid: str
    generation: int
    state: str
    code: str | None
    observed_oid: str | None
    changed_files_json: str
    revision: int
    created_at: str
    updated_at: str

    @classmethod
    def from_row(cls, row: Mapping[str, Any]) -> GovernedWriteRow:
        return record_from_row(cls, row)

    def image(self) -> RowImage:
        return row_image(GOVERNED_WRITES, self.idempotency_key, self._asdict())

    def changed_files(self) -> tuple[str, ...]:
        return _texts(
            GOVERNED_WRITES, self.idempotency_key, "changed_files_json", self.changed_files_json
        )


def lease_id_of(repository: str, ref: str) -> str:
    """The key of a writer lease: a repository name and a full ref name never hold a space."""
    return f"{repository} {ref}"
