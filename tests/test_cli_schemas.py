"""`aios-ledger schema NAME`: each request file's JSON Schema is a valid draft 2020-12 schema,
and it agrees with the record that structures the file: what the record accepts, the schema
accepts; what the record refuses as FIELDS_INVALID (unknown, missing, wrong type, out of range,
malformed), the schema refuses."""

from __future__ import annotations

import json
import os
import re
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from importlib import resources
from typing import Any

import attrs
import pytest
from aios_ledger.core import LedgerError
from aios_ledger.core.batches import MAX_BATCH, structure_batch
from aios_ledger.core.request_schemas import REQUEST_DOCUMENTS, request_schema
from aios_ledger.core.schemas import record_schema
from aios_ledger.core.tasks.results import RESULT_CONTRACTS
from aios_ledger.shell.cli import main
from aios_ledger.shell.schemas_cli import RESULT_SCHEMAS
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from jsonschema import Draft202012Validator, ValidationError, validators
from legacy_fixtures import binding

SHA = "a" * 64
# Generated documents: a sample in `make test`, the full count under `make soak` (AIOS_SOAK=1).
SOAK = os.environ.get("AIOS_SOAK") == "1"
DOCUMENTS = 300 if SOAK else 60
BRANCHES = 1500 if SOAK else 200
DIGEST = "sha256:" + "b" * 64
TOKEN = "schema-token-0123456789"

VALID: dict[str, dict[str, Any]] = {
    "task": {
        "idempotency_key": "create-1",
        "task": {
            "task_id": "t1",
            "goal": "g",
            "instructions": "i",
            "required_capabilities": ["python"],
            "deadline": "2030-01-02T03:04:05Z",
            "priority": 5,
        },
    },
    "claim": {"agent_id": "w", "capabilities": ["python"], "lease_seconds": 60},
    "heartbeat": {"task_id": "t1", "lease_token": TOKEN, "lease_seconds": 60},
    "release": {"task_id": "t1", "lease_token": TOKEN, "reason": "worker stopped"},
    "submit": {"task_id": "t1", "lease_token": TOKEN, "result": {"x": 1}, "idempotency_key": "s"},
    "verify": {"task_id": "t1", "decision": "SUCCEEDED", "reason": "r", "idempotency_key": "v"},
    "cancel": {"task_id": "t1", "reason": "r", "idempotency_key": "c"},
    "retry": {"task_id": "t1", "reason": "r", "idempotency_key": "r", "extra_attempts": 2},
    "binding": binding().public(),
    "projection": {
        "expected_status": "QUEUED",
        "expected_revision": 1,
        "expected_attempt": 0,
        "expected_metadata_sha256": SHA,
        "expected_required_capabilities_sha256": SHA,
        "expected_job_id": "job-1",
        "expected_execution_digest": DIGEST,
        "required_capability": "python",
        "adapter": "codex",
        "authorization_id": "owner-1",
        "idempotency_key": "p",
        "reason": "first envelope",
    },
}
VALID["projection-recovery"] = {
    **VALID["projection"],
    "expected_attempt": 1,
    "previous_verification_sha256": SHA,
    "expected_source_capture_result_sha256": SHA,
    "expected_source_capture_execution_digest": DIGEST,
}


def _ecma_pattern(
    validator: Any, pattern: str, instance: Any, schema: Any
) -> Iterator[ValidationError]:
    """`pattern` as ECMA-262 reads it: a final `$` ends the text (Python's `$` also matches
    before a final newline, so `re.search` would take "a\\n" for an identifier)."""
    if not validator.is_type(instance, "string"):
        return
    python = pattern[:-1] + r"\Z" if pattern.endswith("$") else pattern
    if not re.search(python, instance):
        yield ValidationError(f"{instance!r} does not match {pattern!r}")


EcmaValidator = validators.extend(  # type: ignore[no-untyped-call]
    Draft202012Validator, {"pattern": _ecma_pattern}
)


def _parse(name: str) -> Callable[[object], object]:
    parse: Callable[[object], object] = REQUEST_DOCUMENTS[name].record.from_mapping  # type: ignore[attr-defined]
    if not REQUEST_DOCUMENTS[name].batch:
        return parse
    return lambda raw: structure_batch(raw, parse) if isinstance(raw, list) else parse(raw)


def verdict(name: str, document: object) -> bool | None:
    """True when the record accepts the document, False when it refuses its shape
    (FIELDS_INVALID), None when it refuses it for a rule across fields, which no schema says."""
    try:
        _parse(name)(document)
    except LedgerError as refused:
        return False if refused.code == "FIELDS_INVALID" else None
    return True


def schema_accepts(name: str, document: object) -> bool:
    return bool(EcmaValidator(request_schema(name)).is_valid(document))


def test_every_name_is_listed_and_each_schema_is_valid(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["schema"]) == 0
    listed = [name for name in json.loads(capsys.readouterr().out) if name not in RESULT_SCHEMAS]
    assert sorted(listed) == sorted(VALID) == sorted(REQUEST_DOCUMENTS)
    for name in listed:
        assert main(["schema", name]) == 0
        schema = json.loads(capsys.readouterr().out)
        Draft202012Validator.check_schema(schema)
        assert schema["$schema"] == "https://json-schema.org/draft/2020-12/schema"
        assert schema == request_schema(name)
        assert verdict(name, VALID[name]) is True
        assert schema_accepts(name, VALID[name]), name


def test_every_result_contract_is_listed_and_printed_as_shipped(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["schema"]) == 0
    listed = json.loads(capsys.readouterr().out)
    results = {name: text for name, text in listed.items() if name.startswith("result-")}
    assert sorted(RESULT_SCHEMAS.values()) == sorted(RESULT_CONTRACTS)
    assert (
        sorted(results)
        == sorted(RESULT_SCHEMAS)
        == [
            "result-agent-runtime",
            "result-source-capture",
        ]
    )
    contracts = resources.files("aios_ledger.core.contracts")
    for name, action in RESULT_SCHEMAS.items():
        assert action in results[name] and "submit" in results[name]
        assert main(["schema", name]) == 0
        printed = json.loads(capsys.readouterr().out)
        shipped = json.loads((contracts / f"{RESULT_CONTRACTS[action]}.json").read_text())
        assert printed == shipped
        Draft202012Validator.check_schema(printed)
        assert printed["$id"] == f"aios.result.{action}.v1"


def test_an_unknown_name_is_a_usage_mistake(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["schema", "nope"]) == 2
    assert capsys.readouterr().err.startswith("USAGE_INVALID: ")
    with pytest.raises(LedgerError, match="SCHEMA_NOT_FOUND"):
        request_schema("nope")


def test_the_schema_follows_the_record() -> None:
    """A field added to a record appears in its schema, with its kind's rules."""
    claim = REQUEST_DOCUMENTS["claim"].record
    attrs.resolve_types(claim)
    fields = {f.name: attrs.field(type=f.type, default=f.default) for f in attrs.fields(claim)}
    lease = attrs.fields(claim).lease_seconds.type
    wider = attrs.make_class(
        "WiderClaim", {**fields, "note": attrs.field(type=lease, default=7)}, kw_only=True
    )
    schema = record_schema(wider)
    assert schema["properties"]["note"] == {
        **request_schema("claim")["properties"]["lease_seconds"],
        "default": 7,
    }
    assert "note" not in schema["required"]
    assert schema["required"] == request_schema("claim")["required"]


HAND_PICKED: list[tuple[str, Callable[[dict[str, Any]], object]]] = [
    ("unknown field", lambda doc: {**doc, "surprise": 1}),
    ("missing field", lambda doc: {k: v for k, v in list(doc.items())[1:]}),
    ("not an object", lambda doc: [doc, "x"]),
    ("a string", lambda doc: "text"),
    ("null", lambda doc: None),
    ("an empty batch", lambda doc: []),
    ("a batch too large", lambda doc: [doc] * (MAX_BATCH + 1)),
]


@pytest.mark.parametrize("name", sorted(VALID))
@pytest.mark.parametrize(("what", "change"), HAND_PICKED, ids=[w for w, _ in HAND_PICKED])
def test_hand_picked_refusals_agree(
    name: str, what: str, change: Callable[[dict[str, Any]], object]
) -> None:
    document = change(VALID[name])
    assert verdict(name, document) is False, what
    assert not schema_accepts(name, document), what


# Values the record and the schema must judge alike: no integral floats (JSON Schema counts 1.0
# as an integer), no lone surrogates (JSON text cannot hold them), numbers JSON values accept.
texts = st.text(st.characters(exclude_categories=["Cs"]), max_size=12) | st.sampled_from(
    ["", " ", "\n", "a\n", "a\x00b", "x" * 201, "x" * 1001, "sha256:" + "c" * 64, "C" * 64, SHA]
)
scalars = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(10**9), max_value=10**9)
    | st.sampled_from([0, 1, -1, 7 * 24 * 3600, 7 * 24 * 3600 + 1, 2**31, 10**7])
    | st.floats(allow_nan=False, allow_infinity=False).filter(lambda f: not f.is_integer())
    | texts
)
values = st.recursive(
    scalars,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(texts, inner, max_size=3),
    max_leaves=6,
)
timestamps = st.datetimes(min_value=datetime(1971, 1, 1), timezones=st.sampled_from([UTC])).map(
    lambda moment: moment.isoformat().replace("+00:00", "Z")
)


@st.composite
def mutated(draw: st.DrawFn, name: str) -> object:
    document = json.loads(json.dumps(VALID[name]))
    target = document["task"] if name == "task" and draw(st.booleans()) else document
    keys = sorted(target)
    action = draw(st.sampled_from(["replace", "replace", "drop", "add", "timestamp"]))
    if action == "replace":
        target[draw(st.sampled_from(keys))] = draw(values)
    elif action == "drop":
        target.pop(draw(st.sampled_from(keys)))
    elif action == "add":
        target[draw(texts)] = draw(values)
    elif name == "task":
        document["task"]["deadline"] = draw(timestamps | texts)
    if REQUEST_DOCUMENTS[name].batch and draw(st.integers(0, 4)) == 0:
        return [VALID[name], document]
    return document


@pytest.mark.parametrize("name", sorted(VALID))
def test_generated_documents_agree(name: str) -> None:
    seen = {True: 0, False: 0, None: 0}

    @settings(
        max_examples=DOCUMENTS,
        deadline=None,
        database=None,
        suppress_health_check=list(HealthCheck),
    )
    @given(document=mutated(name))
    def check(document: object) -> None:
        judged = verdict(name, document)
        seen[judged] += 1
        if judged is not None:
            assert schema_accepts(name, document) is judged, (judged, document)

    check()
    assert seen[True] > 0 and seen[False] > 0, seen


branch_names = st.lists(
    st.sampled_from([*"ab/.-_@{}[]~^:?*\\ \t\x00\x7f\né", "lock", "..", "feature/", "main"]),
    max_size=8,
).map("".join)


@settings(max_examples=BRANCHES, deadline=None, database=None)
@given(branch=branch_names)
def test_the_branch_pattern_is_the_branch_check(branch: str) -> None:
    document = {**VALID["binding"], "target_branch": branch}
    judged = verdict("binding", document)
    if judged is not None:
        assert schema_accepts("binding", document) is judged, branch
