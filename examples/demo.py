"""`make demo`: the main job on the embedded SQLite default, told for a person.

Part one adopts a task the older runtime left behind and projects its governed envelope (with a
drifted request refused and a replay answered from the ledger). Part two is the main job: more
tasks are created and projected, a worker runs the example agent on each, a reviewer (an
auxiliary run over the task's evidence) asks for rework once and then accepts. Part three is
day two: a task the ledger judges itself fails on its only attempt, an operator retries it, and
its history tells the story. Part four governs a repository on a git server, as a forge would
serve it: `git http-backend` over http:// on loopback (examples/git_http_server.py, only Python
and git), reached through the ledger's mirror with a token; reviewed proposals land by the
ledger's push, or are refused. Then the whole event log is verified.
"""

from __future__ import annotations

import argparse
import json
import os
import secrets
import shutil
import sqlite3
import subprocess
import sys
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from aios_ledger.core import Actor, GovernedExecutionBinding, LedgerError, Timestamp
from aios_ledger.core.attest.accountability import who_did_what
from aios_ledger.core.projection import InitialExecutionProjectionRequest, ProjectionAnswer
from aios_ledger.shell.actors import acting_as
from aios_ledger.shell.attest.commits import verify_commit_attestation
from aios_ledger.shell.attest.keys import SigningKey, generate_key, read_verifier
from aios_ledger.shell.clock import AUTHORIZATION_ENV, system_clock
from aios_ledger.shell.console import history_view, render
from aios_ledger.shell.db.connection import Database, fetch_all
from aios_ledger.shell.db.statements import sql
from aios_ledger.shell.git.remotes import Credentials
from aios_ledger.shell.git.repos import add_remote_repository
from aios_ledger.shell.git.runner import run_git
from aios_ledger.shell.governed.writes import governed_write
from aios_ledger.shell.log.verification import verify_log
from aios_ledger.shell.projection.bindings import RegisteredBindingResolver, register_binding
from aios_ledger.shell.projection.store import InitialExecutionProjectionStore
from aios_ledger.shell.tasks.ledger import TaskLedger
from aios_ledger.shell.work.reviewer import review_submitted
from aios_ledger.shell.work.worker import TaskOutcome, Worker, WorkerConfig

OWNER = "owner-demo-authorization"
ADAPTER = "openclaw"
CAPABILITY = "agent.runtime.openclaw"
# Who judges: never the worker that wrote a result (the ledger refuses that as SELF_REVIEW).
REVIEWER = "demo-reviewer"
WORKER = "demo-worker"
# Who acts, as every event the demo writes names them: the owner creates, projects and writes;
# the worker and the reviewer act as themselves; an operator retries. Declared, as a program
# that embeds the ledger declares its users (only an API token proves who asks).
OWNER_ACTOR = Actor("demo-owner", "library")
OPERATOR_ACTOR = Actor("demo-operator", "library")
BASE = "4b825dc642cb6eb9a060e54bf8d69288fbee4904"
LEGACY_TASK = "task-release-notes"
NEW_TASKS = {
    "task-api-docs": "Document the new /v2/exports endpoint",
    "task-flaky-test": "Stabilise the flaky upload test",
}
RETRIED_TASK = "task-nightly-lint"
# An agent that fails while a marker file is absent, then succeeds: a flaky dependency.
FLAKY_AGENT = (
    'if [ -f {marker} ]; then echo \'{{"status": "SUCCEEDED", "summary": "lint clean"}}\'; '
    "else echo 'the linter could not reach its plugin server' >&2; touch {marker}; exit 3; fi"
)


def say(line: str = "") -> None:
    sys.stdout.write(line + "\n")
    sys.stdout.flush()


def older_runtime_creates_task(path: Path) -> None:
    """Write a task exactly as the older runtime did: stdlib sqlite3, no migrations."""
    created = Timestamp.from_datetime(system_clock()).text
    con = sqlite3.connect(path)
    try:
        con.executescript(sql("legacy_create_tables"))
        con.execute(
            sql("legacy_insert_task"),
            {
                "task_id": LEGACY_TASK,
                "goal": "Draft the release notes for 2.4",
                "instructions": "Summarise merged changes on the bound branch only.",
                "success_criteria_json": json.dumps([{"id": "notes", "description": "drafted"}]),
                "constraints_json": json.dumps({"production_write": False}),
                "priority": 10,
                "max_attempts": 3,
                "created_at": created,
            },
        )
        con.execute(sql("legacy_insert_event"), {"task_id": LEGACY_TASK, "created_at": created})
        con.commit()
    finally:
        con.close()


def binding_for(task_id: str) -> GovernedExecutionBinding:
    return GovernedExecutionBinding.from_mapping(
        {
            "task_id": task_id,
            "job_id": f"job-{task_id}",
            "repository": "acme/widgets",
            "base_oid": BASE,
            "expected_branch_oid": BASE,
            "target_branch": f"agent/{task_id}",
            "branch_mode": "CREATE_NEW",
            "generation": 1,
            "idempotency_key": f"binding-{task_id}",
        }
    )


def project(store: InitialExecutionProjectionStore, task_id: str) -> ProjectionAnswer:
    """What `aios-ledger project TASK --pin` does: the request pinned to the task and its
    binding as read, then applied (refused if the task changed in between)."""
    pinned = store.pin(task_id, adapter=ADAPTER)
    return store.project(task_id, pinned.request)


def part_one(path: Path) -> None:
    say("Part 1 - adopting the older runtime's task")
    older_runtime_creates_task(path)
    say(f"  The older runtime left {LEGACY_TASK} in {path}: no migrations, one TASK_CREATED.")
    with Database(path) as db:
        register_binding(db, binding_for(LEGACY_TASK).public())
    say("  Opened by aios-ledger: migrated in place, its event sealed; binding registered.")
    resolver = RegisteredBindingResolver(path)
    store = InitialExecutionProjectionStore(path, resolver)
    try:
        pinned = store.pin(LEGACY_TASK, adapter=ADAPTER)
        shown = pinned.authorized
        say(
            f"  The owner pins the projection to the task as read: {shown['repository']} at "
            f"{str(shown['base_oid'])[:12]}, branch {shown['target_branch']}, capability "
            f"{shown['capability']}, envelope {str(shown['execution_digest'])[7:19]}."
        )
        drifted = InitialExecutionProjectionRequest.from_mapping(
            {
                **pinned.request.public(),
                "expected_execution_digest": "sha256:" + "f" * 64,
                "idempotency_key": f"drifted-{LEGACY_TASK}",
            }
        )
        try:
            store.project(LEGACY_TASK, drifted)
            raise SystemExit("a drifted projection was accepted: this is a bug")
        except LedgerError as refused:
            say(f"  A request that expects another envelope is refused: {refused.code}.")
        first = store.project(LEGACY_TASK, pinned.request)
        again = store.project(LEGACY_TASK, pinned.request)
        say(
            f"  Projected at revision {first['revision']} (digest "
            f"{str(first['execution_digest'])[7:19]}); the same request again is a replay: "
            f"idempotent={again['idempotent']}."
        )
    finally:
        store.close()
        resolver.close()


def part_two(path: Path, examples: Path) -> None:
    say()
    say("Part 2 - the main job: governed work, reviewed, provable")
    ledger = TaskLedger(path)
    with Database(path) as db:
        for task_id, goal in NEW_TASKS.items():
            ledger.create_task(
                {
                    "task_id": task_id,
                    "goal": goal,
                    "instructions": "Work on the bound branch; report progress on stderr.",
                    "success_criteria": [{"id": "done", "description": goal}],
                    # A rework waits this long (plus jitter) before its next attempt.
                    "retry": {"base_seconds": 1, "max_seconds": 5},
                    # No worker may claim it before the owner's projection below lands.
                    "governed": True,
                },
                idempotency_key=f"create-{task_id}",
            )
            register_binding(db, binding_for(task_id).public())
    resolver = RegisteredBindingResolver(path)
    store = InitialExecutionProjectionStore(path, resolver)
    try:
        for task_id in NEW_TASKS:
            project(store, task_id)
    finally:
        store.close()
        resolver.close()
    say(
        f"  Created {len(NEW_TASKS)} more tasks governed (no worker may take one before its "
        "projection), each bound and projected by the owner."
    )
    agent = f"{sys.executable} {examples / 'agent.py'}"
    reviewer = f"{sys.executable} {examples / 'reviewer.py'}"
    for round_number in (1, 2):
        outcomes = run_worker(path, agent, capabilities=(CAPABILITY,))
        submitted = ", ".join(f"{o.task_id}@{o.attempt} {o.outcome}" for o in outcomes)
        say(f"  Round {round_number}: the worker ran examples/agent.py -> {submitted}")
        reviews = run_reviewer(path, reviewer)
        assert isinstance(reviews, list)
        for review in reviews:
            assert isinstance(review, dict)
            verdict = f"{review.get('decision')} -> {review.get('status')}"
            say(f"    review of {review['task_id']}: {verdict} ({review.get('reason')})")
        if round_number == 1:
            wait_for_backoff(ledger)
    ledger.close()


def part_three(path: Path) -> None:
    say()
    say("Part 3 - day two: a failed task retried, and its history")
    marker = path.parent / "plugin-server-is-back"
    with TaskLedger(path) as ledger:
        ledger.create_task(
            {
                "task_id": RETRIED_TASK,
                "goal": "Run the nightly lint",
                "instructions": "ruff check .",
                # The ledger judges results itself: SUCCEEDED is accepted, anything else fails.
                "verification": "auto",
                "max_attempts": 1,
            },
            idempotency_key=f"create-{RETRIED_TASK}",
        )
        run_worker(path, FLAKY_AGENT.format(marker=marker))
        say(f"  The worker's agent failed: the task is {ledger.get(RETRIED_TASK)['status']}.")
        with acting_as(OPERATOR_ACTOR):
            ledger.retry(
                RETRIED_TASK,
                reason="the plugin server is back",
                idempotency_key=f"retry-{RETRIED_TASK}",
            )
        say(f"  An operator retried it (one more attempt): {ledger.get(RETRIED_TASK)['status']}.")
        run_worker(path, FLAKY_AGENT.format(marker=marker))
        say(f"  The worker ran it again: {ledger.get(RETRIED_TASK)['status']}.")
        say(f"  aios-ledger task history {RETRIED_TASK}:")
        table = render(history_view(ledger.history(RETRIED_TASK)), width=180)
        for line in table.rstrip().splitlines():
            say(f"    {line}")


GADGETS = "acme/gadgets"
# The governed-write tasks: what each binds, what its agent is told, and what the write meets.
GADGET_TASKS = {
    "task-gadget-docs": ("agent/gadgets", "UPDATE_EXISTING", "Work on the bound branch."),
    "task-gadget-stale": ("agent/gadgets", "UPDATE_EXISTING", "Work on the bound branch."),
    "task-gadget-release": ("release/2.5", "CREATE_NEW", "Prepare the release branch."),
    "task-gadget-rewrite": ("agent/gadget-rewrite", "CREATE_NEW", "Start over: rewrite history."),
}

WRITE_STORIES = {
    "task-gadget-docs": "reviewed, then moved by git's compare-and-swap",
    "task-gadget-stale": "its expected tip is stale: the branch moved; the ledger recorded it",
    "task-gadget-release": "release/* is protected",
    "task-gadget-rewrite": "its history does not descend from the base: a force push",
}


def make_gadgets_repository(folder: Path) -> tuple[Path, str]:
    """A small bare repository: main with one commit, and the branch agents share."""
    bare, work = folder / "gadgets.git", folder / "gadgets-seed"
    owner = {
        "GIT_AUTHOR_NAME": "Gadget Owner",
        "GIT_AUTHOR_EMAIL": "owner@example.invalid",
        "GIT_COMMITTER_NAME": "Gadget Owner",
        "GIT_COMMITTER_EMAIL": "owner@example.invalid",
    }
    run_git(["init", "--quiet", "--bare", str(bare)])
    run_git(["init", "--quiet", str(work)])
    (work / "README.md").write_text("Gadgets: small, governed.\n")
    run_git(["add", "README.md"], cwd=work)
    run_git(["commit", "--quiet", "-m", "Gadgets, first commit"], cwd=work, env=owner)
    run_git(
        ["push", "--quiet", str(bare), "HEAD:refs/heads/main", "HEAD:refs/heads/agent/gadgets"],
        cwd=work,
    )
    base = run_git(["rev-parse", "HEAD"], cwd=work).text.strip()
    shutil.rmtree(work)
    return bare, base


def part_four(path: Path, examples: Path) -> None:
    say()
    say("Part 4 - governed writes: an agent's commits reach a repository only through the ledger")
    served = path.parent / "git-server"
    served.mkdir()
    bare, base = make_gadgets_repository(served)
    token_file = path.parent / "git-server.token"
    token_file.write_text(secrets.token_urlsafe(24) + "\n")
    token_file.chmod(0o600)
    with git_server(served, token_file) as port:
        url = f"http://127.0.0.1:{port}/{bare.name}"
        say(f"  A git server on loopback, as a forge would serve it: git http-backend at {url}")
        say("    (examples/git_http_server.py: Python and git only), answering one token alone.")
        with Database(path) as db:
            registered = add_remote_repository(
                db,
                GADGETS,
                url,
                str(path.parent / "mirrors" / "gadgets.git"),
                Credentials(token_file=str(token_file)),
            )
        say(f"  repo add {GADGETS} {url} --token-file {token_file.name}:")
        say(
            f"    mirrored by the ledger (branches {', '.join(registered['branches'])}), "
            f"protected {registered['protected']}; only the ledger holds the token."
        )
        governed_work_and_writes(path, examples, bare, base)


@contextmanager
def git_server(root: Path, token_file: Path) -> Iterator[int]:
    """examples/git_http_server.py serving the bare repositories under `root`, as the docs'
    walk-through runs it: its port, read from the line it prints once it listens."""
    script = Path(__file__).resolve().parent / "git_http_server.py"
    command = [sys.executable, str(script), str(root), "--token-file", str(token_file)]
    server = subprocess.Popen(command, stdout=subprocess.PIPE, text=True)
    try:
        assert server.stdout is not None
        serving = server.stdout.readline()
        if not serving.startswith("serving "):
            raise LedgerError("DEMO_GIT_SERVER_FAILED", f"{script.name} did not start")
        yield int(serving.rstrip().rstrip("/").rsplit(":", 1)[1])
    finally:
        server.terminate()
        server.wait()


def governed_work_and_writes(path: Path, examples: Path, bare: Path, base: str) -> None:
    """Part four's tasks on the served repository: worked, reviewed, then written through the
    ledger's push; `bare` is the server's own copy, which a reader checks afterwards."""
    ledger = TaskLedger(path)
    with Database(path) as db:
        for task_id, (branch, mode, instructions) in GADGET_TASKS.items():
            ledger.create_task(
                {
                    "task_id": task_id,
                    "goal": f"Document the gadgets ({task_id})",
                    "instructions": instructions,
                    "success_criteria": [{"id": "done", "description": "gadgets documented"}],
                    "retry": {"base_seconds": 1, "max_seconds": 5},
                    "governed": True,
                },
                idempotency_key=f"create-{task_id}",
            )
            bound = {
                **binding_for(task_id).public(),
                "repository": GADGETS,
                "base_oid": base,
                "expected_branch_oid": base,
                "target_branch": branch,
                "branch_mode": mode,
            }
            register_binding(db, bound)
    resolver = RegisteredBindingResolver(path)
    store = InitialExecutionProjectionStore(path, resolver)
    try:
        for task_id in GADGET_TASKS:
            project(store, task_id)
    finally:
        store.close()
        resolver.close()
    say(f"  {len(GADGET_TASKS)} tasks bound to {GADGETS} at {base[:12]} and projected.")
    agent = f"{sys.executable} {examples / 'agent.py'}"
    reviewer = f"{sys.executable} {examples / 'reviewer.py'}"
    for round_number in (1, 2):
        outcomes = run_worker(path, agent, capabilities=(CAPABILITY,))
        say(
            f"  Round {round_number}: each agent worked in a fresh workspace and committed there; "
            f"{len(outcomes)} proposals recorded."
        )
        reviews = run_reviewer(path, reviewer)
        assert isinstance(reviews, list)
        verdicts = sorted({f"{r.get('decision')}" for r in reviews if isinstance(r, dict)})
        say(f"    the reviewer judged them: {', '.join(verdicts)}")
        if round_number == 1:
            wait_for_backoff(ledger)
    ledger.close()
    signing, public_file = attestation_key(path.parent)
    say(
        "  The owner runs the governed writes "
        f"(aios-ledger write TASK_ID --attest-key {signing_file_name}):"
    )
    attested: list[str] = []
    with Database(path) as db:
        for task_id, why in WRITE_STORIES.items():
            try:
                answer = governed_write(
                    db, {"task_id": task_id, "idempotency_key": f"w-{task_id}"}, attest_key=signing
                )
            except LedgerError as refused:
                say(f"    {task_id}: refused {refused.code} ({why})")
                continue
            files = ", ".join(answer["changed_files"])
            moved = f"{answer['old_oid'][:8]}..{answer['new_oid'][:8]}"
            say(f"    {task_id}: {answer['state']} {answer['ref']} {moved} ({files}; {why})")
            attestation = answer.get("attestation")
            if attestation is not None and attestation["attested"]:
                attested.append(answer["new_oid"])
                say(
                    f"      attested: SLSA provenance + review summary, key {attestation['keyid']},"
                    " a note under refs/notes/aios-attestations"
                )
    listing = [
        "--git-dir",
        str(bare),
        "for-each-ref",
        "--format=%(refname) %(objectname:short)",
        "refs/heads/",
    ]
    say(f"  {GADGETS} on the server now: " + "; ".join(run_git(listing).text.splitlines()))
    for commit in attested:
        checked = verify_commit_attestation(str(bare), commit, read_verifier(str(public_file)))
        say(
            f"  A reader checks {commit[:12]} from the server's repository alone, with the "
            "public key: "
            f"intact, review {checked['verification_result']}"
        )
        ATTESTED_COMMANDS.append(
            f".venv/bin/aios-ledger verify-attestation {commit} --repo {bare} --key {public_file}"
        )
        ATTESTED_COMMANDS.append(f".venv/bin/aios-ledger --db {path} why {commit}")


signing_file_name = "ledger.key"
ATTESTED_COMMANDS: list[str] = []


def attestation_key(folder: Path) -> tuple[SigningKey, Path]:
    """The ledger's signing key for the demo, written beside its database (a real deployment
    keeps it in a file or a systemd credential of its own), and its public verifier key."""
    signing = generate_key("aios-ledger-demo")
    (folder / signing_file_name).write_text(signing.signer_text() + "\n")
    (folder / signing_file_name).chmod(0o600)
    public = folder / "ledger.pub"
    public.write_text(signing.verifier_text() + "\n")
    return signing, public


def run_worker(
    path: Path, command: str, *, capabilities: tuple[str, ...] = ()
) -> list[TaskOutcome]:
    """One worker run of `command` over every task it can claim, until none is left."""
    worker = Worker(
        path,
        WorkerConfig(
            agent_id=WORKER,
            capabilities=capabilities,
            command=command,
            lease_seconds=30,
            timeout=60,
            until_empty=True,
        ),
    )
    try:
        with acting_as(Actor(WORKER, "library")):
            worker.run()
    finally:
        worker.close()
    return worker.outcomes


def run_reviewer(path: Path, command: str) -> list[Any]:
    """One round of the reviewer over every submitted task, acting as the reviewer."""
    with acting_as(Actor(REVIEWER, "library")):
        reviews = review_submitted(path, command, reviewer=REVIEWER)["reviews"]
    assert isinstance(reviews, list)
    return reviews


def wait_for_backoff(ledger: TaskLedger) -> None:
    """Reworked tasks come back after their backoff (`not_before`): no claim takes them earlier."""
    due = [task["not_before"] for task in ledger.list_tasks("QUEUED") if task["not_before"]]
    if not due:
        return
    latest = Timestamp.parse(max(due))
    seconds = max(0.0, (latest.epoch_ms - Timestamp.from_datetime(system_clock()).epoch_ms) / 1000)
    say(
        f"  The reworked tasks wait for their backoff: the last is due at {latest} ({seconds:.1f}s)"
    )
    time.sleep(seconds + 0.05)


def timelines(path: Path) -> None:
    say()
    say("Timelines")
    ledger = TaskLedger(path)
    try:
        for task_id in (LEGACY_TASK, *NEW_TASKS, *GADGET_TASKS):
            task = ledger.get(task_id)
            say(f"  {task_id}: {task['status']} after {task['attempt']} attempt(s)")
            for event in ledger.events(task_id):
                payload = event["payload"] if isinstance(event["payload"], dict) else {}
                detail = (
                    payload.get("decision")
                    or payload.get("reason")
                    or payload.get("code")
                    or payload.get("state")
                    or ""
                )
                agent = event["agent_id"] or ""
                at = str(event["created_at"])[11:19]
                say(f"    {at}  {event['event_type']:<46} {agent:<12} {detail}")
    finally:
        ledger.close()


def accountability(path: Path) -> None:
    """For each task, who created, projected, held, verified and wrote it (or was refused), read
    back from its sealed events (`core/attest/accountability.py`)."""
    say()
    say("Who did what (from each task's sealed events)")
    with TaskLedger(path) as ledger:
        for task_id in (LEGACY_TASK, *NEW_TASKS, RETRIED_TASK, *GADGET_TASKS):
            record = who_did_what(task_id, ledger.events(task_id))
            say(f"  {task_id}")
            say(f"    created by    {record['created_by']}")
            if record["projected_by"] is not None:
                say(f"    projected by  {record['projected_by']}")
            say(f"    held by       {'; '.join(record['held_by']) or 'nobody'}")
            say(f"    verified      {'; '.join(record['verified_by']) or 'not yet'}")
            for written in record["written"]:
                say(f"    written       {written}")
            for refused in record["refused"]:
                say(f"    refused       {refused}")


def verification(path: Path) -> bool:
    with Database(path) as db:
        report = verify_log(db)
        statuses = db.read(lambda conn: fetch_all(conn, "status_counts"))
    say()
    counts = ", ".join(f"{row['status']} {row['tasks']}" for row in statuses)
    say(f"Tasks: {counts}")
    say(
        f"Event log: {report.events} events, {report.sealed} sealed "
        f"({report.sealed_at_adoption} at adoption); intact={report.intact}; "
        f"head {report.head.digest[7:23]}"
    )
    return report.intact


def default_examples() -> Path:
    return Path(__file__).resolve().parent


DATABASE = "aios-ledger.db"


def fresh_directory(folder: Path) -> None:
    """An empty `folder` for this run: an earlier demo's folder (it holds the demo's database)
    is removed first, so that `make demo` can run again; anything else is left alone."""
    if folder.is_dir() and any(folder.iterdir()) and not (folder / DATABASE).is_file():
        raise LedgerError(
            "DEMO_DIR_NOT_EMPTY",
            f"{folder} holds files that are not an earlier demo's: "
            "pass --dir a new folder (or an earlier demo's) instead",
        )
    if folder.is_dir():
        shutil.rmtree(folder)
    elif folder.exists():
        raise LedgerError("DEMO_DIR_NOT_EMPTY", f"{folder} is a file: pass --dir a new folder")
    folder.mkdir(parents=True)


def run(argv: Sequence[str]) -> int:
    parser = argparse.ArgumentParser(prog="aios-ledger-demo")
    parser.add_argument("--dir", type=Path, default=Path("demo-ledger"))
    parser.add_argument("--examples", type=Path, default=None)
    args = parser.parse_args(argv)
    # Absolute from here on: git runs in other directories (a seed clone, the workspaces), and
    # a path relative to where the demo started means nothing there.
    folder = args.dir.resolve()
    examples = (args.examples or default_examples()).resolve()
    fresh_directory(folder)
    path = folder / DATABASE
    os.environ[AUTHORIZATION_ENV] = OWNER
    say("aios-ledger demo")
    say("================")
    with acting_as(OWNER_ACTOR):
        part_one(path)
        part_two(path, examples)
        part_three(path)
        part_four(path, examples)
    timelines(path)
    accountability(path)
    intact = verification(path)
    say()
    say(f"Look closer: .venv/bin/aios-ledger --db {path} status")
    say(f"             .venv/bin/aios-ledger --db {path} verify")
    for command in ATTESTED_COMMANDS:
        say(f"             {command}")
    return 0 if intact else 1


def main() -> int:
    try:
        return run(sys.argv[1:])
    except LedgerError as refused:
        sys.stderr.write(f"{refused}\n")
        return 1


if __name__ == "__main__":
    raise SystemExit(main())
