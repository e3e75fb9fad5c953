"""A repository's forge, purely: the setting that names it (sealed with the repository's other
settings), derived from the remote's URL where that is unambiguous, the codes of a forge's
refusal, and what a pull request after a governed write says."""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Mapping
from typing import Annotated, Any
from urllib.parse import urlsplit

import attrs
from aios_ledger.core.envelopes import BranchName
from aios_ledger.core.errors import LedgerError
from aios_ledger.core.jsonvalue import JsonObject
from aios_ledger.core.kinds import OneOf, Text
from aios_ledger.core.structuring import refuse_as, structure, unstructure

FORGES = ("github", "gitea", "gitlab")
SETTING_INVALID = "PULL_REQUEST_SETTING_INVALID"
# Why a forge did not open the request: the token refused, the request refused, no answer, or an
# answer the ledger cannot read.
AUTH_REFUSED = "PULL_REQUEST_AUTH_REFUSED"
REFUSED = "PULL_REQUEST_REFUSED"
UNREACHABLE = "PULL_REQUEST_UNREACHABLE"
FORGE_FAILED = "PULL_REQUEST_FORGE_FAILED"
FAILURE_CODES = (AUTH_REFUSED, REFUSED, UNREACHABLE, FORGE_FAILED)
MAX_MESSAGE = 2000
MAX_BODY = 60000

# Hosts whose forge and API are known from the host alone.
KNOWN_HOSTS = {
    "github.com": ("github", "https://api.github.com"),
    "gitlab.com": ("gitlab", "https://gitlab.com/api/v4"),
    "codeberg.org": ("gitea", "https://codeberg.org/api/v1"),
}
# The API's path under a self-hosted forge's web address.
API_PATHS = {"gitea": "/api/v1", "gitlab": "/api/v4"}
_PROJECT = re.compile(r"^[A-Za-z0-9_.][A-Za-z0-9_.-]*(/[A-Za-z0-9_.][A-Za-z0-9_.-]*)+$")
_REFUSE = refuse_as(LedgerError, SETTING_INVALID)


def _invalid(why: str) -> LedgerError:
    return LedgerError(SETTING_INVALID, f"pull_request: {why}")


@attrs.frozen
class PullRequestSetting:
    """Where a repository's pull requests are opened: the forge's kind and REST API, the project
    (`owner/name`, a GitLab project's path), the base branch (None: the repository's HEAD
    branch), and the file of a token of its own (None: the remote's HTTPS token)."""

    forge: Annotated[str, OneOf(FORGES)]
    api_url: Annotated[str, Text(max_length=500)]
    project: Annotated[str, Text(max_length=300, pattern=_PROJECT)]
    base_branch: BranchName | None = None
    token_file: Annotated[str, Text(max_length=1000)] | None = None

    @classmethod
    def from_mapping(cls, raw: object) -> PullRequestSetting:
        setting = structure(raw, cls, what="pull_request", refuse=_REFUSE)
        api = urlsplit(setting.api_url)
        if api.scheme not in ("https", "http") or not api.hostname:
            raise _invalid(f"api_url {setting.api_url[:200]!r} is not an http(s) URL")
        if api.username is not None or api.password is not None or api.query or api.fragment:
            raise _invalid("api_url takes no credential, query or fragment")
        if api.scheme == "http" and not is_loopback_host(api.hostname):
            raise _invalid(
                "api_url: http:// only on this machine: the token would cross the network"
            )
        if setting.forge != "gitlab" and setting.project.count("/") != 1:
            raise _invalid(f"a {setting.forge} project is owner/name, not {setting.project!r}")
        if setting.token_file is not None and not setting.token_file.startswith("/"):
            raise _invalid("token_file: an absolute path")
        return attrs.evolve(setting, api_url=setting.api_url.rstrip("/"))

    def public(self) -> JsonObject:
        return unstructure(self)


def is_loopback_host(host: str) -> bool:
    """Whether `host` (a URL's hostname) names this machine: plain http stays on it."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _remote_parts(remote_url: str) -> tuple[str, str | None, str]:
    """The scheme, host and path of a remote URL (`user@host:path` is ssh)."""
    if "://" in remote_url:
        parts = urlsplit(remote_url)
        return parts.scheme.lower(), parts.hostname, parts.path
    host, _, path = remote_url.partition(":")
    return "ssh", host.rpartition("@")[2].lower() or None, path


def resolve_setting(raw: object, remote_url: str | None) -> PullRequestSetting:
    """The setting `raw` gives, its API URL and project derived from the remote's URL where
    that is unambiguous: a known host, or the web address of an https remote."""
    if not isinstance(raw, Mapping):
        raise _invalid("an object {forge, api_url?, project?, base_branch?, token_file?}")
    given: dict[str, Any] = {name: value for name, value in raw.items() if value is not None}
    forge = given.get("forge")
    if remote_url is not None and forge in FORGES:
        scheme, host, path = _remote_parts(remote_url)
        given.setdefault("project", path.strip("/").removesuffix(".git"))
        project = str(given["project"])
        known = KNOWN_HOSTS.get(host or "")
        if known is not None and known[0] == forge:
            given.setdefault("api_url", known[1])
        elif scheme in ("https", "http") and forge in API_PATHS:
            web = remote_url.split("://", 1)[1].split("/", 1)[0]
            prefix = path.removesuffix(".git").removesuffix(project).rstrip("/")
            given.setdefault("api_url", f"{scheme}://{web}{prefix}{API_PATHS[forge]}")
    if forge in FORGES and "api_url" not in given:
        raise _invalid(f"give the forge's api_url: it cannot be told from {remote_url or 'a path'}")
    if forge in FORGES and "project" not in given:
        raise _invalid("give the project (owner/name): a repository on a path names none")
    return PullRequestSetting.from_mapping(given)


@attrs.frozen
class PullRequestRoute:
    """Where a landed write's request goes: into `base`, with the token in `token_file`; or
    `refusal` (code, message): why no forge is asked."""

    base: str | None
    token_file: str | None
    refusal: tuple[str, str] | None = None


def route_pull_request(
    setting: PullRequestSetting,
    *,
    head_branch: str | None,
    remote_scheme: str | None,
    remote_token_file: str | None,
    remote_unreadable: str | None = None,
) -> PullRequestRoute:
    """The base branch (the setting's, else the repository's HEAD branch) and the token's file
    (the setting's own, else an HTTPS remote's): without either the request is refused."""
    base = setting.base_branch or head_branch
    token_file = setting.token_file
    if token_file is None and remote_scheme not in (None, "ssh"):
        token_file = remote_token_file
    if not base:
        return PullRequestRoute(
            None, None, (REFUSED, "the repository has no HEAD branch: set base_branch")
        )
    if remote_unreadable is not None:
        return PullRequestRoute(base, None, (AUTH_REFUSED, remote_unreadable))
    if token_file is None:
        missing = _invalid("this repository has no HTTPS token: give the setting a token_file")
        return PullRequestRoute(base, None, (AUTH_REFUSED, str(missing)))
    return PullRequestRoute(base, token_file)


# --- what the request says ------------------------------------------------------------------------


@attrs.frozen
class PullRequestText:
    title: str
    body: str


def pull_request_text(
    *,
    goal: str,
    task_id: str,
    attempt: int,
    agent: str | None,
    reviewer: str | None,
    verdict: str | None,
    attestation_sha256: str | None,
    idempotency_key: str,
) -> PullRequestText:
    """The title (the task's goal's first line) and the body naming who did and judged the work."""
    first_line = goal.strip().splitlines()[0] if goal.strip() else task_id
    title = first_line if len(first_line) <= 200 else first_line[:199] + "…"
    lines = [
        "Opened by aios-ledger after its governed write.",
        "",
        f"- task: `{task_id}`, attempt {attempt}",
        f"- agent: {agent or 'none recorded'}",
        f"- reviewer: {reviewer or 'not named in the verdict'}",
        f"- verdict: {verdict or 'none recorded'}",
        f"- attestation: {f'sha256:{attestation_sha256}' if attestation_sha256 else 'none'}",
        f"- write: `{idempotency_key}`",
        "",
        f"Check it: `aios-ledger why HEAD_COMMIT` on the ledger, task `{task_id}`.",
    ]
    return PullRequestText(title, "\n".join(lines)[:MAX_BODY])
