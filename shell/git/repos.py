"""Governed repositories: bare git repositories on this machine whose branches only the ledger
writes, registered under the name bindings use. Their settings are in the ledger, sealed; the
`aios-ledger.*` git config keys an older release read are reported and refuse proposals, so that
no proposal is judged by settings its owner did not mean."""

from __future__ import annotations

import os
import shlex
import shutil
from collections.abc import Mapping, Sequence
from typing import Any
from urllib.parse import urlsplit

from aios_ledger.core import LedgerError
from aios_ledger.core.git import (
    RegisterRepositoryRequest,
    RepositoryAnswer,
    RepositoryRow,
    RepositorySettingsAnswer,
    RepositorySettingsChangeRow,
    RepositorySettingsRequest,
    RepositorySettingsState,
    RepositoryState,
    SettingsChange,
    decide_change_repository_settings,
    decide_register_repository,
)
from aios_ledger.core.git.answers import repository_answer
from aios_ledger.core.git.forges import is_loopback_host, resolve_setting
from aios_ledger.core.git.settings import MAX_BASELINE_CHARS, baseline_document
from aios_ledger.core.log import LEDGER_CHAIN
from aios_ledger.shell.actors import current_actor
from aios_ledger.shell.clock import Clock, read_clock, system_clock
from aios_ledger.shell.db.apply import PlanExecutor
from aios_ledger.shell.db.connection import Database, fetch_all, fetch_record
from aios_ledger.shell.db.run import Connection
from aios_ledger.shell.git.remotes import (
    Credentials,
    Remote,
    check_credentials,
    create_mirror,
    remote_kind,
    remote_of,
)
from aios_ledger.shell.git.runner import run_git
from aios_ledger.shell.git.secret_scan import check_baseline_loads, git_config_settings

# The option of `repo settings` that now sets each key an older release read from git config.
GIT_CONFIG_OPTIONS = {
    "aios-ledger.secretsbaseline": "--secrets-baseline",
    "aios-ledger.scanmaxbytes": "--scan-max-bytes",
    "aios-ledger.scanmaxseconds": "--scan-max-seconds",
    "aios-ledger.allowgitlinks": "--allow-gitlinks",
}
SETTINGS_IN_GIT_CONFIG = "REPOSITORY_SETTINGS_IN_GIT_CONFIG"


def repository_row(conn: Connection, name: str) -> RepositoryRow | None:
    return fetch_record(conn, "get_governed_repository", {"name": name}, RepositoryRow)


def require_bare(path: str) -> str:
    """The absolute, resolved path of a bare repository, or `REPOSITORY_NOT_BARE`."""
    resolved = os.path.realpath(path)
    if not os.path.isdir(resolved):
        raise LedgerError("REPOSITORY_NOT_BARE", f"{path!r} is not a directory")
    found = run_git(
        ["--git-dir", resolved, "rev-parse", "--is-bare-repository"], cwd=resolved, check=False
    )
    if found.returncode != 0 or found.text.strip() != "true":
        raise LedgerError("REPOSITORY_NOT_BARE", f"{path!r} is not a bare git repository")
    return resolved


def head_branch(path: str) -> str | None:
    """The branch the repository's HEAD names (None: HEAD is detached)."""
    found = run_git(["--git-dir", path, "symbolic-ref", "--quiet", "--short", "HEAD"], check=False)
    name = found.text.strip()
    return name if found.returncode == 0 and name else None


def read_baseline(path: str) -> str:
    """The UTF-8 text of a `detect-secrets` baseline file, at most `MAX_BASELINE_CHARS`."""
    if not isinstance(path, str) or not path or "\0" in path:
        raise LedgerError("INPUT_UNREADABLE", "secrets_baseline: the path of a baseline file")
    try:
        with open(path, "rb") as handle:
            raw = handle.read(MAX_BASELINE_CHARS * 4 + 1)
    except (OSError, ValueError) as exc:
        raise LedgerError("INPUT_UNREADABLE", f"{path[:200]!r}: {exc}") from None
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        raise LedgerError(
            "REPOSITORY_SETTING_INVALID",
            f"secrets_baseline: {path[:200]!r} is not UTF-8 text: give a detect-secrets"
            " baseline (`detect-secrets scan > FILE`)",
        ) from None


def with_pull_request(settings: object, remote: Remote | None) -> object:
    """`settings` as a request takes them: the pull request's setting completed from the
    remote's URL, its token file (if it names one) absolute and readable."""
    if not isinstance(settings, Mapping) or settings.get("pull_request") is None:
        return dict(settings) if isinstance(settings, Mapping) else settings
    setting = resolve_setting(settings["pull_request"], None if remote is None else remote.url)
    if setting.token_file is not None and not os.access(setting.token_file, os.R_OK):
        raise LedgerError(
            "PULL_REQUEST_SETTING_INVALID",
            f"pull_request: token_file {setting.token_file[:200]!r} is no readable file",
        )
    return {**settings, "pull_request": setting.public()}


def _checked(change: SettingsChange | None) -> None:
    """A baseline the request sets must be one detect-secrets loads (beyond its shape)."""
    if change is not None and change.secrets_baseline is not None:
        check_baseline_loads(baseline_document(change.secrets_baseline))


def add_repository(
    db: Database,
    name: str,
    path: str,
    protected: Sequence[str] | None = None,
    *,
    default_protection: bool = True,
    settings: Mapping[str, Any] | None = None,
    clock: Clock = system_clock,
    remote_url: str | None = None,
) -> RepositoryAnswer:
    """Register the bare repository at `path` under `name` (the mirror of `remote_url`, sealed
    with its row). Its HEAD branch is always protected; `protected` patterns are added to the
    defaults, or replace them without `default_protection`."""
    raw_path = path if isinstance(path, str) else ""
    resolved = require_bare(raw_path) if raw_path else raw_path
    remote = remote_of(resolved) if resolved else None
    request = RegisterRepositoryRequest.from_mapping(
        {
            "name": name,
            "path": resolved,
            "protected": None if protected is None else list(protected),
            "default_protection": default_protection,
            "settings": with_pull_request(settings, remote),
            "remote_url": remote_url,
        }
    )
    _checked(request.settings)
    head = head_branch(request.path)

    actor = current_actor()

    def write(conn: Connection) -> RepositoryAnswer:
        plans = PlanExecutor(conn)
        state = RepositoryState(repository_row(conn, request.name), plans.tail(LEDGER_CHAIN))
        now = read_clock(clock)
        return plans.apply(
            decide_register_repository(state, request, now=now, head_branch=head, actor=actor)
        )

    return db.write(write)


def add_remote_repository(
    db: Database,
    name: str,
    url: str,
    mirror: str,
    credentials: Credentials,
    protected: Sequence[str] | None = None,
    *,
    default_protection: bool = True,
    settings: Mapping[str, Any] | None = None,
    clock: Clock = system_clock,
) -> dict[str, Any]:
    """Register the repository at `url` under `name`, governed through a bare mirror at
    `mirror` that is fetched from it now: the answer says what was found there (its default
    branch, its branches) and the patterns protected, so the owner sees what will be governed."""
    kind = remote_kind(url)
    if kind is None:
        raise LedgerError("REMOTE_URL_INVALID", f"{url[:300]!r} is not a remote URL")
    remote = Remote(url, kind, check_credentials(kind, credentials))
    warnings = []
    if kind == "http" and not is_loopback_host(urlsplit(url).hostname or ""):
        warnings.append(
            f"{url} is plain http: the token and the code cross the network unencrypted;"
            " use https:// outside this machine"
        )
    mirror = os.path.abspath(mirror)
    created = not os.path.exists(mirror)
    found = create_mirror(mirror, remote)
    try:
        answer = add_repository(
            db,
            name,
            mirror,
            protected,
            default_protection=default_protection,
            settings=settings,
            clock=clock,
            remote_url=remote.url,
        )
    except BaseException:
        # A registration the ledger refuses leaves no mirror it made behind.
        if created:
            shutil.rmtree(mirror, ignore_errors=True)
        raise
    branches = sorted(ref for ref in found.refs if ref.startswith("refs/heads/"))
    return {
        **answer,
        "remote": {**remote.public(), "default_branch": found.default_branch},
        "branches": [ref.removeprefix("refs/heads/") for ref in branches],
        "warnings": warnings,
    }


def change_repository_settings(
    db: Database,
    name: str,
    settings: Mapping[str, Any],
    *,
    idempotency_key: str,
    expected_revision: int | None = None,
    clock: Clock = system_clock,
) -> RepositorySettingsAnswer:
    """Change the settings `settings` gives, the others staying, idempotent by key and only
    while the repository is at `expected_revision` when given."""
    remote = None
    if isinstance(settings, Mapping) and settings.get("pull_request") is not None:
        remote = remote_of(get_repository(db, name).path)
    request = RepositorySettingsRequest.from_mapping(
        {
            "name": name,
            "idempotency_key": idempotency_key,
            "settings": with_pull_request(settings, remote),
            "expected_revision": expected_revision,
        }
    )
    _checked(request.settings)

    actor = current_actor()

    def write(conn: Connection) -> RepositorySettingsAnswer:
        plans = PlanExecutor(conn)
        key = {"idempotency_key": request.idempotency_key}
        state = RepositorySettingsState(
            repository=repository_row(conn, request.name),
            prior=fetch_record(
                conn, "get_repository_settings_change", key, RepositorySettingsChangeRow
            ),
            tail=plans.tail(LEDGER_CHAIN),
        )
        return plans.apply(
            decide_change_repository_settings(state, request, now=read_clock(clock), actor=actor)
        )

    return db.write(write)


def git_config_notice(name: str, path: str) -> str | None:
    """What to tell the owner of a repository whose git config still holds `aios-ledger.*`
    keys: the commands that move them into the ledger and remove them."""
    found = git_config_settings(path)
    if not found:
        return None
    options: list[str] = []
    for key, value in sorted(found.items()):
        option = GIT_CONFIG_OPTIONS.get(key)
        if option == "--secrets-baseline":
            options += [option, shlex.quote(os.path.join(path, value))]
        elif option == "--allow-gitlinks":
            truthy = value.strip().lower() in ("true", "yes", "on", "1")
            options.append(option if truthy else "--no-allow-gitlinks")
        elif option is not None:
            options += [option, shlex.quote(value)]
    listed = ", ".join(f"{key} = {value!r}" for key, value in sorted(found.items()))
    move = (
        f"set them in the ledger with `aios-ledger repo settings {shlex.quote(name)}"
        f" --idempotency-key from-git-config {' '.join(options)}`, then "
        if options
        else ""
    )
    return (
        f"the git config of {path} holds {listed}, which the ledger no longer reads (a"
        f" repository's settings are in the ledger, sealed): {move}remove them with"
        f" `git --git-dir {shlex.quote(path)} config --remove-section aios-ledger`"
    )


def refuse_git_config_settings(name: str, path: str) -> None:
    """Refuse proposals while the git config holds settings the ledger no longer reads."""
    notice = git_config_notice(name, path)
    if notice is not None:
        raise LedgerError(SETTINGS_IN_GIT_CONFIG, f"proposals are refused until then: {notice}")


def _shown(row: RepositoryRow) -> dict[str, object]:
    shown: dict[str, object] = dict(repository_answer(row, idempotent=False))
    shown.pop("idempotent")
    notice = git_config_notice(row.name, row.path)
    warnings = [] if notice is None else [notice]
    shown["warnings"] = warnings
    try:
        remote = remote_of_repository(row)
    except LedgerError as refused:
        # Shown, not refused: the owner reads here what stops the repository's writes.
        warnings.append(f"{refused.code}: {refused.detail}")
        return shown
    if remote is not None:
        shown["remote"] = remote.public()
    return shown


def list_repositories(db: Database) -> list[dict[str, object]]:
    rows = db.read(lambda conn: fetch_all(conn, "all_governed_repositories"))
    return [_shown(RepositoryRow.from_row(row)) for row in rows]


def remote_of_repository(row: RepositoryRow) -> Remote | None:
    """The remote a governed repository's mirror stands for, which must be the one sealed with
    its row: a mirror whose `aios-remote.json` names another URL is refused, so no write goes
    anywhere but where the ledger says."""
    remote = remote_of(row.path)
    if remote is None and row.remote_url is None:
        return None
    if remote is None or remote.url != row.remote_url:
        raise LedgerError(
            "REMOTE_CONFIG_INVALID",
            f"the mirror {row.path} of {row.name!r} does not stand for {row.remote_url or 'no'}"
            " remote, as sealed with the repository",
        )
    return remote


def require_repository(conn: Connection, name: str) -> RepositoryRow:
    row = repository_row(conn, name)
    if row is None:
        raise LedgerError("REPOSITORY_NOT_FOUND", f"no governed repository {name!r}")
    return row


def get_repository(db: Database, name: str) -> RepositoryRow:
    return db.read(lambda conn: require_repository(conn, name))


def show_repository(db: Database, name: str) -> dict[str, object]:
    row = get_repository(db, name)
    return {**_shown(row), "registered_at": row.created_at, "updated_at": row.updated_at}
