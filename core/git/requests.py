"""Requests of governed writes, structured strictly at the edge (`core.structuring`).

`RegisterRepositoryRequest` and `WriteRequest` come from an owner; `ProposalRecord` is what the
shell read from git about a bundle (never what an agent says about it); `WriteOutcome` is the
ref as the shell read it after git's compare-and-swap, or after a crash."""

from __future__ import annotations

import re
from typing import Annotated

import attrs
from aios_ledger.core.jsonvalue import JsonObject
from aios_ledger.core.kinds import Between, Identifier, Sha256Hex, Text
from aios_ledger.core.projection.envelopes import REPOSITORY, ObjectId
from aios_ledger.core.structuring import NOT_PUBLIC, structure, unstructure
from aios_ledger.core.tasks.requests import LeaseToken

MAX_PROPOSAL_FILES = 10000
MAX_PATH = 1000
MAX_SECRETS = 1000
MAX_REFS = 256
# A protected pattern: a branch glob or a full ref glob, without whitespace.
PATTERN = re.compile(r"^[^\s\x00-\x1f\x7f]{1,200}$")

PathText = Annotated[str, Text(max_length=MAX_PATH)]
RefName = Annotated[str, Text(max_length=300, pattern=re.compile(r"^(HEAD|refs/heads/\S+)$"))]


@attrs.frozen
class RegisterRepositoryRequest:
    """`repo add NAME PATH [--protected PATTERN ...] [--no-default-protection]`: `path` is the
    bare repository's absolute path as the shell resolved it; `protected` adds patterns to the
    defaults (HEAD's branch, main, master, release/*), or, with `default_protection` false, to
    HEAD's branch alone."""

    name: Annotated[str, Text(max_length=300, pattern=REPOSITORY)]
    path: Annotated[str, Text(max_length=4096)]
    protected: list[Annotated[str, Text(max_length=200, pattern=PATTERN)]] | None = None
    default_protection: bool = True

    @classmethod
    def from_mapping(cls, raw: object) -> RegisterRepositoryRequest:
        return structure(raw, cls, what="repository")

    def public(self) -> JsonObject:
        return unstructure(self)


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
class ProposalRecord:
    """A proposal as the shell found it in its quarantine: the bundle's digest and size, its
    refs and head, the files its commits change against the base, whether the head descends
    from the base, what the scanner found and the sha256 of the repository's secrets baseline
    it applied (None: none). Recorded under the task's current lease."""

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

    @classmethod
    def from_mapping(cls, raw: object) -> ProposalRecord:
        return structure(raw, cls, what="proposal")

    def public(self) -> JsonObject:
        return unstructure(self)


@attrs.frozen
class WriteRequest:
    """`aios-ledger write TASK_ID --json FILE`: the key makes the write idempotent."""

    task_id: Identifier
    idempotency_key: Identifier

    @classmethod
    def from_mapping(cls, raw: object) -> WriteRequest:
        return structure(raw, cls, what="governed write")

    def public(self) -> JsonObject:
        return unstructure(self)


@attrs.frozen
class WriteOutcome:
    """What became of an intended write, from the ref as read: `observed_oid` is its value
    (None: the ref does not exist); `swapped` whether git's own compare-and-swap said it moved
    it; `recovered` whether this is read after a crash rather than right after the swap."""

    idempotency_key: Identifier
    observed_oid: ObjectId | None
    swapped: bool
    recovered: bool

    @classmethod
    def from_mapping(cls, raw: object) -> WriteOutcome:
        return structure(raw, cls, what="write outcome")

    def public(self) -> JsonObject:
        return unstructure(self)
