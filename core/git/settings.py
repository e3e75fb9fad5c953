"""A governed repository's settings, columns of its row sealed by events so that `verify` holds
them; an agent's scan budget is per repository, as each owner bounds their own."""

from __future__ import annotations

import hashlib
import math
from typing import Annotated, Any

import attrs
from aios_ledger.core.digests import canonical_json
from aios_ledger.core.errors import LedgerError, RetryLaterError
from aios_ledger.core.git.forges import PullRequestSetting
from aios_ledger.core.git.secrets import DEFAULT_SCAN_BYTES, DEFAULT_SCAN_SECONDS, ScanBudget
from aios_ledger.core.jsonvalue import JsonObject, JsonValue, loads_document, loads_object
from aios_ledger.core.kinds import Between, Text
from aios_ledger.core.structuring import Constraint, FieldRefused, refuse_as, structure, unstructure
from aios_ledger.core.timestamps import Timestamp

# An agent's default scanning per hour: sixteen proposals' bytes, or thirty's seconds.
DEFAULT_AGENT_SCAN_BYTES = 1024 * 1024 * 1024
DEFAULT_AGENT_SCAN_SECONDS = 600.0
DEFAULT_AGENT_SCAN_WINDOW_SECONDS = 3600
MAX_SCAN_BYTES = 1 << 40
MAX_SCAN_SECONDS = 86400.0
MIN_WINDOW_SECONDS = 60
MAX_WINDOW_SECONDS = 30 * 86400
# A baseline is read on every proposal: bounded like any JSON document the ledger takes.
MAX_BASELINE_CHARS = 4 * 1024 * 1024

SETTING_INVALID = "REPOSITORY_SETTING_INVALID"
AGENT_SCAN_BUDGET_EXCEEDED = "AGENT_SCAN_BUDGET_EXCEEDED"
_REFUSE_SETTING = refuse_as(LedgerError, SETTING_INVALID)

# The settings' names, in the order they are shown, and the command-line option of each.
OPTIONS: dict[str, str] = {
    "secrets_baseline_sha256": "--secrets-baseline FILE",
    "scan_max_bytes": "--scan-max-bytes N",
    "scan_max_seconds": "--scan-max-seconds S",
    "allow_gitlinks": "--allow-gitlinks",
    "agent_scan_max_bytes": "--agent-scan-max-bytes N",
    "agent_scan_max_seconds": "--agent-scan-max-seconds S",
    "agent_scan_window_seconds": "--agent-scan-window S",
    "pull_request": "--pull-requests FORGE",
}


@attrs.frozen
class Seconds(Constraint):
    """Seconds in (0, `maximum`] (0 too with `zero`), never a bool or NaN, as a float."""

    maximum: float
    zero: bool = False

    def __call__(self, value: Any) -> float:
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise FieldRefused(f"must be a number of seconds, got {type(value).__name__}")
        low = "at least 0" if self.zero else "more than 0"
        if not math.isfinite(value) or not (
            (value >= 0 if self.zero else value > 0) and value <= self.maximum
        ):
            raise FieldRefused(f"must be {low} and at most {self.maximum:g} seconds")
        return float(value)

    def json_schema(self) -> dict[str, Any]:
        low = {"minimum": 0} if self.zero else {"exclusiveMinimum": 0}
        return {"type": "number", **low, "maximum": self.maximum}


ScanBytes = Annotated[int, Between(1, MAX_SCAN_BYTES)]
ScanSeconds = Annotated[float, Seconds(MAX_SCAN_SECONDS)]
# What one scan spent, as the shell measured it (bytes brought and decoded; seconds taken).
SpentBytes = Annotated[int, Between(0, MAX_SCAN_BYTES * 4)]
SpentSeconds = Annotated[float, Seconds(MAX_SCAN_SECONDS * 4, zero=True)]


@attrs.frozen
class RepositorySettings:
    """A repository's settings as its row holds them (the defaults: no baseline, 64 MiB and 20
    seconds per proposal, no gitlinks, 1 GiB and 600 seconds per agent per hour)."""

    secrets_baseline_json: str | None = None
    secrets_baseline_sha256: str | None = None
    scan_max_bytes: int = DEFAULT_SCAN_BYTES
    scan_max_seconds: float = DEFAULT_SCAN_SECONDS
    allow_gitlinks: bool = False
    agent_scan_max_bytes: int = DEFAULT_AGENT_SCAN_BYTES
    agent_scan_max_seconds: float = DEFAULT_AGENT_SCAN_SECONDS
    agent_scan_window_seconds: int = DEFAULT_AGENT_SCAN_WINDOW_SECONDS
    # The pull request after a write (`PullRequestSetting`) as canonical JSON; None: none opened.
    pull_request_json: str | None = None

    def public(self) -> JsonObject:
        """The settings as answers and events carry them: the baseline by its sha256 only, and
        the pull request's setting only where there is one (so that older seals still hold)."""
        shown: JsonObject = {
            name: value
            for name, value in attrs.asdict(self).items()
            if name not in ("secrets_baseline_json", "pull_request_json")
        }
        if self.pull_request_json is not None:
            shown["pull_request"] = loads_object(self.pull_request_json, what="pull_request")
        return shown

    def pull_request(self) -> PullRequestSetting | None:
        if self.pull_request_json is None:
            return None
        return PullRequestSetting.from_mapping(
            loads_object(self.pull_request_json, what="pull_request")
        )

    def columns(self) -> dict[str, Any]:
        """The settings as the repository's columns hold them (`allow_gitlinks` 0 or 1)."""
        return {**attrs.asdict(self), "allow_gitlinks": 1 if self.allow_gitlinks else 0}

    def baseline(self) -> dict[str, JsonValue] | None:
        if self.secrets_baseline_json is None:
            return None
        return baseline_document(self.secrets_baseline_json)

    def changed_from(self, other: RepositorySettings) -> list[str]:
        mine, theirs = self.public(), other.public()
        return [name for name in OPTIONS if mine.get(name) != theirs.get(name)]

    def budget(self) -> ScanBudget:
        """The per-proposal budget alone (what a scan of a proposal no agent made runs under)."""
        return ScanBudget(max_bytes=self.scan_max_bytes, max_seconds=self.scan_max_seconds)


DEFAULT_SETTINGS = RepositorySettings()
# The columns 0.x migration 0013 added, and what each holds in a row registered before it.
MIGRATED_DEFAULTS: dict[str, str | int | float | None] = DEFAULT_SETTINGS.columns()


def baseline_sha256(text: str) -> str:
    """The sha256 of a baseline's text as UTF-8: `sha256sum` of the file it was read from."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def _invalid_baseline(why: str) -> LedgerError:
    return LedgerError(
        SETTING_INVALID,
        f"secrets_baseline: {why}: give a detect-secrets baseline (`detect-secrets scan > FILE`)",
    )


def _entries(document: dict[str, JsonValue], key: str) -> list[dict[str, JsonValue]]:
    value = document.get(key, [])
    if not isinstance(value, list) or not all(isinstance(item, dict) for item in value):
        raise _invalid_baseline(f"its {key} is not a list of objects")
    return [item for item in value if isinstance(item, dict)]


def baseline_document(text: str) -> dict[str, JsonValue]:
    """A baseline as `detect-secrets` writes it, refusing plugins that read files."""
    try:
        document = loads_document(text, what="secrets_baseline")
    except LedgerError as refused:
        raise _invalid_baseline(refused.detail) from None
    if not isinstance(document, dict):
        raise _invalid_baseline("it is not a JSON object")
    results = document.get("results")
    if not isinstance(results, dict):
        raise _invalid_baseline("it has no results object")
    for filename, secrets in results.items():
        if not isinstance(secrets, list) or not all(
            isinstance(secret, dict)
            and isinstance(secret.get("type"), str)
            and isinstance(secret.get("hashed_secret"), str)
            for secret in secrets
        ):
            raise _invalid_baseline(f"its results for {filename[:200]!r} are not its secrets")
    for key in ("plugins_used", "filters_used"):
        for entry in _entries(document, key):
            named = entry.get("name") if key == "plugins_used" else entry.get("path")
            if not isinstance(named, str) or not named:
                raise _invalid_baseline(f"an entry of its {key} names nothing")
            path = entry.get("path")
            if isinstance(path, str) and path.startswith("file:"):
                raise _invalid_baseline(f"its {key} runs code from {path[:200]!r}")
            if key == "filters_used" and named.endswith(".wordlist.should_exclude_secret"):
                raise _invalid_baseline("its filters_used reads a word list from a file")
    return document


@attrs.frozen
class SettingsChange:
    """The settings a request sets (None: unchanged); a bad one is `REPOSITORY_SETTING_INVALID`."""

    secrets_baseline: Annotated[str, Text(max_length=MAX_BASELINE_CHARS)] | None = None
    clear_secrets_baseline: bool = False
    scan_max_bytes: ScanBytes | None = None
    scan_max_seconds: ScanSeconds | None = None
    allow_gitlinks: bool | None = None
    agent_scan_max_bytes: ScanBytes | None = None
    agent_scan_max_seconds: ScanSeconds | None = None
    agent_scan_window_seconds: (
        Annotated[int, Between(MIN_WINDOW_SECONDS, MAX_WINDOW_SECONDS)] | None
    ) = None
    pull_request: PullRequestSetting | None = None
    clear_pull_request: bool = False

    @classmethod
    def from_mapping(cls, raw: object) -> SettingsChange:
        # The pull request's setting is checked whole first, under its own code.
        given = raw.get("pull_request") if isinstance(raw, dict) else None
        setting = None if given is None else PullRequestSetting.from_mapping(given)
        if setting is not None and isinstance(raw, dict):
            if raw.get("clear_pull_request"):
                raise LedgerError(
                    SETTING_INVALID, "settings: give a pull_request or clear it, not both"
                )
            raw = {**raw, "pull_request": setting.public()}
        change = structure(raw, cls, what="settings", refuse=_REFUSE_SETTING)
        change = attrs.evolve(change, pull_request=setting)
        if change.secrets_baseline is not None:
            if change.clear_secrets_baseline:
                raise LedgerError(
                    SETTING_INVALID, "settings: give a secrets_baseline or clear it, not both"
                )
            baseline_document(change.secrets_baseline)
        return change

    def public(self) -> JsonObject:
        # A change that leaves the pull request alone digests as it did before the setting was.
        shown = unstructure(self)
        if self.pull_request is None:
            del shown["pull_request"]
        if not self.clear_pull_request:
            del shown["clear_pull_request"]
        return shown

    def is_empty(self) -> bool:
        return self == SettingsChange()

    def apply(self, current: RepositorySettings) -> RepositorySettings:
        baseline, digest = current.secrets_baseline_json, current.secrets_baseline_sha256
        if self.clear_secrets_baseline:
            baseline, digest = None, None
        elif self.secrets_baseline is not None:
            baseline, digest = self.secrets_baseline, baseline_sha256(self.secrets_baseline)

        pull_request = current.pull_request_json
        if self.clear_pull_request:
            pull_request = None
        elif self.pull_request is not None:
            pull_request = canonical_json(self.pull_request.public())
        given = {
            name: value
            for name in OPTIONS
            if name not in ("secrets_baseline_sha256", "pull_request")
            and (value := getattr(self, name)) is not None
        }
        return attrs.evolve(
            current,
            secrets_baseline_json=baseline,
            secrets_baseline_sha256=digest,
            pull_request_json=pull_request,
            **given,
        )


# --- the agent's budget ---------------------------------------------------------------------------


@attrs.frozen
class AgentScanSpend:
    """What an agent's scans to a repository spent in the window, and the oldest's time."""

    scans: int = 0
    scan_bytes: int = 0
    scan_seconds: float = 0.0
    oldest_at: str | None = None


def scan_window_start(settings: RepositorySettings, *, now: Timestamp) -> Timestamp:
    return Timestamp.from_epoch_ms(now.epoch_ms - settings.agent_scan_window_seconds * 1000)


def _retry_after(settings: RepositorySettings, spend: AgentScanSpend, now: Timestamp) -> int:
    """Seconds until the oldest scan in the window leaves it (and frees what it spent)."""
    if spend.oldest_at is None:
        return settings.agent_scan_window_seconds
    oldest = Timestamp.parse(spend.oldest_at, field="oldest_at")
    leaves_ms = oldest.epoch_ms + settings.agent_scan_window_seconds * 1000 - now.epoch_ms
    return max(1, -(-leaves_ms // 1000))


def admit_scan(
    settings: RepositorySettings, spend: AgentScanSpend, *, agent_id: str, now: Timestamp
) -> ScanBudget:
    """A scan's budget, cut to what the agent has left, else `AGENT_SCAN_BUDGET_EXCEEDED`."""
    left_bytes = settings.agent_scan_max_bytes - spend.scan_bytes
    left_seconds = settings.agent_scan_max_seconds - spend.scan_seconds
    retry_after = _retry_after(settings, spend, now)
    if left_bytes <= 0 or left_seconds <= 0:
        raise RetryLaterError(
            AGENT_SCAN_BUDGET_EXCEEDED,
            f"agent {agent_id!r} spent its scan budget for this repository: "
            f"{spend.scan_bytes} of {settings.agent_scan_max_bytes} bytes and "
            f"{spend.scan_seconds:.3f} of {settings.agent_scan_max_seconds:g} seconds in "
            f"{spend.scans} scans of the last {settings.agent_scan_window_seconds} "
            f"seconds: try again in {retry_after} seconds, or ask the owner to raise "
            "the repository's agent scan budget",
            retry_after=retry_after,
        )
    return ScanBudget(
        max_bytes=min(settings.scan_max_bytes, left_bytes),
        max_seconds=min(settings.scan_max_seconds, left_seconds),
        agent_bytes=left_bytes if left_bytes < settings.scan_max_bytes else None,
        agent_seconds=left_seconds if left_seconds < settings.scan_max_seconds else None,
        agent_id=agent_id,
        retry_after=retry_after,
    )
