"""What `repo add` takes for a remote before it reaches any server: the kinds of URL, a URL that
carries a credential, the credential files and systemd credentials each kind needs, the token
redacted from a message, git's environment for each kind (the credential there only, never in
argv), and the remote's URL sealed with its repository."""

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import apsw
import pytest
from aios_ledger.core import LedgerError
from aios_ledger.core.git.forges import is_loopback_host
from aios_ledger.shell.db.connection import Database
from aios_ledger.shell.git.remotes import (
    Credentials,
    Remote,
    check_credentials,
    git_environment,
    git_options,
    redact,
    remote_kind,
    save_remote,
)
from aios_ledger.shell.git.repos import add_repository, show_repository
from aios_ledger.shell.log.verification import verify_log
from cli_runner import run_cli
from git_support import make_repository
from legacy_fixtures import rows

TOKEN = "canary-url-token-81f2"


@pytest.mark.parametrize(
    ("location", "kind"),
    [
        ("ssh://git@git.example.com:2222/acme/widgets.git", "ssh"),
        ("git@github.com:acme/widgets.git", "ssh"),
        ("git.example.com:acme/widgets.git", "ssh"),
        ("https://forge.example.com/acme/widgets.git", "https"),
        ("http://127.0.0.1:8080/widgets.git", "http"),
        ("/srv/git/widgets.git", None),
        ("./widgets.git", None),
        ("widgets.git", None),
        ("-oProxyCommand=touch:x", None),
    ],
)
def test_a_location_is_a_remote_of_its_kind_or_a_local_path(location: str, kind: str) -> None:
    assert remote_kind(location) == kind


@pytest.mark.parametrize(
    "location",
    [
        f"https://x-access-token:{TOKEN}@forge.example.com/acme/widgets.git",
        "https://someone@forge.example.com/acme/widgets.git",
        f"ssh://git:{TOKEN}@git.example.com/acme/widgets.git",
        "git://git.example.com/acme/widgets.git",
        "file:///srv/git/widgets.git",
        "ext::sh -c touch% /tmp/pwned",
        "fd::7",
        "ssh://-oProxyCommand=touch%20x/widgets.git",
    ],
)
def test_a_url_with_a_credential_or_another_scheme_is_refused(location: str) -> None:
    with pytest.raises(LedgerError) as refused:
        remote_kind(location)
    assert refused.value.code == "REMOTE_URL_INVALID"
    assert TOKEN not in str(refused.value)


def test_only_loopback_hosts_are_loopback() -> None:
    def is_loopback(url: str) -> bool:
        return is_loopback_host(urlsplit(url).hostname or "")

    assert is_loopback("http://127.0.0.1:8080/x.git")
    assert is_loopback("http://localhost/x.git")
    assert is_loopback("http://[::1]:80/x.git")
    assert not is_loopback("http://git.example.com/x.git")
    assert not is_loopback("http://10.0.0.1/x.git")


def test_each_kind_takes_its_own_credential_files(tmp_path: Path) -> None:
    key, hosts = tmp_path / "key", tmp_path / "known_hosts"
    key.write_text("k")
    hosts.write_text("h")
    with pytest.raises(LedgerError, match="--known-hosts"):
        check_credentials("ssh", Credentials(ssh_key=str(key)))
    with pytest.raises(LedgerError, match="--token-file"):
        check_credentials("https", Credentials())
    with pytest.raises(LedgerError, match="takes no --ssh-key"):
        check_credentials("https", Credentials(ssh_key=str(key), token_file=str(key)))
    with pytest.raises(LedgerError, match="is no file"):
        check_credentials("ssh", Credentials(ssh_key=str(key), known_hosts=str(tmp_path / "no")))
    found = check_credentials("ssh", Credentials(ssh_key=str(key), known_hosts=str(hosts)))
    assert found.ssh_key == str(key)


def _token_remote(tmp_path: Path) -> Remote:
    token_file = tmp_path / "token"
    token_file.write_text(TOKEN + "\n")
    url = "https://forge.example.com/acme/widgets.git"
    return Remote(url, "https", Credentials(token_file=str(token_file)))


def test_the_token_goes_to_git_in_its_environment_only(tmp_path: Path) -> None:
    remote = _token_remote(tmp_path)
    environment = git_environment(remote)
    assert environment["GIT_CONFIG_KEY_0"] == "http.extraHeader"
    basic = base64.b64encode(f"x-access-token:{TOKEN}".encode()).decode()
    assert environment["GIT_CONFIG_VALUE_0"] == f"Authorization: Basic {basic}"
    assert TOKEN not in json.dumps(git_options(remote)) and basic not in json.dumps(remote.public())
    message = f"fatal: sent {TOKEN} and Authorization: Basic {basic}; authorization: bearer abc"
    shown = redact(message, remote)
    assert TOKEN not in shown and basic not in shown and "abc" not in shown


def test_ssh_trusts_only_the_pinned_host_keys_and_the_given_key(tmp_path: Path) -> None:
    remote = Remote(
        "git@git.example.com:acme/widgets.git",
        "ssh",
        Credentials(ssh_key="/keys/deploy key", known_hosts="/keys/known_hosts"),
    )
    command = git_environment(remote)["GIT_SSH_COMMAND"]
    for option in (
        "-F /dev/null",
        "IdentitiesOnly=yes",
        "StrictHostKeyChecking=yes",
        "UserKnownHostsFile=/keys/known_hosts",
        "BatchMode=yes",
        "-i '/keys/deploy key'",
    ):
        assert option in command


def test_repo_add_refuses_a_remote_without_its_credential_and_changes_nothing(
    tmp_path: Path,
) -> None:
    db = tmp_path / "ledger.db"
    assert run_cli("--db", db, "init").returncode == 0
    url = "ssh://git@127.0.0.1:1/widgets.git"
    done = run_cli("--db", db, "repo", "add", "acme/widgets", url)
    assert done.returncode == 1 and done.stderr.startswith("REMOTE_CREDENTIAL_INVALID"), done
    done = run_cli("--db", db, "repo", "add", "acme/widgets", f"https://u:{TOKEN}@h/x.git")
    assert done.stderr.startswith("REMOTE_URL_INVALID") and TOKEN not in done.stderr
    local = run_cli("--db", db, "repo", "add", "acme/widgets", str(tmp_path), "--ssh-key", "k")
    assert local.stderr.startswith("REMOTE_URL_INVALID"), local.stderr
    assert json.loads(run_cli("--db", db, "repo", "list").stdout) == []
    assert not (tmp_path / "ledger.db.mirrors").exists()


def test_a_systemd_credential_stands_for_the_key_or_token_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`--key-credential` / `--token-credential` name a file in `$CREDENTIALS_DIRECTORY`; the
    mirror keeps the name, and git is given the file found there each time it runs."""
    directory = tmp_path / "credentials"
    directory.mkdir()
    (directory / "forge-token").write_text(TOKEN + "\n")
    (directory / "deploy-key").write_text("k")
    hosts = tmp_path / "known_hosts"
    hosts.write_text("h")
    monkeypatch.setenv("CREDENTIALS_DIRECTORY", str(directory))
    token = check_credentials("https", Credentials(token_credential="forge-token"))
    assert token.token_credential == "forge-token" and token.token_file is None
    url = "https://forge.example.com/acme/widgets.git"
    environment = git_environment(Remote(url, "https", token))
    basic = base64.b64encode(f"x-access-token:{TOKEN}".encode()).decode()
    assert environment["GIT_CONFIG_VALUE_0"] == f"Authorization: Basic {basic}"
    key = check_credentials("ssh", Credentials(key_credential="deploy-key", known_hosts=str(hosts)))
    remote = Remote("git@git.example.com:acme/widgets.git", "ssh", key)
    assert f"-i {directory / 'deploy-key'}" in git_environment(remote)["GIT_SSH_COMMAND"]
    # Another unit's folder: the same name, found there.
    moved = tmp_path / "run-credentials"
    moved.mkdir()
    (moved / "deploy-key").write_text("k")
    monkeypatch.setenv("CREDENTIALS_DIRECTORY", str(moved))
    assert f"-i {moved / 'deploy-key'}" in git_environment(remote)["GIT_SSH_COMMAND"]


@pytest.mark.parametrize(
    ("credentials", "directory", "message"),
    [
        (Credentials(token_credential="forge-token"), None, "$CREDENTIALS_DIRECTORY is not set"),
        (
            Credentials(token_credential="other-token"),
            "set",
            "no readable credential 'other-token'",
        ),
        (Credentials(token_credential="../forge-token"), "set", "a systemd credential's name"),
        (Credentials(token_credential=".."), "set", "a systemd credential's name"),
        (
            Credentials(token_credential="forge-token", token_file="/etc/hostname"),
            "set",
            "not both",
        ),
        (
            Credentials(key_credential="forge-token", token_credential="forge-token"),
            "set",
            "takes no --key-credential",
        ),
    ],
)
def test_a_missing_or_misnamed_systemd_credential_is_refused_by_its_name(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    credentials: Credentials,
    directory: str | None,
    message: str,
) -> None:
    folder = tmp_path / "credentials"
    folder.mkdir()
    (folder / "forge-token").write_text(TOKEN + "\n")
    if directory is None:
        monkeypatch.delenv("CREDENTIALS_DIRECTORY", raising=False)
    else:
        monkeypatch.setenv("CREDENTIALS_DIRECTORY", str(folder))
    with pytest.raises(LedgerError) as refused:
        check_credentials("https", credentials)
    assert refused.value.code == "REMOTE_CREDENTIAL_INVALID"
    assert message in refused.value.detail and TOKEN not in str(refused.value)


def test_repo_add_reads_the_credentials_name_from_the_config_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("CREDENTIALS_DIRECTORY", raising=False)
    config = tmp_path / "aios-ledger.toml"
    config.write_text(
        '[database]\npath = "ledger.db"\n[remote]\ntoken_credential = "forge-token"\n'
    )
    assert run_cli("--config", config, "init").returncode == 0
    url = "https://forge.example.com/acme/widgets.git"
    done = run_cli("--config", config, "repo", "add", "acme/widgets", url)
    assert done.stderr.startswith("REMOTE_CREDENTIAL_INVALID"), done.stderr
    assert "--token-credential forge-token" in done.stderr
    local = run_cli(
        "--db",
        tmp_path / "ledger.db",
        "repo",
        "add",
        "acme/local",
        str(tmp_path),
        "--token-credential",
        "forge-token",
    )
    assert local.stderr.startswith("REMOTE_URL_INVALID"), local.stderr


def test_a_remotes_url_is_sealed_with_its_repository_and_verify_holds_it(tmp_path: Path) -> None:
    """The URL a mirror stands for is in the repository's row and its registration event:
    `repo show` answers it, a URL changed in the row fails `verify`, and a mirror that names
    another URL than the sealed one is refused (`REMOTE_CONFIG_INVALID`)."""
    bare, _base = make_repository(tmp_path / "served")
    url = "https://forge.example.com/acme/widgets.git"
    db_path = tmp_path / "ledger.db"
    with Database(db_path) as db:
        answer = add_repository(db, "acme/widgets", str(bare), remote_url=url)
        assert answer["remote_url"] == url
        with pytest.raises(LedgerError) as refused:
            add_repository(db, "acme/other", str(bare), remote_url=f"https://u:{TOKEN}@h/x.git")
        assert refused.value.code == "REMOTE_URL_INVALID" and TOKEN not in str(refused.value)
        with pytest.raises(LedgerError) as moved:
            add_repository(db, "acme/widgets", str(bare), remote_url=url + "-other")
        assert moved.value.code == "REPOSITORY_CONFLICT"
        # A mirror's own file naming no remote, or another, is not where the ledger writes.
        shown: Any = show_repository(db, "acme/widgets")
        [unsealed] = shown["warnings"]
        assert unsealed.startswith("REMOTE_CONFIG_INVALID"), unsealed
        save_remote(str(bare), Remote(url, "https", Credentials(token_file="/t")))
        shown = show_repository(db, "acme/widgets")
        assert shown["remote"]["url"] == url and shown["remote_url"] == url
        save_remote(str(bare), Remote(url + "-moved", "https", Credentials(token_file="/t")))
        shown = show_repository(db, "acme/widgets")
        [elsewhere] = shown["warnings"]
        assert elsewhere.startswith("REMOTE_CONFIG_INVALID") and "remote" not in shown
        assert verify_log(db).intact
    [payload] = [
        json.loads(text)
        for (text,) in rows(
            db_path, "SELECT payload_json FROM events WHERE event_type = 'REPOSITORY_REGISTERED'"
        )
    ]
    assert payload["remote_url"] == url
    connection = apsw.Connection(str(db_path))
    connection.execute("UPDATE governed_repositories SET remote_url = 'https://elsewhere/x.git'")
    connection.close()
    with Database(db_path) as db:
        assert not verify_log(db).intact
