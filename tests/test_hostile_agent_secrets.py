"""A hostile agent smuggling secrets, and bombing the scanner, through the server `serve` runs,
real git and a real governed repository.

Figures: 16 cases tried. 13 hostile proposals, each refused and leaving the repository byte for
byte as it was: 9 smuggle a secret (a private key added in one commit and removed in the next,
one in a commit message, an AWS key in the author field, a key in `logo.png` among binary
bytes, in `yarn.lock` and in `package-lock.json`, a key base64-encoded as `base64` wraps it,
hex-encoded in a JSON string, and one key under two paths in two commits) and are recorded with
the finding, then refused `SECRET_MATERIAL` at the write; 3 overrun the scan budget (a bundle
bomb, one 4 MiB blob under 10,000 paths; a proposal over the repository's `scan_max_bytes`, and
one over its `scan_max_seconds`, both set in the ledger) and are refused `SCAN_BUDGET_EXCEEDED`
at the upload, storing nothing; 1 goes to a repository whose git config still holds an
`aios-ledger.secretsBaseline` an older release read, and is refused
`REPOSITORY_SETTINGS_IN_GIT_CONFIG` before it is read. 3 controls are written: a clean
proposal, a secret allowlisted with detect-secrets' own `# pragma: allowlist secret`, and one
the repository's detect-secrets baseline, set in the ledger, knows.
"""

from __future__ import annotations

import base64
import hashlib
import json
import subprocess
import sys
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import httpx
import pytest
from aios_ledger.shell.db.connection import Database
from aios_ledger.shell.git.proposals import PROPOSALS_DIR_ENV, bundle_workspace
from aios_ledger.shell.git.runner import run_git
from aios_ledger.shell.git.workspace import Workspace
from aios_ledger.shell.log.verification import verify_log
from api_server import ApiServer, cli
from git_support import (
    CAPABILITY,
    REPOSITORY,
    assert_reflog_agrees,
    binding,
    events_of,
    git,
    governed_task,
    make_repository,
    prepare_workspace,
    ref,
    register,
    repository_files,
    runtime_result,
)
from hostile_support import AWS_KEY, PRIVATE_KEY, bundle_bomb, problem
from legacy_fixtures import rows


class Live:
    def __init__(self, server: ApiServer, bare: Path, base: str, proposals: Path) -> None:
        self.server, self.bare, self.base, self.proposals = server, bare, base, proposals


@pytest.fixture
def live(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Live]:
    proposals = tmp_path / "proposals"
    monkeypatch.setenv(PROPOSALS_DIR_ENV, str(proposals))
    db = tmp_path / "ledger.db"
    with ApiServer(db, role_tokens=True) as server:
        bare, base = make_repository(tmp_path)
        register(db, bare)
        yield Live(server, bare, base, proposals)
        with Database(db) as opened:
            assert verify_log(opened).intact
        assert_reflog_agrees(db, bare)


def _claimed_space(live: Live, task_id: str) -> tuple[dict[str, Any], Workspace]:
    governed_task(live.server.db, task_id, binding(task_id, live.base))
    answer = live.server.client("agent").post(
        "/v1/claims",
        json={"capabilities": [CAPABILITY], "lease_seconds": 300, "task_id": task_id},
    )
    assert answer.status_code == 200, answer.text
    claimed = dict(answer.json())
    with Database(live.server.db) as db:
        space = prepare_workspace(db, claimed, agent_id="agent-1")
    assert space is not None
    return claimed, space


def _commit(
    space: Workspace,
    files: Mapping[str, bytes | None],
    message: str = "agent work",
    env: Mapping[str, str] | None = None,
) -> None:
    """The agent's commit: `files` written (None: removed), with its own message and identity."""
    for name, data in files.items():
        target = Path(space.path, name)
        if data is None:
            target.unlink()
            continue
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(data)
    environment = {**space.environment(), **(env or {})}
    run_git(["add", "--all"], cwd=space.path, env=environment)
    run_git(["commit", "--quiet", "-m", message], cwd=space.path, env=environment)


def _bundle(live: Live, space: Workspace) -> bytes:
    out = Path(space.root, "proposal.bundle")
    assert bundle_workspace(space.path, live.base, author="agent-1", out=out)
    return out.read_bytes()


def _upload(live: Live, claimed: Mapping[str, Any], data: bytes) -> httpx.Response:
    body = {"lease_token": claimed["lease_token"], "bundle_base64": base64.b64encode(data).decode()}
    return live.server.client("agent").post(f"/v1/tasks/{claimed['task_id']}/proposal", json=body)


def _through_review(live: Live, claimed: Mapping[str, Any], proposal: Mapping[str, Any]) -> None:
    task_id = claimed["task_id"]
    result = runtime_result(claimed, list(proposal["changed_files"]))
    submitted = live.server.client("agent").post(
        f"/v1/tasks/{task_id}/result",
        json={"lease_token": claimed["lease_token"], "result": result, "idempotency_key": "s"},
    )
    assert submitted.status_code == 200, submitted.text
    verdict = {"decision": "SUCCEEDED", "reason": "reviewed", "idempotency_key": "v"}
    verified = live.server.client("reviewer").post(
        f"/v1/tasks/{task_id}/verification", json=verdict
    )
    assert verified.status_code == 200, verified.text


def _write(live: Live, task_id: str) -> httpx.Response:
    return live.server.client("owner").post(
        f"/v1/tasks/{task_id}/governed-write", json={"idempotency_key": f"write-{task_id}"}
    )


def _smuggled(live: Live, task_id: str, build: Any) -> list[dict[str, Any]]:
    """Claim `task_id`, let `build(space)` commit the agent's work, upload its bundle, take it
    through review and see the write refused `SECRET_MATERIAL` with the repository untouched.
    The scanner's findings."""
    claimed, space = _claimed_space(live, task_id)
    try:
        build(space)
        data = _bundle(live, space)
    finally:
        space.remove()
    uploaded = _upload(live, claimed, data)
    assert uploaded.status_code == 201, uploaded.text
    facts = uploaded.json()["facts"]
    assert facts["secret_material_exposed"] is True
    _through_review(live, claimed, uploaded.json())
    before = repository_files(live.bare)
    problem(_write(live, task_id), 409, "SECRET_MATERIAL")
    assert repository_files(live.bare) == before
    assert ref(live.bare, f"refs/heads/agent/{task_id}") is None
    return list(facts["secrets"])


def _kinds(found: list[dict[str, Any]]) -> set[tuple[str, str]]:
    return {(str(secret["path"]), str(secret["kind"])) for secret in found}


def test_a_key_added_then_removed_is_found_in_its_commit(live: Live) -> None:
    def build(space: Workspace) -> None:
        _commit(space, {"deploy/id_rsa": PRIVATE_KEY.encode()}, "add the deploy key")
        _commit(space, {"deploy/id_rsa": None}, "remove it again")

    found = _smuggled(live, "task-removed", build)
    assert _kinds(found) == {("deploy/id_rsa", "Private Key")}


def test_a_key_in_a_commit_message_is_found(live: Live) -> None:
    def build(space: Workspace) -> None:
        _commit(space, {"notes.txt": b"nothing here\n"}, f"the key, for later:\n\n{PRIVATE_KEY}")

    found = _smuggled(live, "task-message", build)
    head = git("--git-dir", str(live.bare), "rev-parse", "main")
    assert head == live.base  # nothing of the agent's reached the repository
    assert [secret["kind"] for secret in found] == ["Private Key"]
    assert str(found[0]["path"]).startswith("commit ")


def test_a_key_in_the_author_field_is_found(live: Live) -> None:
    def build(space: Workspace) -> None:
        _commit(space, {"notes.txt": b"hello\n"}, env={"GIT_AUTHOR_NAME": f"agent {AWS_KEY}"})

    found = _smuggled(live, "task-author", build)
    assert [secret["kind"] for secret in found] == ["AWS Access Key"]


@pytest.mark.parametrize("name", ["logo.png", "yarn.lock", "package-lock.json"])
def test_a_key_in_a_file_the_scanner_used_to_skip_by_name_is_found(live: Live, name: str) -> None:
    content = PRIVATE_KEY.encode()
    if name.endswith(".png"):
        content = b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR\x00\x01" + content + b"\x00\xff\xfe"

    def build(space: Workspace) -> None:
        _commit(space, {name: content})

    task_id = "task-" + name.replace(".", "-")
    assert _kinds(_smuggled(live, task_id, build)) == {(name, "Private Key")}


def test_keys_inside_base64_and_hex_blobs_are_found(live: Live) -> None:
    wrapped = base64.encodebytes(PRIVATE_KEY.encode() * 2)  # wrapped at 76, as `base64` does
    document = json.dumps({"blob": (AWS_KEY * 2).encode().hex()}).encode()

    def build(space: Workspace) -> None:
        _commit(space, {"assets/key.b64": wrapped, "assets/blob.json": document})

    found = _smuggled(live, "task-encoded", build)
    assert _kinds(found) == {
        ("assets/key.b64", "Private Key (encoded)"),
        ("assets/blob.json", "AWS Access Key (encoded)"),
    }


def _refused_upload(
    live: Live, claimed: Mapping[str, Any], data: bytes, code: str, status: int = 413
) -> None:
    """An upload refused with `code` that leaves nothing behind: no object or ref in the
    repository, no stored bundle, no event."""
    before = repository_files(live.bare)
    problem(_upload(live, claimed, data), status, code)
    assert repository_files(live.bare) == before
    assert not live.proposals.exists() or list(live.proposals.iterdir()) == []
    assert "PROPOSAL_RECORDED" not in events_of(live.server.db, str(claimed["task_id"]))


def test_a_bundle_bomb_is_refused_by_the_scan_budget_and_leaves_nothing(live: Live) -> None:
    claimed, space = _claimed_space(live, "task-bomb")
    try:
        git_dir, out = Path(space.path, ".git"), Path(space.root, "bomb.bundle")
        data = bundle_bomb(git_dir, live.base, out, paths=10000, blob_bytes=4 * 1024 * 1024)
    finally:
        space.remove()
    _refused_upload(live, claimed, data, "SCAN_BUDGET_EXCEEDED")


def settings(live: Live, key: str, *options: str) -> dict[str, Any]:
    """`aios-ledger repo settings` as the owner runs it, on the ledger the server serves."""
    db = str(live.server.db)
    return dict(
        json.loads(
            cli("--db", db, "repo", "settings", REPOSITORY, "--idempotency-key", key, *options)
        )
    )


def test_a_scan_over_the_repositorys_seconds_is_refused(live: Live) -> None:
    settings(live, "slow", "--scan-max-seconds", "0.000001")
    claimed, data = _one_commit(live, "task-slow")
    _refused_upload(live, claimed, data, "SCAN_BUDGET_EXCEEDED")


def _one_commit(live: Live, task_id: str) -> tuple[dict[str, Any], bytes]:
    claimed, space = _claimed_space(live, task_id)
    try:
        _commit(space, {"ok.txt": b"fine\n"})
        return claimed, _bundle(live, space)
    finally:
        space.remove()


def test_a_proposal_over_the_repositorys_bytes_is_refused(live: Live) -> None:
    settings(live, "bytes", "--scan-max-bytes", "100")
    claimed, data = _one_commit(live, "task-bytes")
    _refused_upload(live, claimed, data, "SCAN_BUDGET_EXCEEDED")


def test_a_baseline_left_in_the_git_config_refuses_the_proposal_and_names_the_command(
    live: Live,
) -> None:
    """Before 0.x migration 0013 this key allowlisted the baseline's secrets; the ledger no longer
    reads it, and says so rather than judge the proposal without what its owner set."""
    (live.bare / "secrets.baseline").write_text('{"results": {}}')
    git("--git-dir", str(live.bare), "config", "aios-ledger.secretsBaseline", "secrets.baseline")
    claimed, data = _one_commit(live, "task-baseline-git-config")
    _refused_upload(live, claimed, data, "REPOSITORY_SETTINGS_IN_GIT_CONFIG", 409)
    detail = _upload(live, claimed, data).json()["detail"]
    assert "aios-ledger.secretsbaseline" in detail
    assert f"--secrets-baseline {live.bare.resolve()}/secrets.baseline" in detail
    assert "config --remove-section aios-ledger" in detail


def test_one_key_under_two_paths_in_two_commits_is_found_under_both(live: Live) -> None:
    def build(space: Workspace) -> None:
        _commit(space, {"a/key.pem": PRIVATE_KEY.encode()})
        _commit(space, {"b/copy.pem": PRIVATE_KEY.encode()})

    found = _smuggled(live, "task-twice", build)
    assert _kinds(found) == {("a/key.pem", "Private Key"), ("b/copy.pem", "Private Key")}


def _written(live: Live, task_id: str, files: Mapping[str, bytes]) -> dict[str, Any]:
    claimed, space = _claimed_space(live, task_id)
    try:
        _commit(space, files)
        data = _bundle(live, space)
    finally:
        space.remove()
    uploaded = _upload(live, claimed, data)
    assert uploaded.status_code == 201, uploaded.text
    assert uploaded.json()["facts"]["secret_material_exposed"] is False
    _through_review(live, claimed, uploaded.json())
    written = _write(live, task_id)
    assert written.status_code == 200, written.text
    assert ref(live.bare, f"refs/heads/agent/{task_id}") == uploaded.json()["head_oid"]
    return dict(uploaded.json())


def test_a_clean_proposal_is_written(live: Live) -> None:
    files = {"src/widget.py": b"WIDGETS = 3\n", "yarn.lock": b"# none\n"}
    written = _written(live, "task-clean", files)
    assert written["facts"]["secrets_baseline_sha256"] is None


def test_a_secret_allowlisted_by_the_scanners_own_pragma_is_written(live: Live) -> None:
    line = f"TEST_KEY = '{AWS_KEY}'  # pragma: allowlist secret\n"
    _written(live, "task-pragma", {"tests/fixture.py": line.encode()})


def test_a_secret_the_repositorys_baseline_knows_is_written(live: Live, tmp_path: Path) -> None:
    fixture = f"TEST_KEY = '{AWS_KEY}'\n"
    scanned = tmp_path / "baseline-work"
    (scanned / "tests").mkdir(parents=True)
    (scanned / "tests" / "fixture.py").write_text(fixture)
    baseline = subprocess.run(
        [sys.executable, "-m", "detect_secrets", "scan", "--all-files"],
        cwd=scanned,
        capture_output=True,
        check=False,
    )
    assert baseline.returncode == 0, baseline.stderr
    assert "tests/fixture.py" in json.loads(baseline.stdout)["results"]
    baseline_file = tmp_path / "secrets.baseline"
    baseline_file.write_bytes(baseline.stdout)
    changed = settings(live, "baseline", "--secrets-baseline", str(baseline_file))
    assert changed["changed"] == ["secrets_baseline_sha256"]
    baseline_file.unlink()  # the ledger holds the baseline itself, not its path
    written = _written(live, "task-baseline", {"tests/fixture.py": fixture.encode()})
    # The allowlist this proposal was judged by is sealed with it, in its recorded event.
    digest = hashlib.sha256(baseline.stdout).hexdigest()
    assert written["facts"]["secrets_baseline_sha256"] == digest
    query = "SELECT payload_json FROM events WHERE event_type = ? AND task_id = ?"
    (payload,) = rows(live.server.db, query, ("PROPOSAL_RECORDED", "task-baseline"))[0]
    assert json.loads(payload)["facts"]["secrets_baseline_sha256"] == digest
