"""Governed writes to remote repositories through real servers on loopback: sshd whose key may
only run git-shell, and nginx in front of git http-backend with basic authentication
(tests/git_servers.py). A write lands (CREATE_NEW and UPDATE_EXISTING) through the ledger's
mirror; a branch moved on the server after review is MOVED_BY_OTHER and the server untouched;
the server's own refusal is NOT_APPLIED with its message; a wrong host key, key or token is
refused with its own code before anything is pushed; a write cut off mid-push is recovered
from the remote's refs; and the credential appears nowhere but its file."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from aios_ledger.core import LedgerError
from aios_ledger.core.proofs import VerifierKey
from aios_ledger.shell.attest.commits import (
    attestation_row,
    verify_remote_attestation,
    why_commit,
)
from aios_ledger.shell.attest.keys import generate_key
from aios_ledger.shell.db.connection import Database
from aios_ledger.shell.git import remotes
from aios_ledger.shell.git.proposals import PROPOSALS_DIR_ENV
from aios_ledger.shell.git.remotes import Credentials
from aios_ledger.shell.git.repos import add_remote_repository
from aios_ledger.shell.git.workspace import GitWorkspaces
from aios_ledger.shell.governed.writes import governed_write, recover_writes
from aios_ledger.shell.log.verification import verify_log
from cli_runner import run_cli
from conftest import ENGINES, HTTP_TOKEN
from git_servers import HttpServer, SshServer, pushes, serve
from git_support import (
    AGENT,
    REPOSITORY,
    binding,
    branch_refs,
    claim,
    commit_on,
    edit,
    events_of,
    git,
    governed_task,
    make_repository,
    propose,
    ref,
    repository_files,
    runtime_result,
    submit_and_accept,
    verified_proposal,
)
from legacy_fixtures import rows

# Each test takes its server through `served` (a parameter), which conftest cannot see among
# its fixtures: the module says it starts git servers itself.
pytestmark = pytest.mark.git_servers

on_both_engines = pytest.mark.parametrize("engine", ENGINES)
NOTES_REF = "refs/notes/aios-attestations"
ROOT = Path(__file__).resolve().parents[1]


class Served:
    """A bare repository on a git server, and the ledger that governs it through a mirror."""

    def __init__(
        self, root: Path, target: Path | str, server: SshServer | HttpServer, refused: str | None
    ) -> None:
        self.root = root
        self.db: Any = target
        self.server = server
        self.bare, self.base = make_repository(root / "served")
        serve(self.bare, refused)
        self.mirror = root / "ledger-state" / "widgets.git"

    @property
    def url(self) -> str:
        return self.server.url(self.bare)

    def credentials(self) -> Credentials:
        if isinstance(self.server, SshServer):
            return Credentials(
                ssh_key=str(self.server.client_key), known_hosts=str(self.server.known_hosts)
            )
        token_file = self.root / "credentials" / "token"
        token_file.parent.mkdir(exist_ok=True)
        token_file.write_text(self.server.token + "\n")
        token_file.chmod(0o600)
        return Credentials(token_file=str(token_file))

    def secrets(self) -> list[str]:
        """What must appear nowhere but the credential file: the token, or the private key."""
        if isinstance(self.server, SshServer):
            body = self.server.client_key.read_text().splitlines()[1:-1]
            return [line for line in body if len(line) > 20]
        return [HTTP_TOKEN]

    def register(self, credentials: Credentials | None = None) -> dict[str, Any]:
        with Database(self.db) as db:
            return add_remote_repository(
                db, REPOSITORY, self.url, str(self.mirror), credentials or self.credentials()
            )

    def write(self, task_id: str, key: str, **options: Any) -> dict[str, Any]:
        with Database(self.db) as db:
            return dict(governed_write(db, {"task_id": task_id, "idempotency_key": key}, **options))

    def refused(self, task_id: str, key: str) -> LedgerError:
        with pytest.raises(LedgerError) as refused:
            self.write(task_id, key)
        return refused.value


def _served(
    request: pytest.FixtureRequest, tmp_path: Path, target: Path | str, refused: str | None
) -> Served:
    protocol = getattr(request, "param", "ssh")
    server = request.getfixturevalue(f"{protocol}_git_server")
    return Served(tmp_path, target, server, refused)


@pytest.fixture(params=["ssh", "http"])
def served(
    request: pytest.FixtureRequest,
    tmp_path: Path,
    ledger_target: Path | str,
    monkeypatch: pytest.MonkeyPatch,
) -> Iterator[Served]:
    monkeypatch.setenv(PROPOSALS_DIR_ENV, str(tmp_path / "proposals"))
    found = _served(request, tmp_path, ledger_target, "agent/refused")
    yield found
    with Database(found.db) as db:
        report = verify_log(db)
    assert report.intact, report.public()


def recorded_note(served: Served, key: str) -> str:
    """The note the ledger recorded for write `key`, as git shows it."""
    with Database(served.db) as db:
        row = db.read(lambda conn: attestation_row(conn, key))
    assert row is not None
    return row.note_json


def intents(db: Path | str) -> int:
    return sum(
        1 for task in ("task-a", "task-w") for e in events_of(db, task) if e.endswith("INTENDED")
    )


# ---------------------------------------------------------------------------------------------
# the way that lands


@on_both_engines
def test_repo_add_reads_the_remote_and_a_write_lands_through_the_mirror(served: Served) -> None:
    added = served.register()
    assert added["remote"]["url"] == served.url and added["remote_url"] == served.url
    assert added["remote"]["default_branch"] == "main" and added["branches"] == ["main"]
    assert added["head_branch"] == "main" and "main" in added["protected"]
    assert added["path"] == str(served.mirror)
    proposal = verified_proposal(
        served.db, "task-a", binding("task-a", served.base), {"src/widget.py": "print(1)\n"}
    )
    key = generate_key("ledger.test")
    answer = served.write("task-a", "write-a", attest_key=key)
    assert answer["state"] == "APPLIED" and answer["old_oid"] == "0" * 40
    assert ref(served.bare, "refs/heads/agent/task-a") == proposal["head_oid"]
    assert ref(served.mirror, "refs/heads/agent/task-a") == proposal["head_oid"]
    # The attestation's note went to the remote in the branch's own push, as it was recorded.
    assert answer["attestation"]["attested"], answer["attestation"]
    assert answer["attestation"]["reason"] is None
    assert pushes(served.bare) == [["refs/heads/agent/task-a", NOTES_REF]]
    notes = ["notes", "--ref", NOTES_REF, "show", answer["new_oid"]]
    assert git("--git-dir", str(served.bare), *notes) == git(
        "--git-dir", str(served.mirror), *notes
    )
    assert git("--git-dir", str(served.bare), *notes) == recorded_note(served, "write-a")
    # `why` says where the write went: the URL sealed with the repository.
    with Database(served.db) as db:
        [why] = why_commit(db, answer["new_oid"])["writes"]
    assert why["repository_url"] == served.url
    # A reader checks it against the remote itself, with the credential `repo add` takes.
    verifier = VerifierKey.parse(key.verifier_text())
    checked = verify_remote_attestation(served.url, "agent/task-a", verifier, served.credentials())
    assert checked["intact"] and checked["commit"] == answer["new_oid"]
    assert checked["source_levels"] == ["SLSA_SOURCE_LEVEL_1"]
    assert checked["source_summary"]["predicate"]["resourceUri"] == f"git+{served.url}"
    assert checked["source_provenance"]["predicate"]["repoUri"] == served.url
    # The command line reads that credential from the config file's `[remote]`, as `repo add`.
    credentials = served.credentials()
    config = served.root / "verify.toml"
    config.write_text(
        "[remote]\n"
        + "".join(
            f'{name} = "{getattr(credentials, name)}"\n'
            for name in ("ssh_key", "known_hosts", "token_file")
            if getattr(credentials, name) is not None
        )
    )
    public = key.verifier_text()
    command = ("verify-attestation", "agent/task-a", "--repo", served.url, "--key", public)
    verified = run_cli("--config", config, *command)
    assert verified.returncode == 0, verified.stderr
    assert json.loads(verified.stdout)["commit"] == answer["new_oid"]
    # UPDATE_EXISTING: the branch moves on from the tip the ledger wrote.
    tip = proposal["head_oid"]
    second = binding(
        "task-b",
        tip,
        target_branch="agent/task-a",
        expected_branch_oid=tip,
        branch_mode="UPDATE_EXISTING",
        generation=2,
    )
    verified_proposal(served.db, "task-b", second, {"b.txt": "2\n"})
    updated = served.write("task-b", "write-b")
    assert updated["old_oid"] == tip and updated["state"] == "APPLIED"
    assert ref(served.bare, "refs/heads/agent/task-a") == updated["new_oid"]
    assert ref(served.bare, "refs/heads/main") == served.base


def test_repo_add_on_the_command_line_says_what_it_found(served: Served, tmp_path: Path) -> None:
    db = tmp_path / "cli.db"
    assert run_cli("--db", db, "init").returncode == 0
    credentials = served.credentials()
    options = [
        f"--{name.replace('_', '-')}={path}"
        for name, path in (
            ("ssh_key", credentials.ssh_key),
            ("known_hosts", credentials.known_hosts),
            ("token_file", credentials.token_file),
        )
        if path is not None
    ]
    added = run_cli("--db", db, "repo", "add", REPOSITORY, served.url, *options)
    assert added.returncode == 0, added.stderr
    answer = json.loads(added.stdout)
    assert answer["remote"]["default_branch"] == "main"
    assert answer["path"] == os.path.join(f"{db}.mirrors", "acme--widgets.git")
    for secret in served.secrets():
        assert secret not in added.stdout + added.stderr
    shown = run_cli("--db", db, "repo", "show", REPOSITORY)
    assert json.loads(shown.stdout)["remote"]["url"] == served.url


def test_repo_add_takes_the_credential_from_the_config_file(served: Served, tmp_path: Path) -> None:
    """`[remote]` in the config file, its paths relative to the file's folder."""
    credentials = served.credentials()
    lines = ['[database]\npath = "cli.db"\n[remote]\nmirrors = "mirrors"\n']
    for name in ("ssh_key", "known_hosts", "token_file"):
        path = getattr(credentials, name)
        if path is not None:
            lines.append(f'{name} = "{os.path.relpath(path, tmp_path)}"\n')
    config = tmp_path / "aios-ledger.toml"
    config.write_text("".join(lines))
    assert run_cli("--config", config, "init").returncode == 0
    added = run_cli("--config", config, "repo", "add", REPOSITORY, served.url)
    assert added.returncode == 0, added.stderr
    assert json.loads(added.stdout)["path"] == str(tmp_path / "mirrors" / "acme--widgets.git")
    # A name the ledger governs already is refused, and leaves no second mirror behind.
    assert (
        run_cli("--config", config, "repo", "add", "acme/local", str(served.bare)).returncode == 0
    )
    refused = run_cli("--config", config, "repo", "add", "acme/local", served.url)
    assert refused.stderr.startswith("REPOSITORY_CONFLICT"), refused.stderr
    assert sorted(os.listdir(tmp_path / "mirrors")) == ["acme--widgets.git"]


# ---------------------------------------------------------------------------------------------
# the remote's compare-and-swap refuses


@on_both_engines
def test_a_branch_created_on_the_server_after_review_is_moved_by_other(served: Served) -> None:
    served.register()
    verified_proposal(served.db, "task-a", binding("task-a", served.base), {"a.txt": "1\n"})
    other = commit_on(served.bare, "other", served.base, {"other.txt": "theirs\n"})
    git("--git-dir", str(served.bare), "update-ref", "refs/heads/agent/task-a", other)
    before = repository_files(served.bare)
    refused = served.refused("task-a", "write-a")
    assert refused.code == "BRANCH_EXISTS", refused
    assert repository_files(served.bare) == before
    assert "GOVERNED_WRITE_MOVED_BY_OTHER" in events_of(served.db, "task-a")


def test_a_branch_moved_on_the_server_after_review_is_moved_by_other(served: Served) -> None:
    git("--git-dir", str(served.bare), "update-ref", "refs/heads/agent/moving", served.base)
    served.register()
    bound = binding(
        "task-a", served.base, target_branch="agent/moving", branch_mode="UPDATE_EXISTING"
    )
    verified_proposal(served.db, "task-a", bound, {"a.txt": "1\n"})
    other = commit_on(served.bare, "other", served.base, {"other.txt": "theirs\n"})
    git("--git-dir", str(served.bare), "update-ref", "refs/heads/agent/moving", other)
    before = repository_files(served.bare)
    assert served.refused("task-a", "write-a").code == "BRANCH_MOVED"
    assert repository_files(served.bare) == before


def test_the_servers_own_refusal_is_not_applied_with_its_message(served: Served) -> None:
    served.register()
    bound = binding("task-a", served.base, target_branch="agent/refused")
    verified_proposal(served.db, "task-a", bound, {"a.txt": "1\n"})
    with pytest.raises(LedgerError) as caught:
        served.write("task-a", "write-a", attest_key=generate_key("ledger.test"))
    refused = caught.value
    assert refused.code == "REMOTE_PUSH_REFUSED", refused
    assert "server protection: agent/refused takes no pushes" in refused.detail
    assert ref(served.bare, "refs/heads/agent/refused") is None
    # The note came in the same push, and was refused with the branch.
    assert pushes(served.bare) == [["refs/heads/agent/refused", NOTES_REF]]
    assert ref(served.bare, NOTES_REF) is None and ref(served.mirror, NOTES_REF) is None
    assert "GOVERNED_WRITE_NOT_APPLIED" in events_of(served.db, "task-a")
    # The same key answers the recorded outcome again.
    assert served.refused("task-a", "write-a").code == "REMOTE_PUSH_REFUSED"


def _note_on_the_server(served: Served, text: str) -> str:
    """Another writer's note on the server's main, moving its notes ref; the new notes tip."""
    bare = str(served.bare)
    add = ["notes", "--ref", NOTES_REF, "add", "--force", "-m", text, served.base]
    git("-c", "user.name=other", "-c", "user.email=other@example.com", "--git-dir", bare, *add)
    moved = ref(served.bare, NOTES_REF)
    assert moved is not None
    return moved


def test_a_notes_ref_moved_on_the_server_meanwhile_gets_the_note_appended(
    served: Served, monkeypatch: pytest.MonkeyPatch
) -> None:
    served.register()
    _note_on_the_server(served, "first, before the mirror was fetched")
    proposal = verified_proposal(
        served.db, "task-a", binding("task-a", served.base), {"a.txt": "1\n"}
    )
    real_push = remotes.push_refs
    moved: list[str] = []

    def after_another_writer(*args: Any) -> Any:
        if not moved:  # between the mirror's fetch and the push
            moved.append(_note_on_the_server(served, "theirs, pushed meanwhile"))
        return real_push(*args)

    monkeypatch.setattr(remotes, "push_refs", after_another_writer)
    answer = served.write("task-a", "write-a", attest_key=generate_key("ledger.test"))
    assert answer["state"] == "APPLIED" and answer["attestation"]["attested"]
    assert ref(served.bare, "refs/heads/agent/task-a") == proposal["head_oid"]
    # The first push was refused whole for the stale notes lease, the second took both.
    assert pushes(served.bare) == [["refs/heads/agent/task-a", NOTES_REF]]
    tip = ref(served.bare, NOTES_REF)
    assert git("--git-dir", str(served.bare), "rev-parse", f"{tip}^") == moved[0]
    shown = ["--git-dir", str(served.bare), "notes", "--ref", NOTES_REF, "show"]
    assert git(*shown, served.base) == "theirs, pushed meanwhile"
    assert git(*shown, answer["new_oid"]) == recorded_note(served, "write-a")
    assert ref(served.mirror, NOTES_REF) == tip


def test_a_notes_ref_moving_under_every_push_refuses_the_write_whole(
    served: Served, monkeypatch: pytest.MonkeyPatch
) -> None:
    served.register()
    verified_proposal(served.db, "task-a", binding("task-a", served.base), {"a.txt": "1\n"})
    real_push = remotes.push_refs
    tips: list[str] = []

    def always_another_writer(*args: Any) -> Any:
        tips.append(_note_on_the_server(served, f"theirs {len(tips)}"))
        return real_push(*args)

    monkeypatch.setattr(remotes, "push_refs", always_another_writer)
    with pytest.raises(LedgerError) as caught:
        served.write("task-a", "write-a", attest_key=generate_key("ledger.test"))
    assert caught.value.code == "REMOTE_NOTES_MOVED", caught.value
    assert len(tips) == remotes.NOTE_PUSH_ATTEMPTS
    assert ref(served.bare, "refs/heads/agent/task-a") is None
    assert ref(served.bare, NOTES_REF) == tips[-1]
    assert pushes(served.bare) == []  # each refused by its lease before the server's hook
    assert "GOVERNED_WRITE_NOT_APPLIED" in events_of(served.db, "task-a")


# ---------------------------------------------------------------------------------------------
# credentials refused before anything is pushed


def _refused_before_the_push(served: Served, code: str) -> None:
    before = branch_refs(served.bare)
    refused = served.refused("task-a", "write-a")
    assert refused.code == code, refused
    assert branch_refs(served.bare) == before
    assert not any(e.startswith("GOVERNED_WRITE_INTENDED") for e in events_of(served.db, "task-a"))


@pytest.fixture
def over_ssh(
    tmp_path: Path,
    ssh_git_server: SshServer,
    monkeypatch: pytest.MonkeyPatch,
) -> Served:
    monkeypatch.setenv(PROPOSALS_DIR_ENV, str(tmp_path / "proposals"))
    return Served(tmp_path, tmp_path / "ledger.db", ssh_git_server, None)


@pytest.fixture
def over_http(
    tmp_path: Path, http_git_server: HttpServer, monkeypatch: pytest.MonkeyPatch
) -> Served:
    monkeypatch.setenv(PROPOSALS_DIR_ENV, str(tmp_path / "proposals"))
    return Served(tmp_path, tmp_path / "ledger.db", http_git_server, None)


def test_an_unknown_or_changed_host_key_is_refused(over_ssh: Served, tmp_path: Path) -> None:
    served = over_ssh
    assert isinstance(served.server, SshServer)
    empty = tmp_path / "empty_known_hosts"
    empty.write_text("")
    unknown = Credentials(ssh_key=str(served.server.client_key), known_hosts=str(empty))
    with pytest.raises(LedgerError) as refused:
        served.register(unknown)
    assert refused.value.code == "REMOTE_HOST_KEY_REFUSED"
    served.register()
    verified_proposal(served.db, "task-a", binding("task-a", served.base), {"a.txt": "1\n"})
    # The server now shows another host key than the one pinned.
    impostor = tmp_path / "impostor"
    git_keygen = ["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(impostor)]
    assert os.spawnvp(os.P_WAIT, git_keygen[0], git_keygen) == 0
    pinned = Path(served.server.known_hosts)
    pinned.write_text(
        f"[127.0.0.1]:{served.server.port} {impostor.with_suffix('.pub').read_text()}"
    )
    _refused_before_the_push(served, "REMOTE_HOST_KEY_REFUSED")


def test_a_key_the_server_does_not_know_is_refused(over_ssh: Served, tmp_path: Path) -> None:
    served = over_ssh
    served.register()
    verified_proposal(served.db, "task-a", binding("task-a", served.base), {"a.txt": "1\n"})
    assert isinstance(served.server, SshServer)
    stranger = tmp_path / "stranger"
    keygen = ["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(stranger)]
    assert os.spawnvp(os.P_WAIT, keygen[0], keygen) == 0
    Path(served.server.client_key).write_bytes(stranger.read_bytes())
    _refused_before_the_push(served, "REMOTE_AUTH_REFUSED")


def test_a_wrong_token_is_refused(over_http: Served, tmp_path: Path) -> None:
    served = over_http
    wrong = tmp_path / "wrong-token"
    wrong.write_text("not-the-token\n")
    with pytest.raises(LedgerError) as refused:
        served.register(Credentials(token_file=str(wrong)))
    assert refused.value.code == "REMOTE_AUTH_REFUSED"
    assert "not-the-token" not in str(refused.value)
    served.register()
    verified_proposal(served.db, "task-a", binding("task-a", served.base), {"a.txt": "1\n"})
    (tmp_path / "credentials" / "token").write_text("revoked-token\n")
    _refused_before_the_push(served, "REMOTE_AUTH_REFUSED")


def test_a_mirror_that_names_another_remote_than_the_sealed_one_is_refused(
    over_http: Served,
) -> None:
    served = over_http
    served.register()
    verified_proposal(served.db, "task-a", binding("task-a", served.base), {"a.txt": "1\n"})
    kept = served.mirror / "aios-remote.json"
    document = json.loads(kept.read_text())
    kept.write_text(json.dumps({**document, "url": served.url.replace("widgets", "elsewhere")}))
    _refused_before_the_push(served, "REMOTE_CONFIG_INVALID")


# ---------------------------------------------------------------------------------------------
# a write cut off mid-push


@on_both_engines
@pytest.mark.parametrize(
    ("mode", "state"), [("kill-before-swap", "NOT_APPLIED"), ("kill-after-swap", "APPLIED")]
)
def test_a_write_process_killed_at_the_push_is_settled_from_the_remotes_refs(
    served: Served, mode: str, state: str
) -> None:
    served.register()
    proposal = verified_proposal(
        served.db, "task-a", binding("task-a", served.base), {"a.txt": "1\n"}
    )
    key = generate_key("ledger.test")
    key_file = served.root / "attest.key"
    key_file.write_text(key.signer_text() + "\n")
    child = subprocess.Popen(
        [
            sys.executable,
            str(ROOT / "tests" / "git_write_process.py"),
            str(served.db),
            "task-a",
            "write-a",
            mode,
        ],
        stdout=subprocess.PIPE,
        text=True,
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT), "AIOS_TEST_ATTEST_KEY": str(key_file)},
    )
    out, _ = child.communicate(timeout=120)
    assert child.returncode == -signal.SIGKILL and out == ""
    landed = proposal["head_oid"] if state == "APPLIED" else None
    assert ref(served.bare, "refs/heads/agent/task-a") == landed
    # The branch and its note moved together, or neither did.
    notes_tip = ref(served.bare, NOTES_REF)
    assert (notes_tip is not None) == (landed is not None)
    with Database(served.db) as db:
        [recovered] = recover_writes(db)
    assert recovered["state"] == state and recovered["observed_oid"] == landed
    events = events_of(served.db, "task-a")
    assert events.count("GOVERNED_WRITE_INTENDED") == 1
    assert events.count(f"GOVERNED_WRITE_{state}") == 1
    if landed is not None:
        # The same write again attests it with the note the remote holds, not a second one.
        again = served.write("task-a", "write-a", attest_key=key)
        assert again["attestation"]["attested"], again["attestation"]
        assert ref(served.bare, NOTES_REF) == notes_tip
        shown = ["--git-dir", str(served.bare), "notes", "--ref", NOTES_REF, "show", landed]
        assert git(*shown) == recorded_note(served, "write-a")


@on_both_engines
def test_a_write_whose_server_went_down_at_the_push_stays_intended_until_it_is_back(
    served: Served, monkeypatch: pytest.MonkeyPatch
) -> None:
    served.register()
    verified_proposal(served.db, "task-a", binding("task-a", served.base), {"a.txt": "1\n"})
    real_push = remotes.push_write

    def server_down(*args: Any, **kwargs: Any) -> Any:
        served.server.daemon.stop()
        return real_push(*args, **kwargs)

    monkeypatch.setattr(remotes, "push_write", server_down)
    assert served.refused("task-a", "write-a").code == "REMOTE_UNREACHABLE"
    monkeypatch.setattr(remotes, "push_write", real_push)
    with Database(served.db) as db, pytest.raises(LedgerError) as unread:
        recover_writes(db)
    assert unread.value.code == "REMOTE_UNREACHABLE"
    events = events_of(served.db, "task-a")
    assert "GOVERNED_WRITE_INTENDED" in events and "GOVERNED_WRITE_NOT_APPLIED" not in events
    served.server.daemon.start()
    # Back: the same write reads the remote's ref, where the push never arrived.
    assert served.refused("task-a", "write-a").code == "WRITE_NOT_APPLIED"
    assert ref(served.bare, "refs/heads/agent/task-a") is None
    assert "GOVERNED_WRITE_NOT_APPLIED" in events_of(served.db, "task-a")


# ---------------------------------------------------------------------------------------------
# the credential stays in its file


def _files_holding(root: Path, secrets: list[str], *, but: set[Path]) -> list[str]:
    found = []
    for path in root.rglob("*"):
        if path.is_file() and path not in but:
            data = path.read_bytes()
            found += [f"{path}" for secret in secrets if secret.encode() in data]
    return found


def _as_systemd_credential(served: Served, monkeypatch: pytest.MonkeyPatch) -> Credentials:
    """The served credential moved into a unit's `$CREDENTIALS_DIRECTORY`, named there."""
    folder = served.root / "run-credentials"
    folder.mkdir(mode=0o700)
    monkeypatch.setenv("CREDENTIALS_DIRECTORY", str(folder))
    given = served.credentials()
    if given.ssh_key is not None:
        (folder / "git-key").write_bytes(Path(given.ssh_key).read_bytes())
        (folder / "git-key").chmod(0o400)
        return Credentials(key_credential="git-key", known_hosts=given.known_hosts)
    assert given.token_file is not None
    (folder / "git-token").write_bytes(Path(given.token_file).read_bytes())
    return Credentials(token_credential="git-token")


@pytest.mark.parametrize("source", ["file", "systemd-credential"])
def test_the_credential_appears_nowhere_but_its_file(
    served: Served,
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
    monkeypatch: pytest.MonkeyPatch,
    source: str,
) -> None:
    credentials = (
        _as_systemd_credential(served, monkeypatch) if source == "systemd-credential" else None
    )
    answers: list[Any] = [served.register(credentials)]
    governed_task(served.db, "task-w", binding("task-w", served.base))
    claimed = claim(served.db, "task-w")
    space = GitWorkspaces(served.db).prepare(claimed, AGENT)
    assert space is not None
    try:
        # The agent's workspace comes from the mirror and knows no remote.
        assert git("remote", cwd=space.path) == ""
        assert not (Path(space.root) / "work" / ".git" / "aios-remote.json").exists()
        environment = json.dumps(space.environment())
        workspace_files = _files_holding(Path(space.root), served.secrets(), but=set())
        edit(space, {"a.txt": "1\n"})
        answers.append(propose(served.db, space, claimed))
    finally:
        space.remove()
    submit_and_accept(served.db, claimed, runtime_result(claimed, ["a.txt"]))
    answers.append(served.write("task-w", "write-w", attest_key=generate_key("ledger.test")))
    with Database(served.db) as db:
        answers.append(recover_writes(db))
    events = json.dumps([list(row) for row in rows(served.db, "SELECT * FROM events")])
    shown = json.dumps(answers, default=str)
    credential_files = {
        Path(path)
        for path in (served.credentials().token_file, served.credentials().ssh_key)
        if path is not None
    }
    if credentials is not None:
        credential_files |= set((tmp_path / "run-credentials").iterdir())
        # The mirror names the credential, never the unit's folder it was found in.
        kept = (served.mirror / "aios-remote.json").read_text()
        assert "run-credentials" not in kept and '"git-' in kept
    for secret in served.secrets():
        assert secret not in environment
        assert secret not in events
        assert secret not in shown
        assert secret not in caplog.text
    assert workspace_files == []
    # The ledger's side: its mirror, its ledger file and bundles hold no credential either.
    ledger_side = [served.mirror, tmp_path / "proposals"]
    if isinstance(served.db, Path):
        ledger_side.append(served.db.parent)
    for folder in ledger_side:
        held = _files_holding(folder, served.secrets(), but=credential_files)
        assert [path for path in held if "/sshd/" not in path and "/nginx/" not in path] == []
    assert ref(served.bare, "refs/heads/agent/task-w") is not None


def test_a_self_hosted_forge_over_https_is_trusted_through_its_ca_bundle(
    tmp_path: Path, https_git_server: HttpServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(PROPOSALS_DIR_ENV, str(tmp_path / "proposals"))
    served = Served(tmp_path, tmp_path / "ledger.db", https_git_server, None)
    assert served.url.startswith("https://")
    with pytest.raises(LedgerError) as refused:
        served.register()
    assert refused.value.code == "REMOTE_CERTIFICATE_REFUSED", refused.value
    assert not served.mirror.exists()
    token = served.credentials()
    assert https_git_server.certificate is not None
    pinned = Credentials(token_file=token.token_file, ca_bundle=str(https_git_server.certificate))
    assert served.register(pinned)["remote"]["default_branch"] == "main"
    proposal = verified_proposal(
        served.db, "task-a", binding("task-a", served.base), {"a.txt": "1\n"}
    )
    assert served.write("task-a", "write-a")["state"] == "APPLIED"
    assert ref(served.bare, "refs/heads/agent/task-a") == proposal["head_oid"]
