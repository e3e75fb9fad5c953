"""Bindings, envelopes and their digests: pure, no database."""

from __future__ import annotations

import contextlib
from typing import Any

import attrs
import pytest
from aios_ledger.core import (
    GovernedExecutionBinding,
    InitialExecutionProjectionError,
    LedgerError,
    project_execution_envelope,
    verify_execution_envelope,
)
from aios_ledger.core.projection import (
    InitialExecutionProjectionRequest,
    SourceCaptureProjectionRecoveryRequest,
)
from hypothesis import given, settings
from hypothesis import strategies as st
from legacy_fixtures import (
    binding,
    capture_envelope,
    projection_mapping,
    runtime_envelope,
    runtime_input,
)
from syrupy.assertion import SnapshotAssertion

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(),
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=8), children, max_size=4)
    ),
    max_leaves=12,
)


def test_envelopes_are_golden(golden: SnapshotAssertion) -> None:
    assert golden == {"runtime": runtime_envelope(), "capture": capture_envelope()}


def test_envelope_digest_is_reverified() -> None:
    envelope = runtime_envelope()
    assert verify_execution_envelope(envelope) == envelope
    forged = {**envelope, "runtime_input": {**runtime_input(), "goal": "something else"}}
    with pytest.raises(LedgerError, match="EXECUTION_ENVELOPE_INVALID"):
        verify_execution_envelope(forged)
    sneaky = {**envelope, "governance": {**envelope["governance"], "main_write": 0}}  # type: ignore[dict-item]
    with pytest.raises(LedgerError, match="EXECUTION_ENVELOPE_INVALID"):
        verify_execution_envelope(sneaky)


def test_digest_covers_every_input() -> None:
    digests = {
        runtime_envelope()["execution_digest"],
        runtime_envelope(binding(generation=2))["execution_digest"],
        runtime_envelope(binding(base_oid="f" * 40, expected_branch_oid="f" * 40))[
            "execution_digest"
        ],
        capture_envelope()["execution_digest"],
    }
    assert len(digests) == 4
    assert all(str(digest).startswith("sha256:") for digest in digests)


@pytest.mark.parametrize(
    ("overrides", "code"),
    [
        ({"target_branch": "main"}, "BINDING_PROTECTED_BRANCH"),
        ({"target_branch": "refs/heads/master"}, "BINDING_PROTECTED_BRANCH"),
        ({"target_branch": "bad..name"}, "FIELDS_INVALID"),
        ({"target_branch": "has space"}, "FIELDS_INVALID"),
        ({"target_branch": "x.lock"}, "FIELDS_INVALID"),
        ({"base_oid": "A" * 40, "expected_branch_oid": "A" * 40}, "FIELDS_INVALID"),
        ({"base_oid": "a" * 39}, "FIELDS_INVALID"),
        ({"base_oid": "a" * 64, "expected_branch_oid": "a" * 40}, "BINDING_INVALID"),
        ({"expected_branch_oid": "b" * 40}, "BINDING_INVALID"),
        ({"generation": 0}, "FIELDS_INVALID"),
        ({"generation": True}, "FIELDS_INVALID"),
        ({"branch_mode": "FORCE"}, "FIELDS_INVALID"),
        ({"repository": "no-owner"}, "FIELDS_INVALID"),
        ({"repository": "../etc/passwd"}, "FIELDS_INVALID"),
        ({"idempotency_key": ""}, "FIELDS_INVALID"),
        ({"task_id": "\ud800"}, "FIELDS_INVALID"),
        ({"extra": 1}, "FIELDS_INVALID"),
    ],
)
def test_binding_rules(overrides: dict[str, Any], code: str) -> None:
    with pytest.raises(LedgerError) as refused:
        binding(**overrides)
    assert refused.value.code == code


def test_update_existing_branch_may_start_elsewhere() -> None:
    moved = binding(branch_mode="UPDATE_EXISTING", expected_branch_oid="b" * 40)
    assert moved.public()["expected_branch_oid"] == "b" * 40


@pytest.mark.parametrize(
    ("projection", "code"),
    [
        ({"adapter": "source_capture"}, "ADAPTER_INVALID"),
        ({"capability_scope": []}, "CAPABILITY_SCOPE_INVALID"),
        ({"capability_scope": ["agent.runtime.other"]}, "CAPABILITY_SCOPE_INVALID"),
        ({"capability_scope": ["agent.runtime.openclaw", "git.write"]}, "CAPABILITY_SCOPE_INVALID"),
        ({"capability_scope": "agent.runtime.openclaw"}, "CAPABILITY_SCOPE_INVALID"),
        ({"runtime_input": None}, "RUNTIME_INPUT_INVALID"),
        ({"runtime_input": {"x": float("nan")}}, "JSON_INVALID"),
        ({"action": "deploy"}, "FIELDS_INVALID"),
    ],
)
def test_projection_rules(projection: dict[str, Any], code: str) -> None:
    mapping = {
        "action": "agent_runtime",
        "adapter": "openclaw",
        "capability_scope": ["agent.runtime.openclaw"],
        "runtime_input": runtime_input(),
        **projection,
    }
    with pytest.raises(LedgerError) as refused:
        project_execution_envelope(binding(), mapping)
    assert refused.value.code == code


def test_source_capture_takes_no_runtime_input() -> None:
    with pytest.raises(LedgerError, match="RUNTIME_INPUT_INVALID"):
        project_execution_envelope(
            binding(),
            {
                "action": "source_capture",
                "adapter": "source_capture",
                "capability_scope": ["git.read"],
                "runtime_input": {},
            },
        )


def test_public_round_trips() -> None:
    assert GovernedExecutionBinding.from_mapping(binding().public()) == binding()


@settings(max_examples=200, deadline=None)
@given(
    st.one_of(
        json_values,
        st.dictionaries(st.text(max_size=40), json_values, max_size=16),
    )
)
def test_from_mapping_refuses_anything_with_a_ledger_error(raw: Any) -> None:
    for parse in (
        GovernedExecutionBinding.from_mapping,
        InitialExecutionProjectionRequest.from_mapping,
        SourceCaptureProjectionRecoveryRequest.from_mapping,
        verify_execution_envelope,
    ):
        try:
            parse(raw)
        except LedgerError as refused:
            assert str(refused).startswith(refused.code)


@settings(max_examples=200, deadline=None)
@given(st.sampled_from(sorted(binding().public())), json_values)
def test_one_wrong_field_is_a_ledger_error(field: str, value: Any) -> None:
    with contextlib.suppress(LedgerError):
        GovernedExecutionBinding.from_mapping({**binding().public(), field: value})


@settings(max_examples=100, deadline=None)
@given(
    st.sampled_from([field.name for field in attrs.fields(InitialExecutionProjectionRequest)]),
    json_values,
)
def test_request_field_of_any_shape(field: str, value: Any) -> None:
    with contextlib.suppress(InitialExecutionProjectionError):
        InitialExecutionProjectionRequest.from_mapping({**projection_mapping(), field: value})


def test_deeply_nested_input_is_refused_not_crashed() -> None:
    deep: Any = []
    for _ in range(10_000):
        deep = [deep]
    with pytest.raises(LedgerError, match="JSON_TOO_DEEP"):
        project_execution_envelope(
            binding(),
            {
                "action": "agent_runtime",
                "adapter": "openclaw",
                "capability_scope": ["agent.runtime.openclaw"],
                "runtime_input": {"deep": deep},
            },
        )
