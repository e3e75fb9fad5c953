"""The initial execution projection and its source-capture recovery, through the store."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from aios_ledger.core import (
    InitialExecutionProjectionError,
    JsonObject,
    TaskRow,
    Timestamp,
    chain_of,
)
from aios_ledger.core.actors import Actor
from aios_ledger.core.projection import (
    InitialExecutionProjectionRequest,
    ProjectionCommand,
    ProjectionState,
    SourceCaptureProjectionRecoveryRequest,
    decide_projection,
)
from aios_ledger.core.projection.decisions import PROJECTION_REFUSALS
from aios_ledger.shell import AUTHORIZATION_ENV, Database, InitialExecutionProjectionStore
from aios_ledger.shell.actors import acting_as
from aios_ledger.shell.contracts import SOURCE_CAPTURE_RESULT, result_contract
from aios_ledger.shell.db.apply import apply_decision
from aios_ledger.shell.db.connection import fetch_all, fetch_one
from aios_ledger.shell.db.tail import read_log_tail
from conftest import both_engines
from legacy_fixtures import (
    CAPABILITY,
    JOB,
    OWNER,
    REWORK,
    REWORK_TRAIL,
    TASK,
    binding,
    capture_envelope,
    capture_result,
    captured_database,
    dump,
    legacy_database,
    on_engine,
    projection_mapping,
    projection_request,
    recovery_request,
    resolver,
    rows,
    runtime_envelope,
)

# Who the decisions here act as.
ACTOR = Actor("tester", "library")

pytest_generate_tests = both_engines


@pytest.fixture(autouse=True)
def owner(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(AUTHORIZATION_ENV, OWNER)


# Who tries the projections refused here: their refusal events name them.
TRIER = Actor("owner-trying", "library")
# The tables a recorded refusal writes: its event, the event's seal and the rows it covers, its
# Merkle leaf, and its recorded answer (nothing of the task, nor of the projection's ledgers).
REFUSAL_TABLES = (
    "events",
    "event_seals",
    "event_seal_rows",
    "merkle_leaves",
    "merkle_tree",
    "task_idempotency",
    "sqlite_sequence",
)


def _tables_changed(before: list[str], after: list[str]) -> set[str]:
    return {line.split(":", 1)[0] for line in set(before) ^ set(after)}


def refuse(code: str, call: Callable[[], Any], path: Path) -> None:
    """The call is refused with `code`. A well-formed attempt on a task that exists, refused by
    one of the projection's checks, is recorded: one sealed refusal event naming the code and
    who tried, and nothing else changes (neither the task nor the projection's ledgers); the
    same call again is refused the same way and writes nothing. Any other refusal (bad input, an
    unknown task, a key used otherwise, a corrupt row) leaves the database exactly as it was."""
    before = dump(path)
    events_before = rows(path, "SELECT coalesce(max(event_id), 0) FROM events")[0][0]
    with acting_as(TRIER), pytest.raises(InitialExecutionProjectionError) as refused:
        call()
    assert refused.value.code == code, str(refused.value)
    assert str(refused.value).startswith(code)
    after = dump(path)
    if code not in PROJECTION_REFUSALS or code == "TASK_NOT_FOUND":
        assert after == before
        return
    assert _tables_changed(before, after) <= set(REFUSAL_TABLES), _tables_changed(before, after)
    added = rows(
        path,
        "SELECT event_type, payload_json, actor FROM events WHERE event_id > ? ORDER BY event_id",
        (events_before,),
    )
    assert [kind for kind, _, _ in added] == ["TASK_INITIAL_EXECUTION_PROJECTION_REFUSED"]
    payload = json.loads(added[0][1])
    assert (payload["code"], payload["message"]) == (code, refused.value.detail)
    assert json.loads(added[0][2])["name"] == TRIER.name
    with pytest.raises(InitialExecutionProjectionError) as replayed:
        call()
    assert (replayed.value.code, replayed.value.detail) == (code, refused.value.detail)
    assert dump(path) == after


def test_projection_writes_envelope_capability_event_and_ledger_row(
    tmp_path: Path, ledger_target: Path
) -> None:
    path = on_engine(legacy_database(tmp_path / "ledger.db"), ledger_target)
    answer = InitialExecutionProjectionStore(path, resolver).project(TASK, projection_request())
    assert answer["idempotent"] is False
    assert (answer["revision"], answer["attempt"], answer["status"]) == (2, 0, "QUEUED")
    assert answer["execution_digest"] == runtime_envelope()["execution_digest"]
    task = rows(
        path,
        "SELECT status, attempt, revision, claimed_by, metadata_json, "
        "required_capabilities_json FROM tasks",
    )[0]
    assert task[:4] == ("QUEUED", 0, 2, None)
    assert json.loads(task[4]) == {"execution": runtime_envelope()}
    assert json.loads(task[5]) == [CAPABILITY]
    events = rows(path, "SELECT event_type, payload_json FROM events ORDER BY event_id")
    assert [kind for kind, _ in events] == [
        "TASK_CREATED",
        "TASK_INITIAL_EXECUTION_PROJECTION_AUTHORIZED",
    ]
    payload = json.loads(events[-1][1])
    assert payload["job_id"] == JOB
    assert payload["authorization_id"] == OWNER
    assert not any(payload[flag] for flag in ("main_write", "production_write", "writer_lease"))
    ledger = rows(path, "SELECT idempotency_key, task_id FROM task_initial_execution_projections")
    assert ledger == [("projection-legacy-1", TASK)]


def test_exact_replay_answers_the_same_and_writes_nothing(
    tmp_path: Path, ledger_target: Path
) -> None:
    path = on_engine(legacy_database(tmp_path / "ledger.db"), ledger_target)
    store = InitialExecutionProjectionStore(path, resolver)
    first = store.project(TASK, projection_request())
    before = dump(path)
    second = store.project(TASK, projection_request())
    assert second == {**first, "idempotent": True}
    assert dump(path) == before


def test_same_key_with_another_body_is_an_idempotency_conflict(
    tmp_path: Path, ledger_target: Path
) -> None:
    path = on_engine(legacy_database(tmp_path / "ledger.db"), ledger_target)
    store = InitialExecutionProjectionStore(path, resolver)
    store.project(TASK, projection_request())
    other = projection_request(reason="a different reason")
    refuse("IDEMPOTENCY_CONFLICT", lambda: store.project(TASK, other), path)


def test_replay_is_recognised_before_the_task_state_is_checked(
    tmp_path: Path, ledger_target: Path
) -> None:
    """The task has moved on (revision 2) since the first call; the replay still answers."""
    path = on_engine(legacy_database(tmp_path / "ledger.db"), ledger_target)
    store = InitialExecutionProjectionStore(path, resolver)
    store.project(TASK, projection_request())
    assert store.project(TASK, projection_request())["idempotent"] is True


@pytest.mark.parametrize(
    ("overrides", "events", "code"),
    [
        ({"claimed_by": "worker-a"}, None, "TASK_ALREADY_CLAIMED"),
        (
            {"lease_token_hash": "h", "lease_expires_at": "2099-01-01T00:00:00Z"},
            None,
            "ACTIVE_LEASE_DENY",
        ),
        ({"metadata_json": '{"execution": {}}'}, None, "TASK_EXECUTION_ALREADY_PROJECTED"),
        (
            {"required_capabilities_json": '["git.read"]'},
            None,
            "TASK_INITIAL_CAPABILITIES_MUST_BE_EMPTY",
        ),
        ({}, [("TASK_CLAIMED", {})], "TASK_INITIAL_EVENT_CHAIN_REQUIRED"),
        ({}, [("TASK_CREATED", {}), ("TASK_HEARTBEAT", {})], "TASK_INITIAL_EVENT_CHAIN_REQUIRED"),
        ({"status": "CLAIMED"}, None, "REVISION_CONFLICT"),
        ({"revision": 3}, None, "REVISION_CONFLICT"),
        ({"metadata_json": '{"labels": ["release"]}'}, None, "METADATA_DIGEST_MISMATCH"),
        ({"metadata_json": "not json"}, None, "TASK_ROW_CORRUPT"),
    ],
)
def test_task_that_is_not_initial_is_refused(
    tmp_path: Path, ledger_target: Path, overrides: dict[str, Any], events: Any, code: str
) -> None:
    path = tmp_path / "ledger.db"
    if events is None:
        legacy_database(path, task_overrides=overrides)
    else:
        legacy_database(path, task_overrides=overrides, events=events)
    path = on_engine(path, ledger_target)
    store = InitialExecutionProjectionStore(path, resolver)
    refuse(code, lambda: store.project(TASK, projection_request()), path)


def test_unknown_task_is_refused(tmp_path: Path, ledger_target: Path) -> None:
    path = on_engine(legacy_database(tmp_path / "ledger.db"), ledger_target)
    store = InitialExecutionProjectionStore(path, resolver)
    refuse("TASK_NOT_FOUND", lambda: store.project("task-missing", projection_request()), path)


def wrong_resolver(envelope: JsonObject) -> Callable[..., JsonObject]:
    def answer(*_args: Any) -> JsonObject:
        return envelope

    return answer


@pytest.mark.parametrize(
    ("envelope", "code"),
    [
        (lambda: runtime_envelope(binding(job_id="job-other")), "GOVERNED_BINDING_CONFLICT"),
        (lambda: runtime_envelope(binding(task_id="task-other")), "GOVERNED_BINDING_CONFLICT"),
        (capture_envelope, "EXECUTION_ACTION_INVALID"),
        (lambda: runtime_envelope(binding(generation=2)), "EXECUTION_DIGEST_DRIFT"),
        (lambda: {**runtime_envelope(), "adapter": "other"}, "EXECUTION_ENVELOPE_INVALID"),
        (
            lambda: {**runtime_envelope(), "execution_digest": "sha256:" + "0" * 64},
            "EXECUTION_ENVELOPE_INVALID",
        ),
        (
            lambda: {**runtime_envelope(), "governance": {"writer_lease": True}},
            "EXECUTION_ENVELOPE_INVALID",
        ),
        (lambda: "not an envelope", "EXECUTION_ENVELOPE_INVALID"),
    ],
)
def test_resolved_envelope_must_match_the_request_and_itself(
    tmp_path: Path, ledger_target: Path, envelope: Callable[[], Any], code: str
) -> None:
    path = on_engine(legacy_database(tmp_path / "ledger.db"), ledger_target)
    store = InitialExecutionProjectionStore(path, wrong_resolver(envelope()))
    refuse(code, lambda: store.project(TASK, projection_request()), path)


def test_expected_digest_that_drifted_is_refused(tmp_path: Path, ledger_target: Path) -> None:
    path = on_engine(legacy_database(tmp_path / "ledger.db"), ledger_target)
    store = InitialExecutionProjectionStore(path, resolver)
    request = projection_request(expected_execution_digest="f" * 64)
    refuse("EXECUTION_DIGEST_DRIFT", lambda: store.project(TASK, request), path)


@pytest.mark.parametrize("configured", [None, "", "another-owner"])
def test_projection_needs_the_configured_owner_authorization(
    tmp_path: Path, ledger_target: Path, monkeypatch: pytest.MonkeyPatch, configured: str | None
) -> None:
    if configured is None:
        monkeypatch.delenv(AUTHORIZATION_ENV)
    else:
        monkeypatch.setenv(AUTHORIZATION_ENV, configured)
    path = on_engine(legacy_database(tmp_path / "ledger.db"), ledger_target)
    store = InitialExecutionProjectionStore(path, resolver)
    refuse("AUTHORIZATION_DENIED", lambda: store.project(TASK, projection_request()), path)


def test_request_with_another_authorization_is_denied(tmp_path: Path, ledger_target: Path) -> None:
    path = on_engine(legacy_database(tmp_path / "ledger.db"), ledger_target)
    store = InitialExecutionProjectionStore(path, resolver)
    request = projection_request(authorization_id="someone-else")
    refuse("AUTHORIZATION_DENIED", lambda: store.project(TASK, request), path)


def test_resolver_is_not_called_for_a_replay(tmp_path: Path, ledger_target: Path) -> None:
    path = on_engine(legacy_database(tmp_path / "ledger.db"), ledger_target)
    calls: list[str] = []

    def counting(*args: Any) -> JsonObject:
        calls.append(args[0])
        return resolver(*args)

    store = InitialExecutionProjectionStore(path, counting)
    store.project(TASK, projection_request())
    store.project(TASK, projection_request())
    assert calls == [TASK]


def test_task_changed_while_resolving_is_a_revision_conflict(
    tmp_path: Path, ledger_target: Path
) -> None:
    """The resolver runs outside the write lock; the decision re-reads under it."""
    path = on_engine(legacy_database(tmp_path / "ledger.db"), ledger_target)

    def racing(*args: Any) -> JsonObject:
        rows(path, "UPDATE tasks SET revision = revision + 1")
        return resolver(*args)

    store = InitialExecutionProjectionStore(path, racing)
    with pytest.raises(InitialExecutionProjectionError, match="REVISION_CONFLICT"):
        store.project(TASK, projection_request())
    # Nothing projected; the refused attempt is recorded, the task left as the race left it.
    events = rows(path, "SELECT event_type FROM events ORDER BY event_id")
    assert events == [("TASK_CREATED",), ("TASK_INITIAL_EXECUTION_PROJECTION_REFUSED",)]
    assert rows(path, "SELECT revision FROM tasks") == [(2,)]
    assert rows(path, "SELECT COUNT(*) FROM task_initial_execution_projections") == [(0,)]


def test_guarded_update_that_changes_no_row_rolls_everything_back(
    tmp_path: Path, ledger_target: Path
) -> None:
    """A plan decided on a state that is gone must not half-apply: the CAS guard catches it."""
    path = on_engine(legacy_database(tmp_path / "ledger.db"), ledger_target)
    db = Database(path)
    task_row = db.read(lambda conn: fetch_one(conn, "get_task", {"task_id": TASK}))
    assert task_row is not None
    events = db.read(lambda conn: fetch_all(conn, "log_export_task", {"task_id": TASK}))
    tail = db.read(lambda conn: read_log_tail(conn, [chain_of(TASK)]))
    from aios_ledger.core import EventRow

    state = ProjectionState(
        task=TaskRow.from_row(task_row),
        events=tuple(EventRow.from_row(event) for event in events),
        prior=None,
        tail=tail,
    )
    plan = decide_projection(
        state,
        ProjectionCommand(TASK, projection_request()),
        now=Timestamp.parse("2026-09-01T00:00:00Z"),
        envelope=runtime_envelope(),
        authorization_id=OWNER,
        source_capture_contract=result_contract(SOURCE_CAPTURE_RESULT),
        actor=ACTOR,
    )
    rows(path, "UPDATE tasks SET revision = 7")
    before = dump(path)
    with pytest.raises(InitialExecutionProjectionError, match="REVISION_CONFLICT"):
        db.write(lambda conn: apply_decision(conn, plan, error=InitialExecutionProjectionError))
    assert dump(path) == before
    db.close()


def test_request_records_are_strict() -> None:
    data = projection_request().public()
    with pytest.raises(InitialExecutionProjectionError, match="FIELDS_INVALID"):
        InitialExecutionProjectionRequest.from_mapping({**data, "metadata_patch": {}})
    missing = dict(data)
    del missing["reason"]
    with pytest.raises(InitialExecutionProjectionError, match="FIELDS_INVALID"):
        InitialExecutionProjectionRequest.from_mapping(missing)
    with pytest.raises(InitialExecutionProjectionError, match="FIELDS_INVALID"):
        InitialExecutionProjectionRequest.from_mapping({**data, "expected_revision": "1"})
    with pytest.raises(InitialExecutionProjectionError, match="FIELDS_INVALID"):
        InitialExecutionProjectionRequest.from_mapping({**data, "expected_revision": True})
    for field, value in [("expected_attempt", 1), ("expected_revision", 2)]:
        with pytest.raises(InitialExecutionProjectionError, match="INITIAL_STATE_REQUIRED"):
            InitialExecutionProjectionRequest.from_mapping({**data, field: value})
    recovery = recovery_request().public()
    with pytest.raises(InitialExecutionProjectionError, match="FIELDS_INVALID"):
        SourceCaptureProjectionRecoveryRequest.from_mapping({**recovery, "extra": 1})
    with pytest.raises(
        InitialExecutionProjectionError, match="SOURCE_CAPTURE_RECOVERY_STATE_REQUIRED"
    ):
        SourceCaptureProjectionRecoveryRequest.from_mapping({**recovery, "expected_attempt": 0})


def test_store_refuses_a_mapping_in_place_of_a_request(tmp_path: Path, ledger_target: Path) -> None:
    path = on_engine(legacy_database(tmp_path / "ledger.db"), ledger_target)
    store = InitialExecutionProjectionStore(path, resolver)
    raw: Any = projection_mapping()
    refuse("FIELDS_INVALID", lambda: store.project(TASK, raw), path)


# --- recovery after a governed source capture -------------------------------------------


def test_recovery_projects_the_first_runtime_envelope(tmp_path: Path, ledger_target: Path) -> None:
    path = on_engine(captured_database(tmp_path / "ledger.db"), ledger_target)
    store = InitialExecutionProjectionStore(path, resolver)
    answer = store.project_from_source_capture(TASK, recovery_request())
    assert answer["recovery_from_source_capture"] is True
    assert (answer["revision"], answer["attempt"], answer["idempotent"]) == (6, 1, False)
    task = rows(
        path,
        "SELECT status, attempt, revision, claimed_by, metadata_json, "
        "required_capabilities_json, result_json, verification_json FROM tasks",
    )[0]
    assert task[:4] == ("QUEUED", 1, 6, None)
    assert json.loads(task[4])["execution"] == runtime_envelope()
    assert json.loads(task[5]) == [CAPABILITY]
    assert json.loads(task[6]) == capture_result()
    assert json.loads(task[7]) == REWORK
    events = rows(path, "SELECT event_type, payload_json FROM events ORDER BY event_id")
    assert [kind for kind, _ in events] == [
        *(kind for kind, _ in REWORK_TRAIL),
        "TASK_INITIAL_EXECUTION_PROJECTION_AUTHORIZED",
    ]
    payload = json.loads(events[-1][1])
    assert payload["recovery_from_source_capture"] is True
    assert payload["source_capture_execution_digest"] == capture_envelope()["execution_digest"]
    replay = store.project_from_source_capture(TASK, recovery_request())
    assert replay == {**answer, "idempotent": True}
    assert rows(path, "SELECT COUNT(*) FROM task_source_capture_projection_recoveries") == [(1,)]


def test_recovery_accepts_several_heartbeats(tmp_path: Path, ledger_target: Path) -> None:
    trail = [*REWORK_TRAIL[:3], ("TASK_HEARTBEAT", {}), *REWORK_TRAIL[3:]]
    path = on_engine(captured_database(tmp_path / "ledger.db", events=trail), ledger_target)
    answer = InitialExecutionProjectionStore(path, resolver).project_from_source_capture(
        TASK, recovery_request()
    )
    assert answer["revision"] == 6


def mutated(**changes: Any) -> JsonObject:
    return {**capture_result(), **changes}


@pytest.mark.parametrize(
    ("result", "verification", "code"),
    [
        (mutated(changed_files=["src/app.py"]), None, "SOURCE_CAPTURE_RESULT_CONTRACT_INVALID"),
        (mutated(job_id="job-other"), None, "SOURCE_CAPTURE_RESULT_CONTRACT_INVALID"),
        (mutated(production_write=True), None, "SOURCE_CAPTURE_RESULT_CONTRACT_INVALID"),
        (mutated(target_branch="agent/elsewhere"), None, "SOURCE_CAPTURE_RESULT_CONTRACT_INVALID"),
        (mutated(unexpected=1), None, "SOURCE_CAPTURE_RESULT_CONTRACT_INVALID"),
        (
            mutated(execution_digest="sha256:" + "1" * 64),
            None,
            "SOURCE_CAPTURE_EXECUTION_DIGEST_MISMATCH",
        ),
        (
            None,
            {"decision": "SUCCEEDED", "reason": "done"},
            "SOURCE_CAPTURE_NEEDS_REWORK_VERIFICATION_REQUIRED",
        ),
    ],
)
def test_recovery_refuses_an_unsafe_result_or_verification(
    tmp_path: Path,
    ledger_target: Path,
    result: JsonObject | None,
    verification: JsonObject | None,
    code: str,
) -> None:
    path = on_engine(
        captured_database(tmp_path / "ledger.db", result=result, verification=verification),
        ledger_target,
    )
    store = InitialExecutionProjectionStore(path, resolver)
    request = recovery_request(result, verification)
    refuse(code, lambda: store.project_from_source_capture(TASK, request), path)


def test_recovery_refuses_a_result_other_than_the_expected_one(
    tmp_path: Path, ledger_target: Path
) -> None:
    path = on_engine(captured_database(tmp_path / "ledger.db"), ledger_target)
    store = InitialExecutionProjectionStore(path, resolver)
    request = recovery_request(mutated(generation=2))
    refuse(
        "SOURCE_CAPTURE_RESULT_DIGEST_MISMATCH",
        lambda: store.project_from_source_capture(TASK, request),
        path,
    )
    # Another request under another key: the first key keeps its refusal.
    request = recovery_request(
        verification={"decision": "NEEDS_REWORK", "reason": "other"},
        idempotency_key="recovery-legacy-2",
    )
    refuse(
        "VERIFICATION_DIGEST_MISMATCH",
        lambda: store.project_from_source_capture(TASK, request),
        path,
    )


@pytest.mark.parametrize(
    "trail",
    [
        ["TASK_CREATED", "TASK_CLAIMED", "RESULT_SUBMITTED", "TASK_VERIFIED"],
        [
            "TASK_CREATED",
            "TASK_CLAIMED",
            "TASK_HEARTBEAT",
            "RESULT_SUBMITTED",
            "TASK_VERIFIED",
            "TASK_CLAIMED",
        ],
        ["TASK_CREATED", "TASK_CLAIMED", "TASK_HEARTBEAT", "TASK_VERIFIED", "RESULT_SUBMITTED"],
        ["TASK_CLAIMED", "TASK_HEARTBEAT", "RESULT_SUBMITTED", "TASK_VERIFIED"],
        ["TASK_CREATED", "TASK_CLAIMED", "TASK_CLAIMED", "RESULT_SUBMITTED", "TASK_VERIFIED"],
    ],
)
def test_recovery_refuses_any_other_event_chain(
    tmp_path: Path, ledger_target: Path, trail: list[str]
) -> None:
    events: list[tuple[str, JsonObject]] = [
        (
            kind,
            {"decision": "NEEDS_REWORK", "next_state": "QUEUED"} if kind == "TASK_VERIFIED" else {},
        )
        for kind in trail
    ]
    path = on_engine(captured_database(tmp_path / "ledger.db", events=events), ledger_target)
    store = InitialExecutionProjectionStore(path, resolver)
    refuse(
        "SOURCE_CAPTURE_RECOVERY_EVENT_CHAIN_INVALID",
        lambda: store.project_from_source_capture(TASK, recovery_request()),
        path,
    )


def test_recovery_refuses_a_verification_event_that_did_not_requeue(
    tmp_path: Path, ledger_target: Path
) -> None:
    failed: JsonObject = {"decision": "FAILED", "next_state": "FAILED"}
    events = [*REWORK_TRAIL[:-1], ("TASK_VERIFIED", failed)]
    path = on_engine(captured_database(tmp_path / "ledger.db", events=events), ledger_target)
    store = InitialExecutionProjectionStore(path, resolver)
    refuse(
        "SOURCE_CAPTURE_RECOVERY_EVENT_CHAIN_INVALID",
        lambda: store.project_from_source_capture(TASK, recovery_request()),
        path,
    )


def test_recovery_with_a_drifted_digest_is_refused(tmp_path: Path, ledger_target: Path) -> None:
    path = on_engine(captured_database(tmp_path / "ledger.db"), ledger_target)
    store = InitialExecutionProjectionStore(path, resolver)
    request = recovery_request(expected_execution_digest="f" * 64)
    refuse("EXECUTION_DIGEST_DRIFT", lambda: store.project_from_source_capture(TASK, request), path)
