"""The governed-write decisions, purely: golden plans, each refusal the core decides, the
protected-pattern table and the outcome table (no git, no database)."""

from __future__ import annotations

import json
from typing import Any

import attrs
import pytest
from aios_ledger.core import (
    GovernedExecutionBinding,
    IdempotencyRow,
    LedgerError,
    LogTail,
    TaskRow,
    Timestamp,
    WritePlan,
    chain_of,
    lease_token_sha256,
    project_execution_envelope,
)
from aios_ledger.core.actors import Actor
from aios_ledger.core.git import (
    GovernedWriteRow,
    OutcomeState,
    ProposalRecord,
    ProposalRow,
    ProposalState,
    RegisterRepositoryRequest,
    RepositoryRow,
    RepositoryState,
    WriteOutcome,
    WriteRequest,
    WriterLeaseRow,
    WriteState,
    decide_record_proposal,
    decide_register_repository,
    decide_write_intent,
    decide_write_outcome,
)
from aios_ledger.core.git.decisions import decide_write_refusal, grant_workspace, outcome_of
from aios_ledger.core.git.policy import is_protected, protected_patterns
from aios_ledger.core.log.plan import Replay
from aios_ledger.core.log.seals import LEDGER_CHAIN, ChainTip
from syrupy.assertion import SnapshotAssertion

# Who the decisions here act as.
ACTOR = Actor("tester", "library")

NOW = Timestamp.parse("2026-09-01T10:00:00.000Z")
TASK = "task-g1"
BASE = "b" * 40
HEAD = "c" * 40
TOKEN = "lease-token-" + "x" * 40
REPO = "acme/widgets"
REF = "refs/heads/agent/task-g1"


def bound(**changes: Any) -> GovernedExecutionBinding:
    return GovernedExecutionBinding.from_mapping(
        {
            "task_id": TASK,
            "job_id": "job-g1",
            "repository": REPO,
            "base_oid": BASE,
            "expected_branch_oid": BASE,
            "target_branch": "agent/task-g1",
            "branch_mode": "CREATE_NEW",
            "generation": 2,
            "idempotency_key": "binding-g1",
            **changes,
        }
    )


def envelope(binding: GovernedExecutionBinding) -> dict[str, Any]:
    return project_execution_envelope(
        binding,
        {
            "action": "agent_runtime",
            "adapter": "openclaw",
            "capability_scope": ["agent.runtime.openclaw"],
            "runtime_input": {"goal": "g"},
        },
    )


def task(
    status: str = "SUCCEEDED", binding: GovernedExecutionBinding | None = None, **changes: Any
) -> TaskRow:
    built = envelope(binding or bound())
    result = {
        "task_id": TASK,
        "job_id": "job-g1",
        "execution_digest": built["execution_digest"],
        "execution_mode": "agent_runtime",
        "status": "SUCCEEDED",
        "summary": "done",
        "changed_files": ["a.txt"],
        "direct_main_write": False,
        "production_write": False,
        "force_push": False,
        "protected_ref_bypass": False,
        "secret_material_exposed": False,
    }
    row = TaskRow(
        task_id=TASK,
        goal="g",
        instructions="i",
        success_criteria_json="[]",
        required_capabilities_json='["agent.runtime.openclaw"]',
        constraints_json="{}",
        metadata_json=json.dumps({"execution": built}),
        deadline=None,
        priority=10,
        max_attempts=3,
        attempt=1,
        status=status,
        claimed_by="agent-7" if status == "CLAIMED" else None,
        lease_token_hash=lease_token_sha256(TOKEN) if status == "CLAIMED" else None,
        lease_expires_at="2026-09-01T10:10:00.000Z" if status == "CLAIMED" else None,
        result_json=json.dumps(result) if status == "SUCCEEDED" else None,
        result_digest=None,
        result_idempotency_key=None,
        verification_json=None,
        revision=6,
        created_at="2026-09-01T09:00:00.000Z",
        updated_at="2026-09-01T09:30:00.000Z",
        seq=1,
    )
    return row._replace(**changes)


def repository(protected: list[str] | None = None) -> RepositoryRow:
    return RepositoryRow(
        name=REPO,
        path="/srv/git/widgets.git",
        head_branch="main",
        protected_json=json.dumps(protected or ["main", "master", "release/*"]),
        revision=1,
        created_at="2026-09-01T08:00:00.000Z",
        updated_at="2026-09-01T08:00:00.000Z",
    )


def facts(**changes: Any) -> dict[str, Any]:
    return {
        "direct_main_write": False,
        "force_push": False,
        "production_write": False,
        "protected_ref_bypass": False,
        "protected_refs": [],
        "secret_material_exposed": False,
        "secrets": [],
        **changes,
    }


def proposal(**fact_changes: Any) -> ProposalRow:
    return ProposalRow(
        proposal_id=f"{TASK}#1",
        task_id=TASK,
        attempt=1,
        repository=REPO,
        agent_id="agent-7",
        base_oid=BASE,
        head_oid=HEAD,
        bundle_sha256="d" * 64,
        bundle_bytes=900,
        refs_json=json.dumps({"HEAD": HEAD}),
        changed_files_json='["a.txt"]',
        facts_json=json.dumps(facts(**fact_changes), sort_keys=True),
        created_at="2026-09-01T09:10:00.000Z",
    )


def tail(chain: str = chain_of(TASK)) -> LogTail:
    return LogTail.read(40, [chain], [ChainTip(chain, 6, "sha256:" + "e" * 64)])


def lease(holder: str | None = None, generation: int = 0) -> WriterLeaseRow:
    return WriterLeaseRow(
        f"{REPO} {REF}", REPO, REF, holder, generation, 3, "2026-09-01T09:00:00.000Z"
    )


def write_state(**changes: Any) -> WriteState:
    fields: dict[str, Any] = {
        "task": task(),
        "repository": repository(),
        "proposal": proposal(),
        "lease": None,
        "prior": None,
        "tail": tail(),
    }
    fields.update(changes)
    return WriteState(**fields)


WRITE = WriteRequest.from_mapping({"task_id": TASK, "idempotency_key": "write-g1"})


def plan_view(plan: Any) -> dict[str, Any]:
    assert isinstance(plan, WritePlan)
    return {
        "writes": [attrs.asdict(write) for write in plan.writes],
        "events": [attrs.asdict(event) for event in plan.events],
        "response": plan.response,
    }


def code(work: Any) -> str:
    with pytest.raises(LedgerError) as refused:
        work()
    return refused.value.code


def intended() -> GovernedWriteRow:
    plan = decide_write_intent(write_state(), WRITE, now=NOW, actor=ACTOR)
    assert isinstance(plan, WritePlan)
    return GovernedWriteRow(
        "write-g1",
        TASK,
        f"{TASK}#1",
        REPO,
        REF,
        "0" * 40,
        HEAD,
        2,
        "INTENDED",
        None,
        None,
        '["a.txt"]',
        1,
        NOW.text,
        NOW.text,
    )


# ---------------------------------------------------------------------------------------------


def test_registering_a_repository_is_golden_replayed_and_conflicts(
    golden: SnapshotAssertion,
) -> None:
    request = RegisterRepositoryRequest.from_mapping({"name": REPO, "path": "/srv/git/widgets.git"})
    plan = decide_register_repository(
        RepositoryState(prior=None, tail=tail(LEDGER_CHAIN)),
        request,
        now=NOW,
        head_branch="trunk",
        actor=ACTOR,
    )
    assert golden == plan_view(plan)
    assert isinstance(plan, WritePlan)
    stored = RepositoryRow(**plan.writes[0].params)  # type: ignore[arg-type]
    again = decide_register_repository(
        RepositoryState(prior=stored, tail=tail(LEDGER_CHAIN)),
        request,
        now=NOW,
        head_branch="trunk",
        actor=ACTOR,
    )
    assert isinstance(again, Replay) and again.response["idempotent"] is True
    other = RegisterRepositoryRequest.from_mapping(
        {"name": REPO, "path": "/srv/git/widgets.git", "protected": ["x/*"]}
    )
    assert (
        code(
            lambda: decide_register_repository(
                RepositoryState(prior=stored, tail=tail(LEDGER_CHAIN)),
                other,
                now=NOW,
                head_branch="trunk",
                actor=ACTOR,
            )
        )
        == "REPOSITORY_CONFLICT"
    )


def test_protected_patterns_are_a_table(golden: SnapshotAssertion) -> None:
    patterns = protected_patterns("develop", None)
    assert patterns == ["develop", "main", "master", "release/*"]
    # Asked-for patterns add to the defaults; only `default_protection=False` replaces them.
    assert protected_patterns("main", ["agent/locked/*"]) == [
        "main",
        "master",
        "release/*",
        "agent/locked/*",
    ]
    assert protected_patterns("main", ["agent/locked/*"], default_protection=False) == [
        "main",
        "agent/locked/*",
    ]
    refs = [
        "refs/heads/main",
        "refs/heads/develop",
        "refs/heads/release/2.4",
        "refs/heads/release",
        "refs/heads/agent/release/2.4",
        "refs/heads/agent/x",
        "refs/tags/v1",
    ]
    assert golden == {name: is_protected(name, [*patterns, "refs/tags/*"]) for name in refs}


def _proposal_request(**changes: Any) -> ProposalRecord:
    return ProposalRecord.from_mapping(
        {
            "task_id": TASK,
            "lease_token": TOKEN,
            "bundle_sha256": "d" * 64,
            "bundle_bytes": 900,
            "base_oid": BASE,
            "head_oid": HEAD,
            "refs": [
                {"name": "HEAD", "oid": HEAD},
                {"name": "refs/heads/agent/task-g1", "oid": HEAD},
            ],
            "changed_files": ["b.txt", "a.txt"],
            "descends_from_base": True,
            "secrets": [],
            "scan_bytes": 2048,
            "scan_seconds": 0.125,
            **changes,
        }
    )


def _proposal_state(**changes: Any) -> ProposalState:
    fields: dict[str, Any] = {
        "task": task("CLAIMED"),
        "repository": repository(),
        "prior": None,
        "tail": tail(),
    }
    fields.update(changes)
    return ProposalState(**fields)


def test_recording_a_proposal_is_golden(golden: SnapshotAssertion) -> None:
    plan = decide_record_proposal(_proposal_state(), _proposal_request(), now=NOW, actor=ACTOR)
    assert golden == plan_view(plan)


def test_a_proposals_facts_come_from_what_it_touches() -> None:
    touching = _proposal_request(
        refs=[{"name": "HEAD", "oid": HEAD}, {"name": "refs/heads/main", "oid": HEAD}],
        descends_from_base=False,
        secrets=[{"path": "id_rsa", "kind": "Private Key", "line": 1}],
    )
    plan = decide_record_proposal(_proposal_state(), touching, now=NOW, actor=ACTOR)
    assert isinstance(plan, WritePlan)
    found = plan.response["facts"]
    assert found["protected_refs"] == ["refs/heads/main"]
    assert found["direct_main_write"] is True
    assert found["force_push"] is True
    assert found["secret_material_exposed"] is True


def test_recording_a_proposal_refuses_what_it_must() -> None:
    def record(state: ProposalState, request: ProposalRecord | None = None) -> Any:
        return decide_record_proposal(state, request or _proposal_request(), now=NOW, actor=ACTOR)

    assert code(lambda: record(_proposal_state(task=None))) == "TASK_NOT_FOUND"
    assert code(lambda: record(_proposal_state(task=task("SUCCEEDED")))) == "LEASE_INVALID"
    late = task("CLAIMED", lease_expires_at="2026-09-01T09:59:59.999Z")
    assert code(lambda: record(_proposal_state(task=late))) == "LEASE_EXPIRED"
    assert code(lambda: record(_proposal_state(repository=None))) == "REPOSITORY_NOT_FOUND"
    assert (
        code(lambda: record(_proposal_state(), _proposal_request(base_oid="f" * 40)))
        == "BUNDLE_INVALID"
    )
    assert (
        code(lambda: record(_proposal_state(), _proposal_request(head_oid="f" * 40)))
        == "BUNDLE_INVALID"
    )
    unbound = task("CLAIMED", metadata_json="{}")
    assert code(lambda: record(_proposal_state(task=unbound))) == "TASK_NOT_BOUND"
    prior = proposal()
    assert isinstance(record(_proposal_state(prior=prior)), Replay)
    other = _proposal_request(bundle_sha256="0" * 64)
    assert code(lambda: record(_proposal_state(prior=prior), other)) == "PROPOSAL_CONFLICT"


def test_intending_a_write_is_golden(golden: SnapshotAssertion) -> None:
    plan = decide_write_intent(write_state(), WRITE, now=NOW, actor=ACTOR)
    assert golden == plan_view(plan)
    update = bound(branch_mode="UPDATE_EXISTING", expected_branch_oid="a" * 40, base_oid="a" * 40)
    moved = decide_write_intent(
        write_state(
            task=task(binding=update),
            proposal=proposal()._replace(base_oid="a" * 40),
            lease=lease(generation=2),
        ),
        WRITE,
        now=NOW,
        actor=ACTOR,
    )
    assert golden == plan_view(moved)


@pytest.mark.parametrize(
    ("changes", "expected"),
    [
        ({"task": None}, "TASK_NOT_FOUND"),
        ({"task": task("SUBMITTED")}, "TASK_NOT_VERIFIED"),
        ({"task": task(metadata_json="{}")}, "TASK_NOT_BOUND"),
        ({"repository": None}, "REPOSITORY_NOT_FOUND"),
        ({"proposal": None}, "PROPOSAL_NOT_FOUND"),
        ({"proposal": proposal()._replace(attempt=0)}, "PROPOSAL_NOT_FOUND"),
        ({"proposal": proposal(protected_ref_bypass=True)}, "PROTECTED_REF"),
        ({"proposal": proposal(direct_main_write=True)}, "PROTECTED_REF"),
        ({"proposal": proposal(force_push=True)}, "NOT_A_DESCENDANT"),
        ({"proposal": proposal(secret_material_exposed=True)}, "SECRET_MATERIAL"),
        (
            {"proposal": proposal()._replace(changed_files_json='["a.txt","b.txt"]')},
            "RESULT_GOVERNANCE_VIOLATION",
        ),
        ({"lease": lease(holder="write-other")}, "WRITER_LEASE_HELD"),
        ({"lease": lease(generation=3)}, "GENERATION_STALE"),
    ],
)
def test_intending_a_write_refuses(changes: dict[str, Any], expected: str) -> None:
    assert (
        code(lambda: decide_write_intent(write_state(**changes), WRITE, now=NOW, actor=ACTOR))
        == expected
    )


@pytest.mark.parametrize(
    ("changes", "expected"),
    [
        ({"task": task("SUBMITTED")}, "TASK_NOT_VERIFIED"),
        ({"repository": None}, "REPOSITORY_NOT_FOUND"),
        ({"proposal": proposal(protected_ref_bypass=True)}, "PROTECTED_REF"),
        ({"proposal": proposal(force_push=True)}, "NOT_A_DESCENDANT"),
        ({"proposal": proposal(secret_material_exposed=True)}, "SECRET_MATERIAL"),
        (
            {"proposal": proposal()._replace(changed_files_json='["a.txt","b.txt"]')},
            "RESULT_GOVERNANCE_VIOLATION",
        ),
        ({"lease": lease(holder="write-other")}, "WRITER_LEASE_HELD"),
        ({"lease": lease(generation=3)}, "GENERATION_STALE"),
    ],
)
def test_a_refused_write_is_recorded_and_its_key_replays_the_refusal(
    changes: dict[str, Any], expected: str
) -> None:
    """Every check's refusal is one sealed GOVERNED_WRITE_REFUSED on the task's chain, covering
    its recorded answer and nothing else (no lease, no write); kept, the key replays it before any
    check, and another request under it is a conflict."""
    state = write_state(**changes)
    with pytest.raises(LedgerError) as refused:
        decide_write_intent(state, WRITE, now=NOW, actor=ACTOR)
    assert refused.value.code == expected
    plan = decide_write_refusal(state, WRITE, refused.value, now=NOW, actor=ACTOR)
    assert isinstance(plan, WritePlan)
    [appended] = plan.events
    event = appended.event
    assert (event.task_id, event.event_type) == (TASK, "GOVERNED_WRITE_REFUSED")
    assert event.actor == ACTOR.stored()
    payload = json.loads(event.payload_json)
    assert payload["code"] == expected
    assert payload["message"] == refused.value.detail
    assert payload["idempotency_key"] == WRITE.idempotency_key
    assert [(row.row_table, row.row_key) for row in appended.rows] == [
        ("task_idempotency", "governed_write write-g1")
    ]
    [insert] = plan.writes
    kept = IdempotencyRow(
        str(insert.params["idempotency_key"]),
        str(insert.params["request_sha256"]),
        str(insert.params["response_json"]),
    )
    # Kept, the key replays the refusal even where every check would pass now.
    again = write_state(refused=kept)
    with pytest.raises(LedgerError) as replayed:
        decide_write_intent(again, WRITE, now=NOW, actor=ACTOR)
    assert (replayed.value.code, replayed.value.detail) == (expected, refused.value.detail)
    replay = decide_write_refusal(again, WRITE, replayed.value, now=NOW, actor=ACTOR)
    assert isinstance(replay, Replay) and replay.response["idempotent"] is True
    other = WriteRequest.from_mapping({"task_id": "task-other", "idempotency_key": "write-g1"})
    assert (
        code(lambda: decide_write_intent(again, other, now=NOW, actor=ACTOR))
        == "IDEMPOTENCY_CONFLICT"
    )


def test_what_is_not_a_checks_refusal_is_not_recorded() -> None:
    """A task that does not exist, a code no check gives, a key that holds a write."""
    for state, refused in [
        (write_state(task=None), LedgerError("TASK_NOT_FOUND", "no task")),
        (write_state(), LedgerError("IDEMPOTENCY_CONFLICT", "another request")),
        (write_state(), LedgerError("GIT_ROW_CORRUPT", "a row")),
        (write_state(prior=intended()), LedgerError("WRITER_LEASE_HELD", "held")),
    ]:
        assert decide_write_refusal(state, WRITE, refused, now=NOW, actor=ACTOR) is None


def test_a_written_key_replays_and_a_key_in_doubt_is_not_replayed() -> None:
    done = intended()._replace(state="APPLIED", observed_oid=HEAD, revision=2)
    replay = decide_write_intent(write_state(prior=done), WRITE, now=NOW, actor=ACTOR)
    assert isinstance(replay, Replay) and replay.response["idempotent"] is True
    other = WriteRequest.from_mapping({"task_id": "task-other", "idempotency_key": "write-g1"})
    assert (
        code(lambda: decide_write_intent(write_state(prior=done), other, now=NOW, actor=ACTOR))
        == "IDEMPOTENCY_CONFLICT"
    )
    assert (
        code(
            lambda: decide_write_intent(write_state(prior=intended()), WRITE, now=NOW, actor=ACTOR)
        )
        == "WRITE_IN_DOUBT"
    )


def test_the_outcome_is_read_off_the_ref() -> None:
    write = intended()
    # Right after the swap: git's answer, then the ref says why it refused.
    assert outcome_of(write, HEAD, True, False) == ("APPLIED", None)
    assert outcome_of(write, HEAD, False, False) == ("MOVED_BY_OTHER", "BRANCH_EXISTS")
    assert outcome_of(write, None, False, False) == ("NOT_APPLIED", None)
    assert outcome_of(write, "9" * 40, False, False) == ("MOVED_BY_OTHER", "BRANCH_EXISTS")
    # After a crash: the ref alone.
    assert outcome_of(write, HEAD, False, True) == ("APPLIED", None)
    assert outcome_of(write, None, False, True) == ("NOT_APPLIED", None)
    assert outcome_of(write, "9" * 40, False, True) == ("MOVED_BY_OTHER", "BRANCH_EXISTS")
    updating = write._replace(old_oid="a" * 40)
    assert outcome_of(updating, "a" * 40, False, True) == ("NOT_APPLIED", None)
    assert outcome_of(updating, None, False, True) == ("MOVED_BY_OTHER", "BRANCH_MOVED")
    assert outcome_of(updating, "9" * 40, False, False) == ("MOVED_BY_OTHER", "BRANCH_MOVED")


@pytest.mark.parametrize(
    ("observed", "swapped", "recovered"),
    [(HEAD, True, False), (None, False, True), ("9" * 40, False, False)],
    ids=["applied", "not-applied", "moved-by-other"],
)
def test_recording_an_outcome_is_golden(
    golden: SnapshotAssertion, observed: str | None, swapped: bool, recovered: bool
) -> None:
    outcome = WriteOutcome.from_mapping(
        {
            "idempotency_key": "write-g1",
            "observed_oid": observed,
            "swapped": swapped,
            "recovered": recovered,
        }
    )
    state = OutcomeState(
        write=intended(), lease=lease(holder="write-g1", generation=1), tail=tail()
    )
    assert golden == plan_view(decide_write_outcome(state, outcome, now=NOW, actor=ACTOR))


def test_recording_an_outcome_refuses_what_it_must() -> None:
    outcome = WriteOutcome.from_mapping(
        {"idempotency_key": "write-g1", "observed_oid": HEAD, "swapped": True, "recovered": False}
    )
    held = lease(holder="write-g1")

    def record(state: OutcomeState, request: WriteOutcome = outcome) -> Any:
        return decide_write_outcome(state, request, now=NOW, actor=ACTOR)

    assert code(lambda: record(OutcomeState(None, held, tail()))) == "WRITE_NOT_FOUND"
    assert code(lambda: record(OutcomeState(intended(), None, tail()))) == "WRITER_LEASE_MISSING"
    assert (
        code(lambda: record(OutcomeState(intended(), lease(holder="x"), tail())))
        == "WRITER_LEASE_HELD"
    )
    lying = WriteOutcome.from_mapping(
        {"idempotency_key": "write-g1", "observed_oid": None, "swapped": True, "recovered": False}
    )
    assert code(lambda: record(OutcomeState(intended(), held, tail()), lying)) == "FIELDS_INVALID"
    settled = intended()._replace(state="APPLIED", revision=2)
    assert isinstance(record(OutcomeState(settled, lease(), tail())), Replay)


def test_a_submitted_result_states_the_files_and_head_its_proposal_shows() -> None:
    from aios_ledger.core import SubmitRequest, TaskState, decide_submit

    claimed = task("CLAIMED")
    stated = json.loads(task().result_json or "{}")

    def submit(result: dict[str, Any], proposed: ProposalRow | None) -> Any:
        request = SubmitRequest.from_mapping(
            {"task_id": TASK, "lease_token": TOKEN, "result": result, "idempotency_key": "s1"}
        )
        return decide_submit(
            TaskState(task=claimed, tail=tail()),
            request,
            now=NOW,
            contracts={"agent_runtime_result.v1": {}},
            jitter=0.0,
            proposal=proposed,
            actor=ACTOR,
        )

    assert isinstance(submit(stated, proposal()), WritePlan)
    assert isinstance(submit({**stated, "changed_files": ["x"]}, None), WritePlan)
    wrong = {**stated, "changed_files": ["a.txt", "b.txt"]}
    assert code(lambda: submit(wrong, proposal())) == "RESULT_GOVERNANCE_VIOLATION"
    assert code(lambda: submit({**stated, "head_oid": "f" * 40}, proposal())) == (
        "RESULT_GOVERNANCE_VIOLATION"
    )
    # Another attempt's proposal says nothing of this one.
    assert isinstance(submit(wrong, proposal()._replace(attempt=0)), WritePlan)


def test_only_the_holder_under_its_lease_is_granted_the_base() -> None:
    held = task("CLAIMED")

    def grant(
        found: TaskRow | None = held,
        registered: RepositoryRow | None = None,
        *,
        agent: str = "agent-7",
        token: str = TOKEN,
    ) -> Any:
        return grant_workspace(
            TASK,
            found,
            repository() if registered is None else registered,
            agent_id=agent,
            lease_token=token,
            now=NOW,
        )

    granted = grant()
    assert (granted.binding, granted.repository) == (bound(), repository())
    assert code(lambda: grant(None)) == "TASK_NOT_FOUND"
    assert code(lambda: grant(agent="agent-8")) == "NOT_TASK_HOLDER"
    assert code(lambda: grant(task("SUCCEEDED"))) == "NOT_TASK_HOLDER"
    assert code(lambda: grant(token="another-token")) == "LEASE_INVALID"
    late = task("CLAIMED", lease_expires_at="2026-09-01T09:59:59.999Z")
    assert code(lambda: grant(late)) == "LEASE_EXPIRED"
    assert code(lambda: grant(task("CLAIMED", metadata_json="{}"))) == "TASK_NOT_BOUND"
    elsewhere = repository()._replace(name="acme/other")
    assert code(lambda: grant(registered=elsewhere)) == "REPOSITORY_NOT_FOUND"
    assert (
        code(
            lambda: grant_workspace(
                TASK, held, None, agent_id="agent-7", lease_token=TOKEN, now=NOW
            )
        )
        == "REPOSITORY_NOT_FOUND"
    )
