"""Requests of governed writes, structured strictly at the edge. `ProposalRecord` and `WriteOutcome`
are what the shell read from git, never what an agent says."""

from __future__ import annotations

import re
from typing import Annotated, TypeVar

import attrs
from aios_ledger.core.envelopes import REPOSITORY, ObjectId
from aios_ledger.core.errors import LedgerError
from aios_ledger.core.git.settings import SettingsChange, SpentBytes, SpentSeconds
from aios_ledger.core.jsonvalue import JsonObject
from aios_ledger.core.kinds import Between, Identifier, OneOf, Sha256Hex, Text
from aios_ledger.core.structuring import NOT_PUBLIC, Structured, structure, unstructure
from aios_ledger.core.tasks.requests import LeaseToken

MAX_PATH = 1000
MAX_SECRETS = 1000
# A protected pattern: a branch glob or a full ref glob, without whitespace.
PATTERN = re.compile(r"^[^\s\x00-\x1f\x7f]{1,200}$")

PathText = Annotated[str, Text(max_length=MAX_PATH)]
RepositoryName = Annotated[str, Text(max_length=300, pattern=REPOSITORY)]
RefName = Annotated[str, Text(max_length=300, pattern=re.compile(r"^(HEAD|refs/heads/\S+)$"))]


class _Request(Structured):
    """A request read strictly by `from_mapping`; its canonical form is every public field."""

    __slots__ = ()

    def public(self) -> JsonObject:
        return unstructure(self)


# The requests that carry a `SettingsChange`.
R = TypeVar("R", "RegisterRepositoryRequest", "RepositorySettingsRequest")


def _with_settings(raw: object, record: type[R], *, what: str) -> R:
    """`raw` as `record`, its `settings` read apart, so that a bad one is
    `REPOSITORY_SETTING_INVALID`."""
    if not isinstance(raw, dict) or raw.get("settings") is None:
        return structure(raw, record, what=what)
    request = structure({**raw, "settings": {}}, record, what=what)
    return attrs.evolve(request, settings=SettingsChange.from_mapping(raw["settings"]))


@attrs.frozen
class RegisterRepositoryRequest:
    """`repo add`: a bare repository's resolved path (a remote's: its mirror's, and the remote's
    URL), its protected patterns and settings."""

    name: RepositoryName
    path: Annotated[str, Text(max_length=4096)]
    protected: list[Annotated[str, Text(max_length=200, pattern=PATTERN)]] | None = None
    default_protection: bool = True
    settings: SettingsChange | None = None
    remote_url: Annotated[str, Text(max_length=4096)] | None = None

    @classmethod
    def from_mapping(cls, raw: object) -> RegisterRepositoryRequest:
        return _with_settings(raw, cls, what="repository")

    def public(self) -> JsonObject:
        settings = None if self.settings is None else self.settings.public()
        return {**unstructure(self), "settings": settings}


@attrs.frozen
class RepositorySettingsRequest:
    """`repo settings`: change a repository's settings by key, optionally at a revision."""

    name: RepositoryName
    idempotency_key: Identifier
    settings: SettingsChange
    expected_revision: Annotated[int, Between(1, 2**62)] | None = None

    @classmethod
    def from_mapping(cls, raw: object) -> RepositorySettingsRequest:
        request = _with_settings(raw, cls, what="repository settings")
        if request.settings.is_empty():
            raise LedgerError(
                "REPOSITORY_SETTING_INVALID",
                "repository settings: name at least one setting to change",
            )
        return request

    def public(self) -> JsonObject:
        return {**unstructure(self), "settings": self.settings.public()}


@attrs.frozen
class BundleRef:
    name: RefName
    oid: ObjectId


@attrs.frozen
class SecretFinding:
    """One finding of the secret scanner: the file, the kind of secret and its line."""

    path: PathText
    kind: Annotated[str, Text(max_length=200)]
    line: Annotated[int, Between(0, 2**31 - 1)]


@attrs.frozen
class ProposalRecord(_Request):
    """A proposal as the shell found it in quarantine, recorded under the task's lease."""

    WHAT = "proposal"

    task_id: Identifier
    bundle_sha256: Sha256Hex
    bundle_bytes: Annotated[int, Between(1, 2**40)]
    base_oid: ObjectId
    head_oid: ObjectId
    refs: list[BundleRef]
    changed_files: list[PathText]
    descends_from_base: bool
    secrets: list[SecretFinding]
    lease_token: LeaseToken = attrs.field(repr=False, metadata=NOT_PUBLIC)
    secrets_baseline_sha256: Sha256Hex | None = None
    scan_bytes: SpentBytes = 0
    scan_seconds: SpentSeconds = 0.0


@attrs.frozen
class ScanCharge(_Request):
    """A scan refused over its budget, and what it had spent, as the shell measured it."""

    WHAT = "scan charge"

    task_id: Identifier
    attempt: Annotated[int, Between(1, 2**31 - 1)]
    agent_id: Identifier
    bundle_sha256: Sha256Hex
    code: Annotated[str, OneOf(("SCAN_BUDGET_EXCEEDED", "AGENT_SCAN_BUDGET_EXCEEDED"))]
    scan_bytes: SpentBytes
    scan_seconds: SpentSeconds


@attrs.frozen
class WriteRequest(_Request):
    """`aios-ledger write TASK_ID --json FILE`: the key makes the write idempotent."""

    WHAT = "governed write"

    task_id: Identifier
    idempotency_key: Identifier


@attrs.frozen
class WriteOutcome(_Request):
    """An intended write's ref as read, whether git's swap moved it, and whether after a crash."""

    WHAT = "write outcome"

    idempotency_key: Identifier
    observed_oid: ObjectId | None
    swapped: bool
    recovered: bool
    # Why a remote refused to move the ref when it still holds the old id (an error code).
    refused_code: Annotated[str, Text(max_length=100)] | None = None
