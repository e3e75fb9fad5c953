"""Refused attempts are part of the record: a governed write refused by any of its checks, on a
real repository through the command line's `main(argv)`, is one sealed GOVERNED_WRITE_REFUSED
naming the code, the message, what was attempted and who tried; the log verifies; the same key
replays the refusal without a second event, another request under it is an idempotency
conflict; the writer lease is never taken. A refused projection of a task is recorded the same
way and a later correct projection still lands. The task's console page, `why` and the task's
history show them."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from aios_ledger.core import InitialExecutionProjectionError, LedgerError, TaskRow, sha256_hex
from aios_ledger.core.actors import Actor
from aios_ledger.core.envelopes import project_execution_envelope
from aios_ledger.core.projection import InitialExecutionProjectionRequest
from aios_ledger.core.projection.decisions import runtime_input_of
from aios_ledger.shell.actors import ACTOR_ENV, acting_as
from aios_ledger.shell.api.tokens import issue_token
from aios_ledger.shell.attest.commits import why_commit
from aios_ledger.shell.cli import main
from aios_ledger.shell.clock import AUTHORIZATION_ENV
from aios_ledger.shell.db.connection import Database, fetch_one
from aios_ledger.shell.git.proposals import PROPOSALS_DIR_ENV
from aios_ledger.shell.governed import writes
from aios_ledger.shell.governed.writes import governed_write, recover_writes
from aios_ledger.shell.log.verification import verify_log
from aios_ledger.shell.projection.bindings import RegisteredBindingResolver
from aios_ledger.shell.projection.store import InitialExecutionProjectionStore
from aios_ledger.shell.tasks.ledger import TaskLedger
from conftest import ENGINES, is_postgres
from git_support import (
    ADAPTER,
    CAPABILITY,
    OWNER,
    REPOSITORY,
    assert_reflog_agrees,
    binding,
    bound_task,
    claim,
    edit,
    git,
    governed_task,
    make_repository,
    propose,
    register,
    runtime_result,
    submit_and_accept,
    verified_proposal,
    workspace,
)
from legacy_fixtures import rows

TRIER = "alice-owner"
REFUSED = "GOVERNED_WRITE_REFUSED"
PRIVATE_KEY = (
    "-----BEGIN RSA PRIVATE KEY-----\n"
    "MIIEowIBAAKCAQEA0Z3VS5JJcds3xfn/ygWyF8PbnGy0AHB7MhgHcTz6sE2I2yPB\n"
    "-----END RSA PRIVATE KEY-----\n"
)


class Repo:
    def __init__(self, root: Path, target: Path | str) -> None:
        self.root = root
        self.db: Any = target
        self.bare, self.base = make_repository(root)


@pytest.fixture
def repo(
    tmp_path: Path, ledger_target: Path | str, monkeypatch: pytest.MonkeyPatch
) -> Iterator[Repo]:
    monkeypatch.setenv(PROPOSALS_DIR_ENV, str(tmp_path / "proposals"))
    monkeypatch.setenv(ACTOR_ENV, TRIER)
    found = Repo(tmp_path, ledger_target)
    yield found
    if is_postgres(found.db) or found.db.exists():
        with Database(found.db) as db:
            report = verify_log(db)
        assert report.intact, report.public()
        assert_reflog_agrees(found.db, found.bare)


def cli_write(
    repo: Repo, task_id: str, key: str, capsys: pytest.CaptureFixture[str]
) -> tuple[int, str]:
    """`aios-ledger --db DB write TASK --json FILE --lease-wait 0`: its exit code and the line
    it wrote to stderr (a refusal's `CODE: message`)."""
    request = repo.root / f"{key}.json"
    request.write_text(json.dumps({"idempotency_key": key}))
    capsys.readouterr()
    status = main(
        ["--db", str(repo.db), "write", task_id, "--json", str(request), "--lease-wait", "0"]
    )
    return status, capsys.readouterr().err.strip()


def task_events(repo: Repo, task_id: str) -> list[tuple[str, dict[str, Any], dict[str, Any]]]:
    found = rows(
        repo.db,
        "SELECT event_type, payload_json, actor FROM events WHERE task_id = ? ORDER BY event_id",
        (task_id,),
    )
    return [
        (str(kind), json.loads(payload), json.loads(actor) if actor else {})
        for kind, payload, actor in found
    ]


# Each scenario readies a task whose governed write is refused with its code, and names the
# target branch the task is bound to.


def protected(repo: Repo) -> tuple[str, str]:
    register(repo.db, repo.bare, ["main", "agent/locked/*"])
    bound = binding("task-p", repo.base, target_branch="agent/locked/x")
    verified_proposal(repo.db, "task-p", bound, {"a.txt": "1\n"})
    return "task-p", "agent/locked/x"


def not_a_descendant(repo: Repo) -> tuple[str, str]:
    register(repo.db, repo.bare)
    governed_task(repo.db, "task-f", binding("task-f", repo.base))
    claimed = claim(repo.db, "task-f")
    space = workspace(repo.db, claimed)
    try:
        git("checkout", "--quiet", "--orphan", "rewritten", cwd=space.path)
        git("branch", "-D", "agent/task-f", cwd=space.path)
        edit(space, {"README.md": "history rewritten\n"})
        proposal = propose(repo.db, space, claimed)
    finally:
        space.remove()
    assert proposal is not None
    submit_and_accept(repo.db, claimed, runtime_result(claimed, proposal["changed_files"]))
    return "task-f", "agent/task-f"


def secret_material(repo: Repo) -> tuple[str, str]:
    register(repo.db, repo.bare)
    bound = binding("task-k", repo.base)
    verified_proposal(repo.db, "task-k", bound, {"deploy/id_rsa": PRIVATE_KEY, "ok.txt": "1\n"})
    return "task-k", "agent/task-k"


def generation_stale(repo: Repo) -> tuple[str, str]:
    register(repo.db, repo.bare)
    newer = binding("task-n", repo.base, target_branch="agent/gen", generation=3)
    verified_proposal(repo.db, "task-n", newer, {"a.txt": "new\n"})
    with Database(repo.db) as db:
        tip = governed_write(db, {"task_id": "task-n", "idempotency_key": "write-n"})["new_oid"]
    older = binding(
        "task-o",
        tip,
        target_branch="agent/gen",
        expected_branch_oid=tip,
        branch_mode="UPDATE_EXISTING",
        generation=2,
    )
    verified_proposal(repo.db, "task-o", older, {"b.txt": "old\n"})
    return "task-o", "agent/gen"


class Crash(Exception):
    """The writer dies between its intent and git's swap (as the crash tests' SIGKILL)."""


def lease_held(repo: Repo) -> tuple[str, str]:
    """Another write of the branch is in doubt (intended, never swapped): its lease is held."""
    register(repo.db, repo.bare)
    verified_proposal(repo.db, "task-c", binding("task-c", repo.base), {"c.txt": "1\n"})
    bound = binding("task-d", repo.base, target_branch="agent/task-c")
    verified_proposal(repo.db, "task-d", bound, {"d.txt": "1\n"})

    def crash(repository_path: str, ref: str, new: str, old: str, key: str) -> bool:
        raise Crash

    original = writes.move_ref
    writes.move_ref = crash
    try:
        with Database(repo.db) as db, pytest.raises(Crash):
            governed_write(db, {"task_id": "task-c", "idempotency_key": "write-c"})
    finally:
        writes.move_ref = original
    return "task-d", "agent/task-c"


def ambiguous_name(repo: Repo) -> tuple[str, str]:
    """A tag of the repository goes by the bound branch's name: git would warn, so the ledger
    refuses the name."""
    register(repo.db, repo.bare)
    verified_proposal(repo.db, "task-a", binding("task-a", repo.base), {"a.txt": "1\n"})
    git("--git-dir", str(repo.bare), "update-ref", "refs/tags/agent/task-a", repo.base)
    return "task-a", "agent/task-a"


def not_verified(repo: Repo) -> tuple[str, str]:
    register(repo.db, repo.bare)
    governed_task(repo.db, "task-u", binding("task-u", repo.base))
    return "task-u", "agent/task-u"


SCENARIOS: dict[str, Callable[[Repo], tuple[str, str]]] = {
    "PROTECTED_REF": protected,
    "NOT_A_DESCENDANT": not_a_descendant,
    "SECRET_MATERIAL": secret_material,
    "GENERATION_STALE": generation_stale,
    "WRITER_LEASE_HELD": lease_held,
    "REF_NAME_INVALID": ambiguous_name,
    "TASK_NOT_VERIFIED": not_verified,
}
# On both engines: the refusal recorded beside a write in doubt, and one refused by its facts.
BOTH = {"PROTECTED_REF", "WRITER_LEASE_HELD"}


@pytest.mark.parametrize(
    ("code", "engine"),
    [
        (code, engine)
        for code in SCENARIOS
        for engine in ENGINES
        if engine == "sqlite" or code in BOTH
    ],
)
def test_a_refused_write_is_one_sealed_event_and_its_key_replays_it(
    repo: Repo, code: str, engine: str, capsys: pytest.CaptureFixture[str]
) -> None:
    task_id, branch = SCENARIOS[code](repo)
    leases = rows(repo.db, "SELECT * FROM writer_leases ORDER BY lease_id")
    before = task_events(repo, task_id)

    status, said = cli_write(repo, task_id, "write-refused", capsys)
    assert status == 1 and said.startswith(f"{code}: "), said
    message = said.removeprefix(f"{code}: ")
    recorded = task_events(repo, task_id)
    assert recorded[: len(before)] == before
    assert [kind for kind, _, _ in recorded[len(before) :]] == [REFUSED]
    _, payload, actor = recorded[-1]
    proposal = None if code == "TASK_NOT_VERIFIED" else f"{task_id}#1"
    assert payload == {
        "code": code,
        "message": message,
        "idempotency_key": "write-refused",
        "repository": REPOSITORY,
        "branch": branch,
        "ref": f"refs/heads/{branch}",
        "generation": payload["generation"],
        "proposal_id": proposal,
        "head_oid": payload["head_oid"],
    }
    assert (actor["name"], actor["via"]) == (TRIER, "cli")
    # A refusal never takes the writer lease (nor frees the one another write holds).
    assert rows(repo.db, "SELECT * FROM writer_leases ORDER BY lease_id") == leases
    with Database(repo.db) as db:
        assert verify_log(db).intact
        recover_writes(db)  # the write in doubt, if any, settled: the lease is free now

    # The same key replays the refusal, even where the check would pass now: no second event.
    assert cli_write(repo, task_id, "write-refused", capsys) == (1, said)
    assert task_events(repo, task_id) == recorded
    # Another request under the key is a conflict, and is not recorded either.
    other = (
        "task-n"
        if code == "GENERATION_STALE"
        else "task-c"
        if code == "WRITER_LEASE_HELD"
        else task_id
    )
    if other != task_id:
        status, said = cli_write(repo, other, "write-refused", capsys)
        assert status == 1 and said.startswith("IDEMPOTENCY_CONFLICT: "), said
        assert REFUSED not in [kind for kind, _, _ in task_events(repo, other)]


def test_bad_input_and_an_unknown_task_are_refused_without_a_trace(
    repo: Repo, capsys: pytest.CaptureFixture[str]
) -> None:
    register(repo.db, repo.bare)
    governed_task(repo.db, "task-u", binding("task-u", repo.base))
    count = rows(repo.db, "SELECT count(*) FROM events")
    status, said = cli_write(repo, "task-missing", "write-x", capsys)
    assert status == 1 and said.startswith("TASK_NOT_FOUND: ")
    with Database(repo.db) as db, pytest.raises(LedgerError) as refused:
        governed_write(db, {"task_id": "task-u", "idempotency_key": "not a key"})
    assert refused.value.code == "FIELDS_INVALID"
    assert rows(repo.db, "SELECT count(*) FROM events") == count


def test_the_write_refused_then_landed_shows_its_refusal_in_why_history_and_console(
    repo: Repo, capsys: pytest.CaptureFixture[str]
) -> None:
    register(repo.db, repo.bare)
    governed_task(repo.db, "task-w", binding("task-w", repo.base))
    status, said = cli_write(repo, "task-w", "too-early", capsys)
    assert status == 1 and said.startswith("TASK_NOT_VERIFIED: ")
    claimed = claim(repo.db, "task-w")
    space = workspace(repo.db, claimed)
    try:
        edit(space, {"w.txt": "1\n"})
        propose(repo.db, space, claimed)
    finally:
        space.remove()
    submit_and_accept(repo.db, claimed, runtime_result(claimed, ["w.txt"]))
    with Database(repo.db) as db:
        landed = governed_write(db, {"task_id": "task-w", "idempotency_key": "in-time"})
        why = why_commit(db, landed["new_oid"])
    [refused] = why["writes"][0]["refused"]
    assert (refused["code"], refused["idempotency_key"]) == ("TASK_NOT_VERIFIED", "too-early")
    assert refused["message"] == said.removeprefix("TASK_NOT_VERIFIED: ")
    assert refused["actor"] is not None and refused["actor"]["name"] == TRIER
    assert refused["attempted"]["ref"] == "refs/heads/agent/task-w"

    ledger = TaskLedger(repo.db)
    try:
        history = ledger.history("task-w")
    finally:
        ledger.close()
    entry = next(e for e in history if e["event"] == REFUSED)
    assert entry["reason"] == said and entry["next_state"] is None

    page = console_task_page(repo.db, "task-w")
    section = page[page.index('id="refusals-heading"') :]
    section = section[: section.index("</section>")]
    assert "TASK_NOT_VERIFIED" in section and TRIER in section and "too-early" in section
    assert "refs/heads/agent/task-w" in section


def console_task_page(db_target: Path | str, task_id: str) -> str:
    """The task's console page, as an auditor signed in sees it (the ASGI app, in process)."""
    from aios_ledger.shell.api.backend import ApiSettings
    from aios_ledger.shell.serve.app import served_app
    from starlette.testclient import TestClient

    with Database(db_target) as db:
        token = issue_token(db, "auditor-1", ["auditor"])["token"]
    with TestClient(
        served_app(ApiSettings(db_path=str(db_target))), base_url="https://testserver"
    ) as client:
        signed = client.post("/sign-in", data={"token": token}, follow_redirects=False)
        assert signed.status_code == 303, signed.text
        page = client.get(f"/tasks/{task_id}")
        assert page.status_code == 200, page.text
        return page.text


# ---------------------------------------------------------------------------------------------
# projections


def projection(task: TaskRow, job_id: str, digest: str, **changes: Any) -> Any:
    return InitialExecutionProjectionRequest.from_mapping(
        {
            "expected_status": "QUEUED",
            "expected_revision": 1,
            "expected_attempt": 0,
            "expected_metadata_sha256": sha256_hex(task.metadata()),
            "expected_required_capabilities_sha256": sha256_hex(task.required_capabilities()),
            "expected_job_id": job_id,
            "expected_execution_digest": digest,
            "required_capability": CAPABILITY,
            "adapter": ADAPTER,
            "authorization_id": OWNER,
            "idempotency_key": "projection-1",
            "reason": "governed work on widgets",
            **changes,
        }
    )


def test_refused_projections_are_recorded_and_a_correct_one_still_lands(
    repo: Repo, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(AUTHORIZATION_ENV, OWNER)
    bound = binding("task-j", repo.base)
    bound_task(repo.db, "task-j", bound)
    with Database(repo.db) as db:
        row = db.read(lambda conn: fetch_one(conn, "get_task", {"task_id": "task-j"}))
    assert row is not None
    task = TaskRow.from_row(row)
    resolver = RegisteredBindingResolver(repo.db)
    envelope = resolver("task-j", bound.job_id, CAPABILITY, ADAPTER, runtime_input_of(task))
    digest = str(envelope["execution_digest"])
    store = InitialExecutionProjectionStore(repo.db, resolver)
    # The binding drifted: the envelope resolved is bound to another job of the task.
    other = project_execution_envelope(
        binding("task-j", repo.base, job_id="job-other"),
        {
            name: envelope[name]
            for name in ("action", "adapter", "capability_scope", "runtime_input")
        },
    )
    drifted = InitialExecutionProjectionStore(repo.db, lambda *_args: other)
    mallory = Actor("mallory", "library")
    attempts: list[tuple[Actor, Any, Any, str]] = [
        (
            mallory,
            store,
            projection(task, bound.job_id, digest, authorization_id="guess"),
            "AUTHORIZATION_DENIED",
        ),
        (
            Actor(TRIER, "cli"),
            drifted,
            projection(task, bound.job_id, digest, idempotency_key="projection-2"),
            "GOVERNED_BINDING_CONFLICT",
        ),
        (
            Actor(TRIER, "cli"),
            store,
            projection(task, bound.job_id, "sha256:" + "f" * 64, idempotency_key="projection-3"),
            "EXECUTION_DIGEST_DRIFT",
        ),
    ]
    try:
        for actor, used, request, code in attempts:
            for _ in range(2):  # the second time, a replay of the refusal
                with acting_as(actor), pytest.raises(InitialExecutionProjectionError) as refused:
                    used.project("task-j", request)
                assert refused.value.code == code, str(refused.value)
        recorded = task_events(repo, "task-j")
        assert [kind for kind, _, _ in recorded] == [
            "TASK_CREATED",
            *["TASK_INITIAL_EXECUTION_PROJECTION_REFUSED"] * 3,
        ]
        for (actor, _, request, code), (_, payload, named) in zip(
            attempts, recorded[1:], strict=True
        ):
            assert (payload["code"], payload["idempotency_key"]) == (code, request.idempotency_key)
            assert named["name"] == actor.name
            assert "authorization_id" not in payload  # a guess of the owner's id is never kept
        assert rows(repo.db, "SELECT revision FROM tasks WHERE task_id = 'task-j'") == [(1,)]
        # The correct projection lands over the refusals: the task is untouched by them.
        answer = store.project(
            "task-j", projection(task, bound.job_id, digest, idempotency_key="projection-4")
        )
        assert (answer["revision"], answer["idempotent"]) == (2, False)
    finally:
        store.close()
        drifted.close()
        resolver.close()
    with Database(repo.db) as db:
        assert verify_log(db).intact
