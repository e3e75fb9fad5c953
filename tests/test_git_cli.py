"""The governed-write commands as an owner types them: repo add|list|show, propose, proposals,
write, write-recover (JSON on stdout, `CODE: detail` on stderr, exit 1 on a refusal)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from aios_ledger.shell.git.proposals import bundle_workspace
from cli_runner import CliResult, run_cli
from git_support import (
    binding,
    claim,
    edit,
    governed_task,
    make_repository,
    ref,
    runtime_result,
    submit_and_accept,
    workspace,
)


def cli(db: Path, *argv: str) -> CliResult:
    return run_cli("--db", db, *argv)


def ok(db: Path, *argv: str) -> Any:
    done = cli(db, *argv)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def refused(db: Path, *argv: str) -> str:
    done = cli(db, *argv)
    assert done.returncode == 1, (done.stdout, done.stderr)
    return done.stderr.split(":", 1)[0]


def test_an_owner_registers_a_repository_and_writes_a_proposal(tmp_path: Path) -> None:
    db = tmp_path / "ledger.db"
    bare, base = make_repository(tmp_path)
    ok(db, "init")
    added = ok(db, "repo", "add", "acme/widgets", str(bare), "--protected", "hotfix/*")
    assert added["protected"] == ["main", "master", "release/*", "hotfix/*"]
    assert added["idempotent"] is False
    assert ok(db, "repo", "add", "acme/widgets", str(bare), "--protected", "hotfix/*")["idempotent"]
    assert refused(db, "repo", "add", "acme/widgets", str(bare)) == "REPOSITORY_CONFLICT"
    assert refused(db, "repo", "add", "acme/other", str(tmp_path)) == "REPOSITORY_NOT_BARE"
    assert refused(db, "repo", "add", "not a name", str(bare)) == "FIELDS_INVALID"
    assert [r["name"] for r in ok(db, "repo", "list")] == ["acme/widgets"]
    assert ok(db, "repo", "show", "acme/widgets")["head_branch"] == "main"
    assert refused(db, "repo", "show", "acme/none") == "REPOSITORY_NOT_FOUND"

    governed_task(db, "task-cli", binding("task-cli", base))
    claimed = claim(db, "task-cli")
    space = workspace(db, claimed)
    try:
        edit(space, {"cli.txt": "from the command line\n"})
        bundle = tmp_path / "proposal.bundle"
        assert bundle_workspace(space.path, base, author="agent-7", out=bundle)
    finally:
        space.remove()
    request = tmp_path / "propose.json"
    request.write_text(
        json.dumps(
            {"task_id": "task-cli", "lease_token": claimed["lease_token"], "bundle": str(bundle)}
        )
    )
    proposal = ok(db, "propose", "--json", str(request))
    assert proposal["changed_files"] == ["cli.txt"]
    assert [p["head_oid"] for p in ok(db, "proposals", "task-cli")] == [proposal["head_oid"]]
    write = tmp_path / "write.json"
    write.write_text(json.dumps({"idempotency_key": "cli-write"}))
    assert refused(db, "write", "task-cli", "--json", str(write)) == "TASK_NOT_VERIFIED"
    submit_and_accept(db, claimed, runtime_result(claimed, ["cli.txt"]))
    # The refused key replays its refusal (recorded once); the verified task's write takes a
    # new one.
    assert refused(db, "write", "task-cli", "--json", str(write)) == "TASK_NOT_VERIFIED"
    write.write_text(json.dumps({"idempotency_key": "cli-write-verified"}))
    answer = ok(db, "write", "task-cli", "--json", str(write))
    assert answer["state"] == "APPLIED"
    assert ref(bare, "refs/heads/agent/task-cli") == proposal["head_oid"]
    assert ok(db, "write-recover") == []
