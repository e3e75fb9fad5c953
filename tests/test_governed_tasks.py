"""A task created governed is no worker's until its initial execution projection lands (issue
36, part 4): the claim's candidate statement leaves it out and the core refuses it, through the
command line, the API, the library and every other write; the projection's preconditions are
those of the seed; and the hold shows in the task, its list, `status` and the console.
"""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from aios_ledger.core import LedgerError, LogTail, chain_of, project_execution_envelope
from aios_ledger.core.actors import Actor
from aios_ledger.core.log.rows import RowWrite, row_digest
from aios_ledger.core.log.state import held_row_problem, stored_row_state
from aios_ledger.core.projection import InitialExecutionProjectionRequest
from aios_ledger.core.sealed_tables import SEALED_TABLES
from aios_ledger.core.tasks.decisions import TaskState
from aios_ledger.core.tasks.operations import decide_claim, decide_task
from aios_ledger.core.tasks.records import TaskRow
from aios_ledger.core.tasks.requests import (
    ClaimBatchRequest,
    ClaimRequest,
    PauseRequest,
    ResumeRequest,
)
from aios_ledger.core.timestamps import Timestamp
from aios_ledger.shell import (
    AUTHORIZATION_ENV,
    Database,
    InitialExecutionProjectionStore,
    TaskLedger,
    verify_log,
)
from aios_ledger.shell.api.app import create_app
from aios_ledger.shell.api.backend import ApiSettings
from aios_ledger.shell.api.tokens import issue_token
from aios_ledger.shell.cli import main
from aios_ledger.shell.db.connection import fetch_all
from aios_ledger.shell.serve.app import served_app
from conftest import both_engines
from legacy_fixtures import (
    CAPABILITY,
    CONSTRAINTS,
    CRITERIA,
    GOAL,
    INSTRUCTIONS,
    OWNER,
    TASK,
    binding,
    projection_mapping,
)

# Who the decisions here act as.
ACTOR = Actor("tester", "library")

pytest_generate_tests = both_engines

PROJECTED = "TASK_INITIAL_EXECUTION_PROJECTION_AUTHORIZED"
# What a worker offering every capability there is offers: the runtime's, and more.
EVERY_CAPABILITY = [CAPABILITY, "git.read", "git.write", "shell.exec", "net.http"]
LEASE = 600
NOW = Timestamp.parse("2026-08-20T00:00:00Z")


@pytest.fixture(autouse=True)
def owner(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(AUTHORIZATION_ENV, OWNER)


def governed_task(task_id: str = TASK, **more: Any) -> dict[str, Any]:
    """A task whose runtime input is the one `legacy_fixtures`' envelopes carry (for its id)."""
    return {
        "task_id": task_id,
        "goal": GOAL,
        "instructions": INSTRUCTIONS,
        "success_criteria": CRITERIA,
        "constraints": CONSTRAINTS,
        "governed": True,
        **more,
    }


def envelope_for(task_id: str) -> dict[str, Any]:
    """The runtime envelope of `task_id`'s own binding (the fixtures' binding, renamed)."""
    bound = binding(
        task_id=task_id,
        job_id=f"job-{task_id}",
        target_branch=f"agent/{task_id}",
        idempotency_key=f"binding-{task_id}",
    )
    return project_execution_envelope(
        bound,
        {
            "action": "agent_runtime",
            "adapter": "openclaw",
            "capability_scope": [CAPABILITY],
            "runtime_input": {
                "goal": GOAL,
                "instructions": INSTRUCTIONS,
                "success_criteria": CRITERIA,
                "constraints": CONSTRAINTS,
                "scope": {"scope_type": "legacy", "tenant_id": None, "project_id": None},
                "trace_id": task_id,
            },
        },
    )


def any_task_resolver(
    task_id: str, job_id: str, capability: str, adapter: str, received: Any
) -> dict[str, Any]:
    return envelope_for(task_id)


def projection_of(task_id: str) -> InitialExecutionProjectionRequest:
    """The seed's initial projection request for `task_id`: QUEUED, revision 1, attempt 0."""
    return InitialExecutionProjectionRequest.from_mapping(
        projection_mapping(
            expected_job_id=f"job-{task_id}",
            expected_execution_digest=envelope_for(task_id)["execution_digest"],
            idempotency_key=f"projection-{task_id}",
        )
    )


def claim_all(ledger: TaskLedger, agent: str = "worker-1") -> list[str]:
    """Every task a worker offering every capability may take now, one claim at a time."""
    taken = []
    while (
        claimed := ledger.claim(agent_id=agent, capabilities=EVERY_CAPABILITY, lease_seconds=LEASE)
    ) is not None:
        taken.append(claimed["task_id"])
    return taken


def event_types(ledger: TaskLedger, task_id: str) -> list[str]:
    return [event["event_type"] for event in ledger.events(task_id)]


# -- the command line -------------------------------------------------------------------------


def cli(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, Any, str]:
    code = main(list(argv))
    captured = capsys.readouterr()
    output = json.loads(captured.out) if captured.out.strip() else None
    return code, output, captured.err


def write(path: Path, value: Any) -> str:
    path.write_text(json.dumps(value))
    return str(path)


def test_the_command_line_keeps_every_worker_off_a_governed_task_until_it_is_projected(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = str(tmp_path / "ledger.db")
    assert cli(capsys, "--db", db, "init")[0] == 0
    task = {key: value for key, value in governed_task().items() if key != "governed"}
    create = write(tmp_path / "task.json", {"idempotency_key": "create-1", "task": task})
    code, created, err = cli(capsys, "--db", db, "task", "create", "--json", create, "--governed")
    assert code == 0, err
    assert (created["revision"], created["awaiting_projection"]) == (1, True)
    plain = write(
        tmp_path / "plain.json",
        {
            "idempotency_key": "create-2",
            "task": {"task_id": "plain", "goal": "g", "instructions": "i"},
        },
    )
    assert cli(capsys, "--db", db, "task", "create", "--json", plain)[0] == 0
    claim = write(
        tmp_path / "claim.json",
        {"agent_id": "worker-1", "capabilities": EVERY_CAPABILITY, "lease_seconds": LEASE},
    )
    # The plain task is taken; the governed one is not, by any claim.
    code, first, _ = cli(capsys, "--db", db, "claim", "--json", claim)
    assert code == 0 and first["task_id"] == "plain"
    assert cli(capsys, "--db", db, "claim", "--json", claim)[1] is None
    code, many, _ = cli(capsys, "--db", db, "claim", "--json", claim, "--limit", "5")
    assert code == 0 and many == []
    named = write(
        tmp_path / "named.json",
        {"agent_id": "worker-1", "capabilities": EVERY_CAPABILITY, "lease_seconds": LEASE,
         "task_id": TASK},
    )  # fmt: skip
    code, _, err = cli(capsys, "--db", db, "claim", "--json", named)
    assert code != 0 and err.startswith("AWAITING_PROJECTION")
    # Visible as such: the task, its list and the status summary.
    code, shown, _ = cli(capsys, "--db", db, "task", "show", TASK)
    assert shown["awaiting_projection"] is True
    listed = {task["task_id"]: task for task in cli(capsys, "--db", db, "task", "list")[1]}
    assert listed[TASK]["awaiting_projection"] is True
    assert listed["plain"]["awaiting_projection"] is False
    assert cli(capsys, "--db", db, "status")[1]["awaiting_projection"] == 1
    # The owner projects it (the seed's preconditions hold); then it is claimable.
    bound = write(tmp_path / "binding.json", binding().public())
    assert cli(capsys, "--db", db, "binding", "put", bound)[0] == 0
    request = write(tmp_path / "request.json", projection_mapping())
    code, projected, err = cli(capsys, "--db", db, "project", TASK, "--request", request)
    assert code == 0, err
    assert projected["revision"] == 2
    assert cli(capsys, "--db", db, "status")[1]["awaiting_projection"] == 0
    code, taken, _ = cli(capsys, "--db", db, "claim", "--json", claim)
    assert code == 0 and taken["task_id"] == TASK
    assert taken["envelope"]["execution_digest"] == projected["execution_digest"]
    code, events, _ = cli(capsys, "--db", db, "events", TASK)
    assert [event["event_type"] for event in events] == ["TASK_CREATED", PROJECTED, "TASK_CLAIMED"]


# -- the API ----------------------------------------------------------------------------------


@pytest.fixture
def api(tmp_path: Path) -> Iterator[tuple[Any, dict[str, str]]]:
    path = tmp_path / "ledger.db"
    with Database(path) as db:
        tokens = {
            "owner": issue_token(db, "owner-1", ["owner", "auditor"])["token"],
            "agent": issue_token(db, "agent-1", ["agent"], any_capability=True)["token"],
        }
    application = create_app(ApiSettings(db_path=str(path)))
    yield application, tokens
    application.state.backend.close()


def test_the_api_keeps_every_worker_off_a_governed_task_until_it_is_projected(
    api: tuple[Any, dict[str, str]],
) -> None:
    application, tokens = api

    async def run() -> dict[str, Any]:
        transport = httpx.ASGITransport(app=application)
        async with httpx.AsyncClient(transport=transport, base_url="http://api") as client:
            owner = {"Authorization": f"Bearer {tokens['owner']}"}
            agent = {"Authorization": f"Bearer {tokens['agent']}"}
            seen: dict[str, Any] = {}
            created = await client.post(
                "/v1/tasks",
                json=[
                    {"idempotency_key": "c-1", "task": governed_task()},
                    {"idempotency_key": "c-2", "task": governed_task("task-other")},
                ],
                headers=owner,
            )
            assert created.status_code == 201, created.text
            seen["created"] = created.json()
            claim = {"capabilities": EVERY_CAPABILITY, "lease_seconds": LEASE}
            seen["claim"] = (await client.post("/v1/claims", json=claim, headers=agent)).status_code
            batch = await client.post("/v1/claims", json={**claim, "limit": 10}, headers=agent)
            seen["batch"] = batch.status_code  # an empty batch: nothing taken
            named = await client.post("/v1/claims", json={**claim, "task_id": TASK}, headers=agent)
            seen["named"] = (named.status_code, named.json()["code"])
            seen["view"] = (await client.get(f"/v1/tasks/{TASK}", headers=owner)).json()
            seen["status"] = (await client.get("/v1/status", headers=owner)).json()
            put = await client.put(
                f"/v1/bindings/{TASK}/{binding().job_id}", json=binding().public(), headers=owner
            )
            assert put.status_code in (200, 201), put.text
            projected = await client.post(
                f"/v1/tasks/{TASK}/projection", json=projection_mapping(), headers=owner
            )
            assert projected.status_code in (200, 201), projected.text
            seen["after"] = (await client.get(f"/v1/tasks/{TASK}", headers=owner)).json()
            seen["taken"] = (await client.post("/v1/claims", json=claim, headers=agent)).json()
            seen["again"] = (await client.post("/v1/claims", json=claim, headers=agent)).status_code
            return seen

    seen = asyncio.run(run())
    assert [task["awaiting_projection"] for task in seen["created"]] == [True, True]
    assert seen["claim"] == 204
    assert seen["batch"] == 204
    assert seen["named"] == (409, "AWAITING_PROJECTION")
    assert seen["view"]["awaiting_projection"] is True
    assert seen["status"]["awaiting_projection"] == 2
    assert seen["after"]["awaiting_projection"] is False
    assert seen["taken"]["task_id"] == TASK
    assert seen["again"] == 204  # the other governed task is still held


def test_the_console_shows_a_governed_task_awaiting_its_projection(tmp_path: Path) -> None:
    path = tmp_path / "ledger.db"
    with Database(path) as db:
        tokens = {"owner": issue_token(db, "owner-1", ["owner", "auditor"])["token"]}
    application = served_app(ApiSettings(db_path=str(path)))

    async def run() -> tuple[str, str, str]:
        transport = httpx.ASGITransport(app=application)
        async with httpx.AsyncClient(transport=transport, base_url="http://api") as client:
            owner = {"Authorization": f"Bearer {tokens['owner']}"}
            created = await client.post(
                "/v1/tasks",
                json=[
                    {"idempotency_key": "c-1", "task": governed_task()},
                    {"idempotency_key": "c-2", "task": {"task_id": "plain", "goal": "g",
                                                        "instructions": "i"}},
                ],
                headers=owner,
            )  # fmt: skip
            assert created.status_code == 201, created.text
            signed = await client.post("/sign-in", data={"token": tokens["owner"]})
            assert signed.status_code == 303, signed.text
            listing = (await client.get("/tasks")).text
            held = (await client.get(f"/tasks/{TASK}")).text
            plain = (await client.get("/tasks/plain")).text
            return listing, held, plain

    try:
        listing, held, plain = asyncio.run(run())
    finally:
        application.state.backend.close()
    rows = {
        row.split('class="task-link">')[1].split("<")[0]: row for row in listing.split("<tr>")[2:]
    }
    assert "awaiting projection" in rows[TASK]
    assert "awaiting projection" not in rows["plain"]
    assert 'id="task-governed"' in held and "no worker may claim it" in held
    assert 'id="task-governed"' not in plain


# -- the library, both engines ------------------------------------------------------------------


def test_a_governed_task_meets_the_seeds_projection_preconditions(ledger_target: Any) -> None:
    with TaskLedger(ledger_target) as ledger:
        plain = ledger.create_task(
            {key: value for key, value in governed_task().items() if key != "governed"},
            idempotency_key="plain",
        )
    with TaskLedger(ledger_target) as other:
        created = other.create_task(governed_task("task-governed"), idempotency_key="governed")
        # Created governed, it is what a plain create leaves (the seed's preconditions), but
        # for its hold: no more events, no other revision.
        shared: dict[str, Any] = {**plain, "task_id": None}
        assert {**created, "task_id": None} == {**shared, "awaiting_projection": True}
        task = other.get("task-governed")
        assert (task["status"], task["revision"], task["attempt"]) == ("QUEUED", 1, 0)
        assert task["required_capabilities"] == [] and task["metadata"] == {}
        assert event_types(other, "task-governed") == ["TASK_CREATED"]
        assert task["awaiting_projection"] is True
        assert claim_all(other) == [TASK]
    store = InitialExecutionProjectionStore(ledger_target, any_task_resolver)
    try:
        answer = store.project("task-governed", projection_of("task-governed"))
    finally:
        store.close()
    assert (answer["revision"], answer["required_capabilities"]) == (2, [CAPABILITY])
    with TaskLedger(ledger_target) as ledger:
        assert ledger.get("task-governed")["awaiting_projection"] is False
        assert claim_all(ledger) == ["task-governed"]
        assert verify_log(ledger.database).intact


def test_the_candidate_statement_leaves_a_governed_task_out(ledger_target: Any) -> None:
    """The shell's one candidate read (through the claim order's index) never hands the core
    a task awaiting its projection."""
    with TaskLedger(ledger_target) as ledger:
        ledger.create_task(governed_task(), idempotency_key="governed")
        ledger.create_task(
            {"goal": "g", "instructions": "i", "task_id": "plain"}, idempotency_key="plain"
        )
        params = {
            "now": NOW.plus_seconds(3600).text,
            "limit": 10,
            "offered_json": json.dumps(sorted(EVERY_CAPABILITY)),
        }
        # A write transaction: on PostgreSQL the statement locks what it reads.
        found = ledger.database.write(
            lambda conn: fetch_all(conn, "tasks_claim_candidates", params)
        )
    assert [row["task_id"] for row in found] == ["plain"]


def _held_row() -> TaskRow:
    return TaskRow(
        task_id=TASK,
        goal=GOAL,
        instructions=INSTRUCTIONS,
        success_criteria_json="[]",
        required_capabilities_json="[]",
        constraints_json="{}",
        metadata_json="{}",
        deadline=None,
        priority=0,
        max_attempts=3,
        attempt=0,
        status="QUEUED",
        claimed_by=None,
        lease_token_hash=None,
        lease_expires_at=None,
        result_json=None,
        result_digest=None,
        result_idempotency_key=None,
        verification_json=None,
        revision=1,
        created_at=NOW.text,
        updated_at=NOW.text,
        seq=1,
        awaiting_projection=1,
    )


def test_the_core_refuses_a_governed_candidate_whatever_the_shell_read() -> None:
    """A candidate the statement should have left out (a shell or a statement gone wrong) is
    still never claimed: the core re-checks each one."""
    held = _held_row()
    tail = LogTail.read(1, [chain_of(TASK)], [])
    claim = ClaimRequest.from_mapping(
        {"agent_id": "worker-1", "capabilities": EVERY_CAPABILITY, "lease_seconds": LEASE}
    )
    state = TaskState(task=None, tail=tail, candidates=(held,))
    assert decide_claim(state, claim, now=NOW, lease_token="t" * 32, actor=ACTOR) is None
    named = ClaimRequest.from_mapping(
        {"agent_id": "worker-1", "capabilities": EVERY_CAPABILITY, "lease_seconds": LEASE,
         "task_id": TASK}
    )  # fmt: skip
    with pytest.raises(LedgerError) as refused:
        decide_claim(
            TaskState(task=held, tail=tail), named, now=NOW, lease_token="t" * 32, actor=ACTOR
        )
    assert refused.value.code == "AWAITING_PROJECTION"
    batch = ClaimBatchRequest.from_mapping(
        {"agent_id": "w", "capabilities": EVERY_CAPABILITY, "lease_seconds": LEASE, "limit": 4}
    )
    assert decide_task(state, batch, now=NOW, lease_tokens=["t" * 32] * 4, actor=ACTOR) is None
    unheld = held._replace(awaiting_projection=0)
    taken = decide_claim(
        TaskState(task=None, tail=tail, candidates=(unheld,)),
        claim,
        now=NOW,
        lease_token="t" * 32,
        actor=ACTOR,
    )
    assert taken is not None  # the same row without its hold is claimed


def test_no_other_write_frees_or_runs_a_governed_task(ledger_target: Any) -> None:
    """Every write but the projection and a cancel is refused on a task awaiting its
    projection, changing nothing; a cancel ends it, and nothing brings it back to a worker."""
    with TaskLedger(ledger_target) as ledger:
        ledger.create_task(governed_task(), idempotency_key="governed")
        token = "l" * 32
        refusals: dict[str, Callable[[], object]] = {
            "claim": lambda: ledger.claim(
                agent_id="w", capabilities=EVERY_CAPABILITY, lease_seconds=LEASE, task_id=TASK
            ),
            "keyed claim": lambda: ledger.claim(
                agent_id="w",
                capabilities=EVERY_CAPABILITY,
                lease_seconds=LEASE,
                task_id=TASK,
                idempotency_key="claim-1",
                lease_token=token,
            ),
            "pause": lambda: ledger.apply(
                PauseRequest.from_mapping(
                    {"task_id": TASK, "reason": "hold it", "idempotency_key": "pause-1"}
                )
            ),
            "resume": lambda: ledger.apply(
                ResumeRequest.from_mapping(
                    {"task_id": TASK, "reason": "go", "idempotency_key": "resume-1"}
                )
            ),
            "retry": lambda: ledger.retry(TASK, reason="again", idempotency_key="retry-1"),
            "heartbeat": lambda: ledger.heartbeat(TASK, lease_token=token, lease_seconds=LEASE),
            "release": lambda: ledger.release(TASK, lease_token=token, reason="stop"),
            "submit": lambda: ledger.submit_result(
                TASK, lease_token=token, result={"summary": "x"}, idempotency_key="submit-1"
            ),
            "verify": lambda: ledger.verify(
                TASK, decision="SUCCEEDED", reason="ok", idempotency_key="verify-1"
            ),
        }
        codes = {}
        for name, write_it in refusals.items():
            with pytest.raises(LedgerError) as refused:
                write_it()
            codes[name] = refused.value.code
        assert codes == {
            "claim": "AWAITING_PROJECTION",
            "keyed claim": "AWAITING_PROJECTION",
            "pause": "AWAITING_PROJECTION",
            "resume": "INVALID_TRANSITION",
            "retry": "INVALID_TRANSITION",
            "heartbeat": "LEASE_INVALID",
            "release": "LEASE_INVALID",
            "submit": "LEASE_INVALID",
            "verify": "INVALID_TRANSITION",
        }
        assert (
            ledger.claim_many(
                agent_id="w", capabilities=EVERY_CAPABILITY, lease_seconds=LEASE, limit=8
            )
            == []
        )
        assert ledger.expire_leases()["count"] == 0
        task = ledger.get(TASK)
        assert (task["revision"], task["awaiting_projection"]) == (1, True)
        assert event_types(ledger, TASK) == ["TASK_CREATED"]
        # A cancel is allowed; the task stays held, and a retry cannot requeue it unprojected.
        assert (
            ledger.cancel(TASK, reason="not needed", idempotency_key="c")["status"] == "CANCELLED"
        )
        with pytest.raises(LedgerError) as refused:
            ledger.retry(TASK, reason="again", idempotency_key="retry-2")
        assert refused.value.code == "AWAITING_PROJECTION"
        assert ledger.get(TASK)["awaiting_projection"] is True
        assert claim_all(ledger) == []
        assert event_types(ledger, TASK) == ["TASK_CREATED", "TASK_CANCELLED"]
        assert verify_log(ledger.database).intact


# -- the race -----------------------------------------------------------------------------------

GOVERNED = 12
PLAIN = 6
CLAIMERS = 3


def test_claimers_polling_never_take_a_governed_task_before_its_projection(
    ledger_target: Any,
) -> None:
    """A pool of claimers (threads, each on its own connection) polls while an owner creates
    governed tasks and projects them one by one, plain tasks between them. From the sealed
    events: no governed task has a TASK_CLAIMED before its projection, and every one is
    claimed after it."""
    governed = [f"gov-{number:02d}" for number in range(GOVERNED)]
    plain = [f"plain-{number:02d}" for number in range(PLAIN)]
    owner_done = threading.Event()
    failures: list[BaseException] = []
    claimed: list[str] = []
    claimed_lock = threading.Lock()

    def claimer(name: str) -> None:
        try:
            with TaskLedger(ledger_target) as ledger:
                while True:
                    finished = owner_done.is_set()
                    taken = ledger.claim_many(
                        agent_id=name, capabilities=EVERY_CAPABILITY, lease_seconds=LEASE, limit=2
                    )
                    with claimed_lock:
                        claimed.extend(answer["task_id"] for answer in taken)
                        everything = len(claimed) == GOVERNED + PLAIN
                    if everything or (finished and not taken):
                        return
        except BaseException as failure:  # reported by the test's own thread
            failures.append(failure)

    threads = [
        threading.Thread(target=claimer, args=(f"worker-{n}",), daemon=True)
        for n in range(CLAIMERS)
    ]
    for thread in threads:
        thread.start()
    try:
        store = InitialExecutionProjectionStore(ledger_target, any_task_resolver)
        with TaskLedger(ledger_target) as owner:
            for number, task_id in enumerate(governed):
                owner.create_task(governed_task(task_id), idempotency_key=f"create-{task_id}")
                if number < PLAIN:
                    owner.create_task(
                        {"task_id": plain[number], "goal": "g", "instructions": "i"},
                        idempotency_key=f"create-{plain[number]}",
                    )
                if number >= 2:  # projections trail the creates: some wait while claimers poll
                    store.project(governed[number - 2], projection_of(governed[number - 2]))
            for task_id in governed[-2:]:
                store.project(task_id, projection_of(task_id))
        store.close()
    finally:
        owner_done.set()
        for thread in threads:
            thread.join(timeout=120)
    assert not failures, failures
    assert not any(thread.is_alive() for thread in threads)
    with TaskLedger(ledger_target) as ledger:
        for task_id in governed:
            events = [event["event_type"] for event in ledger.events(task_id)]
            assert events == ["TASK_CREATED", PROJECTED, "TASK_CLAIMED"], (task_id, events)
        assert sorted(claimed) == sorted(governed + plain)
        assert verify_log(ledger.database).intact


# -- the migration ------------------------------------------------------------------------------


def test_a_seal_or_an_archive_from_before_the_hold_still_proves_its_task_row() -> None:
    """A task row sealed (or archived) before 0027 was digested without the column: it is held
    against that digest while it holds the default, and a hold set behind the ledger's back
    is reported."""
    row = {**_held_row()._asdict(), "awaiting_projection": 0}
    without = {name: value for name, value in row.items() if name != "awaiting_projection"}
    sealed = row_digest("tasks", TASK, without)
    assert stored_row_state(SEALED_TABLES["tasks"], row, sealed) == (TASK, sealed)
    forged = {**row, "awaiting_projection": 1}
    assert stored_row_state(SEALED_TABLES["tasks"], forged, sealed)[1] != sealed
    # An archive's line written before 0027 holds the row without the column.
    assert held_row_problem(SEALED_TABLES, "tasks", TASK, sealed, without) is None
    assert held_row_problem(SEALED_TABLES, "tasks", TASK, sealed, forged) is not None


def test_a_ledger_sealed_before_the_hold_verifies_after_it(
    ledger_target: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Seals written by a version before 0027 (here: the row a transition hands its seal
    without the column, as that version's record had none) still prove their rows once the
    column is there at its default, on every seal version the engines write."""
    with monkeypatch.context() as before:

        def written_without_hold(self: TaskRow, previous: TaskRow | None) -> RowWrite:
            keep = [name for name in self._fields if name != "awaiting_projection"]
            values = self._asdict()
            old = None if previous is None else previous._asdict()
            return RowWrite(
                "tasks",
                self.task_id,
                tuple(keep),
                None if old is None else tuple(old[name] for name in keep),
                tuple(values[name] for name in keep),
            )

        before.setattr(TaskRow, "written", written_without_hold)
        with TaskLedger(ledger_target) as ledger:
            ledger.create_task(
                {"task_id": "old", "goal": "g", "instructions": "i"}, idempotency_key="c-old"
            )
            claimed = ledger.claim(agent_id="w", capabilities=[], lease_seconds=LEASE)
            assert claimed is not None
            ledger.heartbeat("old", lease_token=claimed["lease_token"], lease_seconds=LEASE)
    with TaskLedger(ledger_target) as ledger:
        assert verify_log(ledger.database).intact
        ledger.cancel("old", reason="done with it", idempotency_key="cancel-old")
        assert verify_log(ledger.database).intact
