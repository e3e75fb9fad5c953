"""The settings of `aios-ledger.toml` (database, worker, reviewer, checkpoints, projection, the
credential for remote repositories), structured through the one converter so that a misspelt key
or a wrong type is refused by name."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Annotated, Any

import attrs
from aios_ledger.core.errors import LedgerError
from aios_ledger.core.kinds import Between, Identifier, OneOf, Text
from aios_ledger.core.structuring import Constraint, FieldRefused, Problem, Refusal, structure
from aios_ledger.core.tasks.queries import MAX_LIST
from aios_ledger.core.tasks.requests import MAX_CLAIM_BATCH, LeaseSeconds, OfferedCapabilities
from aios_ledger.core.wal_checkpoints import SYNCHRONOUS_LEVELS

MAX_SECONDS = 366 * 24 * 3600  # a year: no wait or timeout is longer (sleeps refuse infinity)
MAX_COMMAND = 65536
MAX_PATH = 4096
DEFAULT_REVIEW_TIMEOUT = 120.0
DEFAULT_REVIEW_ATTEMPTS = 3
MAX_REVIEW_ATTEMPTS = 100


@attrs.frozen
class Seconds(Constraint):
    """A finite number of seconds up to a year, positive (or zero where `zero` allows it)."""

    zero: bool = False

    def __call__(self, value: Any) -> float:
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise FieldRefused(f"must be a number of seconds, got {type(value).__name__}")
        if not (math.isfinite(value) and value <= MAX_SECONDS):
            raise FieldRefused(f"must be at most {MAX_SECONDS} seconds")
        if value < 0 or (value == 0 and not self.zero):
            raise FieldRefused("must not be negative" if self.zero else "must be positive")
        return float(value)

    def json_schema(self) -> dict[str, Any]:
        bound = "minimum" if self.zero else "exclusiveMinimum"
        return {"type": "number", bound: 0, "maximum": MAX_SECONDS}


Command = Annotated[str, Text(max_length=MAX_COMMAND)]
PositiveSeconds = Annotated[float, Seconds()]


@attrs.frozen(kw_only=True)
class DatabaseSettings:
    """`[database]`: which ledger, how hard each commit syncs, whether opening migrates."""

    path: Annotated[str, Text(max_length=MAX_PATH)] | None = None
    synchronous: Annotated[str, OneOf(SYNCHRONOUS_LEVELS)] = "FULL"
    migrate: bool = True


@attrs.frozen(kw_only=True)
class IdentitySettings:
    """`[identity]`: who the command line acts as, declared and so unauthenticated."""

    actor: Annotated[str, Text(max_length=128)] | None = None


@attrs.frozen(kw_only=True)
class WorkerSettings:
    """`[worker]`: who claims, what it offers, the command it runs, and its timings."""

    agent_id: Identifier | None = None
    capabilities: OfferedCapabilities = attrs.field(factory=lambda: OfferedCapabilities([]))
    exec: Command | None = None
    lease_seconds: LeaseSeconds = 30
    timeout: PositiveSeconds | None = None
    grace: Annotated[float, Seconds(zero=True)] = 10.0
    poll_min: PositiveSeconds = 0.2
    poll_max: PositiveSeconds = 5.0
    max_tasks: Annotated[int, Between(1, 2**31 - 1)] | None = None
    # One claim takes every free slot at once, so a worker runs at most a claim batch.
    concurrency: Annotated[int, Between(1, MAX_CLAIM_BATCH)] = 1


@attrs.frozen(kw_only=True)
class ReviewSettings:
    """`[review]`: the reviewer's name (never a result's author), its command, and its bounds."""

    reviewer: Identifier | None = None
    exec: Command | None = None
    limit: Annotated[int, Between(1, MAX_LIST)] = 100
    timeout: PositiveSeconds = DEFAULT_REVIEW_TIMEOUT
    max_attempts: Annotated[int, Between(1, MAX_REVIEW_ATTEMPTS)] = DEFAULT_REVIEW_ATTEMPTS


@attrs.frozen(kw_only=True)
class AttestSettings:
    """`[attest]`: the signing key of landed writes; without it they land unattested, and say so."""

    key: Annotated[str, Text(max_length=MAX_PATH)] | None = None


@attrs.frozen(kw_only=True)
class CheckpointSettings:
    """`[checkpoint]`: the signing key, the keys `verify` accepts, the witnesses, and how often."""

    key: Annotated[str, Text(max_length=MAX_PATH)] | None = None
    credential: Annotated[str, Text(max_length=255)] = "aios-ledger-checkpoint-key"
    log_keys: list[Annotated[str, Text(max_length=1024)]] = attrs.field(factory=list)
    witnesses: list[Annotated[str, Text(max_length=1024)]] = attrs.field(factory=list)
    witness_urls: list[Annotated[str, Text(max_length=1024)]] = attrs.field(factory=list)
    every_seconds: PositiveSeconds | None = None
    every_events: Annotated[int, Between(1, 2**31 - 1)] | None = None


@attrs.frozen(kw_only=True)
class ProjectionSettings:
    """`[projection]`: the owner authorization id `project` runs under by default."""

    authorization_id: Identifier | None = None


# The user name a forge takes with a token as password (GitHub's, accepted by the others).
DEFAULT_TOKEN_USER = "x-access-token"


@attrs.frozen(kw_only=True)
class RemoteSettings:
    """`[remote]`: the ledger's own credential for `repo add` of a repository on a git server
    (an SSH key and its pinned known_hosts file, or a token's file, each either a file or a
    systemd credential's name; the user the token is sent as and a forge's CA bundle), and the
    folder its mirrors are kept in (`mirrors`)."""

    mirrors: Annotated[str, Text(max_length=MAX_PATH)] | None = None
    ssh_key: Annotated[str, Text(max_length=MAX_PATH)] | None = None
    known_hosts: Annotated[str, Text(max_length=MAX_PATH)] | None = None
    token_file: Annotated[str, Text(max_length=MAX_PATH)] | None = None
    key_credential: Annotated[str, Text(max_length=255)] | None = None
    token_credential: Annotated[str, Text(max_length=255)] | None = None
    token_user: Annotated[str, Text(max_length=200)] = DEFAULT_TOKEN_USER
    ca_bundle: Annotated[str, Text(max_length=MAX_PATH)] | None = None


@attrs.frozen(kw_only=True)
class LedgerSettings:
    """A whole config file: every section optional, every key in it known."""

    database: DatabaseSettings = attrs.field(factory=DatabaseSettings)
    identity: IdentitySettings = attrs.field(factory=IdentitySettings)
    worker: WorkerSettings = attrs.field(factory=WorkerSettings)
    review: ReviewSettings = attrs.field(factory=ReviewSettings)
    attest: AttestSettings = attrs.field(factory=AttestSettings)
    checkpoint: CheckpointSettings = attrs.field(factory=CheckpointSettings)
    projection: ProjectionSettings = attrs.field(factory=ProjectionSettings)
    remote: RemoteSettings = attrs.field(factory=RemoteSettings)

    @classmethod
    def from_mapping(cls, raw: object, *, source: str) -> LedgerSettings:
        """The settings a parsed file holds; `CONFIG_INVALID` names the file and each key."""
        return structure(raw, cls, what="", refuse=_config_invalid(source))


def _config_invalid(source: str) -> Refusal:
    def refuse(_what: str, problems: Sequence[Problem]) -> LedgerError:
        named = "; ".join(f"{problem.at('') or 'file'}: {problem.message}" for problem in problems)
        return LedgerError("CONFIG_INVALID", f"{source}: {named}")

    return refuse
