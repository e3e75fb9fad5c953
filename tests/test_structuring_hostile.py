"""The structuring layer under hostile input: every request record's `from_mapping` either builds
the record or raises that record's LedgerError class with one of its stable codes and a path in
the message, whatever it is fed (nested junk, huge numbers, NaN, bools for ints, lone surrogates,
NUL, very long text, keys that are not text); and no coercion slips through any primitive hook.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from typing import Any

import attrs
import pytest
from aios_ledger.core import (
    AuxiliaryRunError,
    CancelRequest,
    ClaimBatchRequest,
    ClaimRequest,
    GovernedExecutionBinding,
    HeartbeatRequest,
    InitialExecutionProjectionError,
    LedgerError,
    SubmitRequest,
    TaskCreateCommand,
    TaskCreateRequest,
    TaskListRequest,
    TaskReadRequest,
    VerifyRequest,
    digest_bytes,
    project_execution_envelope,
)
from aios_ledger.core.auxiliary import (
    AUXILIARY_SNAPSHOT_SCHEMA_V1,
    AuxiliaryCapabilityProfile,
    AuxiliaryRunListRequest,
    AuxiliaryRunSnapshot,
    AuxiliaryRunSpec,
    ExecutionFrame,
)
from aios_ledger.core.log import LedgerHead
from aios_ledger.core.projection import (
    InitialExecutionProjectionRequest,
    SourceCaptureProjectionRecoveryRequest,
)
from aios_ledger.core.runs import (
    EvidenceReadRequest,
    ExecutionTarget,
    RunCreateRequest,
    RunEventAppendRequest,
    RunEventsRequest,
    RunReadRequest,
)
from aios_ledger.core.structuring import structure
from aios_ledger.core.tasks.requests import ReleaseRequest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from legacy_fixtures import binding, projection_mapping, recovery_mapping

EXAMPLES = 200
TOKEN = "lease-token-0123456789abcdef"
DIGEST = digest_bytes("evidence", b"hostile")
HEX = "ab" * 32
TARGET = {"session_id": "session-1", "run_id": "run-1"}
FRAME = {"target": TARGET, "depth": 0, "parent_id": None}
PROFILE = AuxiliaryCapabilityProfile.tool_free().public()
SPEC = AuxiliaryRunSpec(ExecutionFrame.root(ExecutionTarget(**TARGET)), "k", "i", DIGEST).public()


@attrs.frozen
class Record:
    """A `from_mapping`, a valid document for it, and what it may refuse with."""

    parse: Callable[[object], object]
    valid: dict[str, Any]
    error: type[LedgerError] = LedgerError
    codes: frozenset[str] = frozenset({"FIELDS_INVALID"})


RECORDS: dict[str, Record] = {
    "task": Record(
        TaskCreateRequest.from_mapping,
        {
            "task_id": "t-1",
            "goal": "g",
            "instructions": "i",
            "success_criteria": ["done"],
            "required_capabilities": ["git.read"],
            "constraints": {},
            "metadata": {"scope": "x"},
            "deadline": "2026-08-20T00:00:00Z",
            "priority": 5,
            "max_attempts": 3,
        },
    ),
    "create": Record(
        TaskCreateCommand.from_mapping,
        {"task": {"goal": "g", "instructions": "i"}, "idempotency_key": "k-1"},
    ),
    "claim": Record(
        ClaimRequest.from_mapping,
        {
            "agent_id": "w",
            "capabilities": ["git.read"],
            "lease_seconds": 60,
            "task_id": "t-1",
            "idempotency_key": "k",
            "lease_token": TOKEN,
        },
        codes=frozenset({"FIELDS_INVALID", "LEASE_TOKEN_REQUIRED"}),
    ),
    "claim batch": Record(
        ClaimBatchRequest.from_mapping,
        {"agent_id": "w", "capabilities": [], "lease_seconds": 60, "limit": 8},
    ),
    "heartbeat": Record(
        HeartbeatRequest.from_mapping, {"task_id": "t-1", "lease_token": TOKEN, "lease_seconds": 60}
    ),
    "release": Record(
        ReleaseRequest.from_mapping, {"task_id": "t-1", "lease_token": TOKEN, "reason": "stop"}
    ),
    "submit": Record(
        SubmitRequest.from_mapping,
        {"task_id": "t-1", "lease_token": TOKEN, "result": {"ok": True}, "idempotency_key": "k"},
    ),
    "verify": Record(
        VerifyRequest.from_mapping,
        {
            "task_id": "t-1",
            "decision": "FAILED",
            "reason": "r",
            "idempotency_key": "k",
            "expected_result_digest": HEX,
        },
    ),
    "cancel": Record(
        CancelRequest.from_mapping, {"task_id": "t-1", "reason": "r", "idempotency_key": "k"}
    ),
    "task read": Record(TaskReadRequest.from_mapping, {"task_id": "t-1"}),
    "task list": Record(TaskListRequest.from_mapping, {"status": "QUEUED", "limit": 10}),
    "projection": Record(
        InitialExecutionProjectionRequest.from_mapping,
        projection_mapping(),
        InitialExecutionProjectionError,
        frozenset({"FIELDS_INVALID", "INITIAL_STATE_REQUIRED"}),
    ),
    "recovery": Record(
        SourceCaptureProjectionRecoveryRequest.from_mapping,
        recovery_mapping(),
        InitialExecutionProjectionError,
        frozenset({"FIELDS_INVALID", "SOURCE_CAPTURE_RECOVERY_STATE_REQUIRED"}),
    ),
    "binding": Record(
        GovernedExecutionBinding.from_mapping,
        binding().public(),
        codes=frozenset({"FIELDS_INVALID", "BINDING_PROTECTED_BRANCH", "BINDING_INVALID"}),
    ),
    "envelope action": Record(
        lambda raw: project_execution_envelope(binding(), raw),  # type: ignore[arg-type]
        {
            "action": "agent_runtime",
            "adapter": "openclaw",
            "capability_scope": ["agent.runtime.openclaw"],
            "runtime_input": {},
        },
        codes=frozenset(
            {
                "FIELDS_INVALID",
                "ADAPTER_INVALID",
                "CAPABILITY_SCOPE_INVALID",
                "RUNTIME_INPUT_INVALID",
                "JSON_INVALID",
                "JSON_TOO_DEEP",
                "JSON_NUMBER_TOO_LARGE",
            }
        ),
    ),
    "target": Record(ExecutionTarget.from_mapping, TARGET),
    "evidence request": Record(
        EvidenceReadRequest.from_mapping, {"target": TARGET, "max_events": 5, "max_bytes": 999}
    ),
    "run": Record(
        RunCreateRequest.from_mapping, {"session_id": "s", "prompt": "p", "run_id": "run-1"}
    ),
    "run event": Record(
        RunEventAppendRequest.from_mapping, {"run_id": "run-1", "kind": "note", "payload": {}}
    ),
    "run read": Record(RunReadRequest.from_mapping, {"run_id": "run-1"}),
    "run events": Record(RunEventsRequest.from_mapping, {"run_id": "run-1", "limit": 3}),
    "frame": Record(
        ExecutionFrame.from_mapping,
        FRAME,
        AuxiliaryRunError,
        frozenset({"INVALID_FIELD", "FRAME_TOO_DEEP"}),
    ),
    "profile": Record(
        AuxiliaryCapabilityProfile.from_mapping,
        PROFILE,
        AuxiliaryRunError,
        frozenset({"INVALID_FIELD"}),
    ),
    "spec": Record(
        AuxiliaryRunSpec.from_mapping,
        SPEC,
        AuxiliaryRunError,
        frozenset({"INVALID_FIELD", "FRAME_TOO_DEEP", "CAPABILITY_ESCALATION"}),
    ),
    "snapshot": Record(
        AuxiliaryRunSnapshot.from_mapping,
        {
            "schema": AUXILIARY_SNAPSHOT_SCHEMA_V1,
            "id": "aux-1",
            "parent": FRAME,
            "mode": "ISOLATED",
            "state": "FAILED",
            "spec_digest": DIGEST,
            "created_at_ms": 1,
            "updated_at_ms": 2,
            "output_digest": None,
            "error": "EXECUTOR: boom",
        },
        AuxiliaryRunError,
        frozenset({"INVALID_FIELD", "FRAME_TOO_DEEP"}),
    ),
    "aux list": Record(
        AuxiliaryRunListRequest.from_mapping,
        {"state": "PENDING", "session_id": "s", "run_id": None, "limit": 10},
    ),
    "head": Record(
        LedgerHead.from_mapping,
        {"schema": "aios.ledger_head.v1", "events": 2, "last_event_id": 2, "digest": DIGEST},
        codes=frozenset({"HEAD_INVALID"}),
    ),
}

# `path: message` (a record's name, its fields, list indices), or a cross-field rule's own text.
PATH_FIRST = re.compile(r"^[\w .:/\[\]-]*[\w\]]: ")

surrogates = st.characters(min_codepoint=0xD800, max_codepoint=0xDFFF)
texts = (
    st.text(max_size=20)
    | st.text(surrogates | st.characters(), max_size=5)
    | st.sampled_from(
        ["", " ", "\ud800", "a\x00b", "x" * 100_000, "7", "1.0", "true", "false", "null", "[]"]
    )
)
leaves = (
    st.none()
    | st.booleans()
    | st.integers()
    | st.sampled_from([10**400, -(10**400), 2**63, -(2**63) - 1, 2**62 + 1])
    | st.floats(allow_nan=True, allow_infinity=True)
    | texts
    | st.binary(max_size=4)
)
keys = texts | st.integers() | st.none() | st.booleans() | st.tuples(st.integers())
junk = st.recursive(
    leaves,
    lambda inner: (
        st.lists(inner, max_size=3)
        | st.tuples(inner, inner)
        | st.dictionaries(keys, inner, max_size=3)
        | st.frozensets(st.integers(), max_size=2)
    ),
    max_leaves=12,
)


@st.composite
def near(draw: st.DrawFn, valid: dict[str, Any]) -> dict[Any, Any]:
    """The valid document with one field replaced, dropped or a key added, at any depth."""
    document: dict[Any, Any] = dict(valid)
    key = draw(st.sampled_from(sorted(document)))
    action = draw(st.sampled_from(["replace", "replace", "nested", "drop", "add"]))
    if action == "nested" and isinstance(document[key], dict) and document[key]:
        document[key] = draw(near(document[key]))
    elif action == "drop":
        del document[key]
    elif action == "add":
        document[draw(keys)] = draw(junk)
    else:
        document[key] = draw(junk)
    return document


def _check_refusal(record: Record, refused: LedgerError) -> None:
    assert isinstance(refused, record.error), repr(refused)
    assert refused.code in record.codes, repr(refused)
    if refused.code in {"FIELDS_INVALID", "HEAD_INVALID"}:
        assert PATH_FIRST.match(refused.detail), repr(refused)
    if isinstance(refused, AuxiliaryRunError) and refused.code == "INVALID_FIELD":
        assert refused.field, repr(refused)
        assert refused.detail.startswith(f"{refused.field}: "), repr(refused)


@pytest.mark.parametrize("name", sorted(RECORDS))
def test_the_valid_document_builds(name: str) -> None:
    record = RECORDS[name]
    record.parse(record.valid)


@pytest.mark.parametrize("name", sorted(RECORDS))
def test_hostile_input_builds_or_is_refused_with_a_code_and_a_path(name: str) -> None:
    record = RECORDS[name]

    @settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=list(HealthCheck))
    @given(raw=junk | near(record.valid))
    def check(raw: object) -> None:
        try:
            record.parse(raw)
        except LedgerError as refused:
            _check_refusal(record, refused)

    check()


# --- no coercion, kind by kind --------------------------------------------------------------


@attrs.frozen
class Sample:
    text: str
    count: int
    flag: bool
    ratio: float
    items: list[int]
    table: dict[str, int]
    maybe: int | None


VALID_SAMPLE = {
    "text": "t",
    "count": 1,
    "flag": False,
    "ratio": 0.5,
    "items": [1],
    "table": {"a": 1},
    "maybe": None,
}


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [
        ("text", 7, "must be a string, got int"),
        ("text", None, "must be a string, got NoneType"),
        ("text", b"t", "must be a string, got bytes"),
        ("count", True, "must be an integer, got bool"),
        ("count", 1.0, "must be an integer, got float"),
        ("count", "7", "must be an integer, got str"),
        ("count", None, "must be an integer, got NoneType"),
        ("flag", "false", "must be true or false, got str"),
        ("flag", 0, "must be true or false, got int"),
        ("flag", 1, "must be true or false, got int"),
        ("ratio", 1, "must be a floating-point number, got int"),
        ("ratio", "0.5", "must be a floating-point number, got str"),
        ("items", "abc", "must be a JSON array, got str"),
        ("items", {"a": 1}, "must be a JSON array, got dict"),
        ("items", (1,), "must be a JSON array, got tuple"),
        ("items", {1}, "must be a JSON array, got set"),
        ("table", [["a", 1]], "must be a JSON object, got list"),
        ("table", "a=1", "must be a JSON object, got str"),
        ("maybe", 1.0, "must be an integer, got float"),
        ("maybe", "", "must be an integer, got str"),
    ],
)
def test_no_primitive_hook_coerces(field: str, value: object, message: str) -> None:
    assert structure(VALID_SAMPLE, Sample, what="sample").maybe is None
    with pytest.raises(LedgerError) as refused:
        structure({**VALID_SAMPLE, field: value}, Sample, what="sample")
    assert (refused.value.code, refused.value.detail) == (
        "FIELDS_INVALID",
        f"sample.{field}: {message}",
    )


def test_items_are_refused_at_their_index_and_keys_are_text() -> None:
    with pytest.raises(LedgerError) as refused:
        structure({**VALID_SAMPLE, "items": [1, "2", True]}, Sample, what="sample")
    assert refused.value.detail == (
        "sample.items[1]: must be an integer, got str; "
        "sample.items[2]: must be an integer, got bool"
    )
    with pytest.raises(LedgerError, match="has a key that is not text"):
        structure({**VALID_SAMPLE, "table": {1: 1}}, Sample, what="sample")


@pytest.mark.parametrize(
    ("name", "field", "value"),
    [
        ("heartbeat", "lease_seconds", "60"),
        ("heartbeat", "lease_seconds", 60.0),
        ("heartbeat", "lease_seconds", True),
        ("heartbeat", "task_id", 7),
        ("task", "required_capabilities", "git.read"),
        ("task", "success_criteria", {"done": True}),
        ("task", "constraints", []),
        ("task", "priority", math.nan),
        ("task", "deadline", 0),
        ("submit", "result", [{"ok": True}]),
        ("verify", "expected_result_digest", HEX.upper()),
        ("profile", "network", "false"),
        ("profile", "read_workspace", 0),
        ("profile", "tools", "grep"),
        ("spec", "timeout_ms", 1.0),
        ("spec", "mode", 0),
        ("spec", "mode", "PARALLEL"),
        ("snapshot", "state", "DONE"),
        ("snapshot", "mode", True),
        ("head", "events", True),
        ("aux list", "state", 1),
        ("aux list", "state", "DONE"),
    ],
)
def test_no_record_field_coerces(name: str, field: str, value: object) -> None:
    record = RECORDS[name]
    with pytest.raises(LedgerError) as refused:
        record.parse({**record.valid, field: value})
    _check_refusal(record, refused.value)
    assert field in refused.value.detail


def test_unknown_and_missing_fields_are_listed_together() -> None:
    with pytest.raises(LedgerError) as refused:
        HeartbeatRequest.from_mapping({"task_id": "t", "lease": 1, 2: 3})
    assert refused.value.detail == (
        "heartbeat: unknown ['2', 'lease'], missing ['lease_token', 'lease_seconds']"
    )


def test_a_complete_form_names_its_defaulted_fields_too() -> None:
    with pytest.raises(AuxiliaryRunError) as refused:
        AuxiliaryRunSpec.from_mapping({key: SPEC[key] for key in SPEC if key != "mode"})
    assert (refused.value.field, refused.value.detail) == ("spec", "spec: missing ['mode']")
    with pytest.raises(AuxiliaryRunError) as nested:
        AuxiliaryRunSpec.from_mapping({**SPEC, "frame": {**FRAME, "depth": "0"}})
    assert nested.value.field == "frame.depth"


def test_a_record_built_directly_is_checked_by_the_same_hooks() -> None:
    target = ExecutionTarget("session-1", 7)  # type: ignore[arg-type]
    with pytest.raises(LedgerError) as refused:
        EvidenceReadRequest(target, max_events=True).validate()
    assert refused.value.detail == (
        "evidence request.target.run_id: must be a string, got int; "
        "evidence request.max_events: must be an integer, got bool"
    )
    root = ExecutionFrame.root(ExecutionTarget(**TARGET))
    frame = attrs.evolve(root, target="nope")  # type: ignore[arg-type]
    with pytest.raises(AuxiliaryRunError) as wrong_class:
        frame.validate()
    assert wrong_class.value.field == "frame.target"


def test_public_forms_keep_their_exact_shape() -> None:
    """The documents idempotency digests are computed from: no token, no key where the record
    leaves them out."""
    claim = ClaimRequest.from_mapping(RECORDS["claim"].valid).public(TOKEN)
    assert sorted(claim) == [
        "agent_id",
        "capabilities",
        "lease_seconds",
        "lease_token_sha256",
        "task_id",
    ]
    submit = SubmitRequest.from_mapping(RECORDS["submit"].valid).public()
    assert sorted(submit) == ["lease_token_sha256", "result", "task_id"]
    assert TOKEN not in str(submit) and TOKEN not in str(claim)
    assert sorted(VerifyRequest.from_mapping(RECORDS["verify"].valid).public()) == [
        "decision",
        "expected_result_digest",
        "reason",
        "task_id",
    ]
    assert CancelRequest.from_mapping(RECORDS["cancel"].valid).public() == {
        "task_id": "t-1",
        "reason": "r",
    }
    projection = InitialExecutionProjectionRequest.from_mapping(projection_mapping())
    assert projection.public() == projection_mapping()
    spec = AuxiliaryRunSpec.from_mapping(SPEC)
    assert spec.public() == SPEC
    root = ExecutionFrame.root(ExecutionTarget(**TARGET))
    assert spec == AuxiliaryRunSpec(root, "k", "i", DIGEST)
