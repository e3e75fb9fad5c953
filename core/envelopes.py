"""Governed execution bindings (*where* an agent may work) and the envelopes projected from them
(*what* it may do there), addressed by an `execution_digest`."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Annotated, Any, NewType

import attrs
from aios_ledger.core.digests import canonical_json, digest_json
from aios_ledger.core.errors import LedgerError
from aios_ledger.core.jsonvalue import JsonObject, check_json
from aios_ledger.core.kinds import Between, Identifier, OneOf, Text, text_check
from aios_ledger.core.refnames import git_branch_problem, require_branch_name
from aios_ledger.core.structuring import FieldRefused, Structured, register_kind, structure

ENVELOPE_SCHEMA = "aios.execution_envelope.v1"
OBJECT_ID = re.compile(r"^(?:[0-9a-f]{40}|[0-9a-f]{64})$")
REPOSITORY = re.compile(
    r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,99}(?:/[A-Za-z0-9][A-Za-z0-9_.-]{0,99}){1,3}$"
)
BRANCH_MODES = ("CREATE_NEW", "UPDATE_EXISTING")
# Refs an agent may never be bound to: the mainline and production branches.
PROTECTED_BRANCHES = frozenset({"main", "master", "trunk", "production", "prod", "HEAD"})
GOVERNANCE_FLAGS = (
    "writer_lease",
    "main_write",
    "production_write",
    "force_push",
    "protected_ref_bypass",
    "secret_material_exposed",
)


ObjectId = NewType("ObjectId", str)
BranchName = NewType("BranchName", str)

_BRANCH_TEXT = Text(max_length=200)


_object_id = text_check(
    OBJECT_ID.fullmatch, "must be a 40- or 64-character lowercase hex object id"
)


def _branch(value: Any) -> BranchName:
    name: str = _BRANCH_TEXT(value)
    problem = git_branch_problem(name)
    if problem is not None:
        raise FieldRefused(f"{name!r} is not a valid git branch name: it {problem}")
    return BranchName(name)


# `_branch`'s rules as one pattern, for the schema (a test holds the two to each other).
BRANCH_FORM = (
    r"^(?!-)(?!HEAD$)(?![./])(?!.*(?:\.\.|//|@\{|/\.|\.lock/))(?!.*(?:/|\.|\.lock)$)"
    r"[^\u0000-\u0020~^:?*\[\\\u007f]+$"
)

register_kind(ObjectId, _object_id, schema={"type": "string", "pattern": OBJECT_ID.pattern})
register_kind(BranchName, _branch, schema={**_BRANCH_TEXT.json_schema(), "pattern": BRANCH_FORM})


@attrs.frozen
class GovernedExecutionBinding(Structured):
    task_id: Identifier
    job_id: Identifier
    repository: Annotated[str, Text(max_length=300, pattern=REPOSITORY)]
    base_oid: ObjectId
    expected_branch_oid: ObjectId
    target_branch: BranchName
    branch_mode: Annotated[str, OneOf(BRANCH_MODES)]
    generation: Annotated[int, Between(1, 2**31 - 1)]
    idempotency_key: Identifier

    @classmethod
    def from_mapping(cls, raw: object) -> GovernedExecutionBinding:
        binding = structure(raw, cls, what="binding")
        binding._check_rules()
        return binding

    def _check_rules(self) -> None:
        short = self.target_branch.removeprefix("refs/heads/")
        if short in PROTECTED_BRANCHES:
            raise LedgerError(
                "BINDING_PROTECTED_BRANCH", f"target_branch {self.target_branch!r} is protected"
            )
        require_branch_name(self.target_branch)
        if len(self.base_oid) != len(self.expected_branch_oid):
            raise LedgerError("BINDING_INVALID", "base_oid and expected_branch_oid mix hash kinds")
        if self.branch_mode == "CREATE_NEW" and self.expected_branch_oid != self.base_oid:
            raise LedgerError(
                "BINDING_INVALID", "a CREATE_NEW branch starts at base_oid: the two must match"
            )


@attrs.frozen
class ActionRule:
    """What one action may be: its adapters, capabilities and whether it takes runtime input."""

    fixed_adapter: str | None
    required_capability: str  # `{adapter}` is replaced by the adapter's name
    optional_capabilities: frozenset[str]
    takes_runtime_input: bool


ACTIONS: Mapping[str, ActionRule] = {
    "agent_runtime": ActionRule(
        fixed_adapter=None,
        required_capability="agent.runtime.{adapter}",
        optional_capabilities=frozenset({"git.read"}),
        takes_runtime_input=True,
    ),
    "source_capture": ActionRule(
        fixed_adapter="source_capture",
        required_capability="git.read",
        optional_capabilities=frozenset(),
        takes_runtime_input=False,
    ),
}
RESERVED_ADAPTERS = frozenset(rule.fixed_adapter for rule in ACTIONS.values() if rule.fixed_adapter)


@attrs.frozen
class EnvelopeAction:
    """What `project_execution_envelope` adds to a binding, judged by its row of `ACTIONS`."""

    action: Annotated[str, OneOf(tuple(ACTIONS))]
    adapter: Identifier
    capability_scope: Any
    runtime_input: Any


def project_execution_envelope(
    binding: GovernedExecutionBinding, mapping: Mapping[str, object]
) -> JsonObject:
    """The envelope for one action on a binding, with its `execution_digest`."""
    if not isinstance(binding, GovernedExecutionBinding):
        raise LedgerError("BINDING_INVALID", "a GovernedExecutionBinding is required")
    values = structure(mapping, EnvelopeAction, what="projection")
    action, adapter = values.action, values.adapter
    rule = ACTIONS[action]
    if rule.fixed_adapter is not None and adapter != rule.fixed_adapter:
        raise LedgerError("ADAPTER_INVALID", f"{action} runs only on adapter {rule.fixed_adapter}")
    if rule.fixed_adapter is None and adapter in RESERVED_ADAPTERS:
        raise LedgerError("ADAPTER_INVALID", f"adapter {adapter!r} is reserved")
    scope = _capability_scope(values.capability_scope, rule, adapter)
    runtime_input = values.runtime_input
    if rule.takes_runtime_input:
        if not isinstance(runtime_input, dict):
            raise LedgerError("RUNTIME_INPUT_INVALID", f"{action} needs a runtime_input object")
        check_json(runtime_input, what="runtime_input")
    elif runtime_input is not None:
        raise LedgerError("RUNTIME_INPUT_INVALID", f"{action} takes no runtime_input")
    body: JsonObject = {
        "schema": ENVELOPE_SCHEMA,
        "task_id": binding.task_id,
        "job_id": binding.job_id,
        "binding": binding.public(),
        "action": action,
        "adapter": adapter,
        "capability_scope": list(scope),
        "runtime_input": runtime_input,
        "governance": dict.fromkeys(GOVERNANCE_FLAGS, False),
    }
    return {**body, "execution_digest": digest_json(ENVELOPE_SCHEMA, body)}


def _capability_scope(raw: object, rule: ActionRule, adapter: str) -> tuple[str, ...]:
    if not isinstance(raw, list) or not all(isinstance(item, str) for item in raw):
        raise LedgerError("CAPABILITY_SCOPE_INVALID", "capability_scope must be a list of strings")
    required = rule.required_capability.format(adapter=adapter)
    allowed = rule.optional_capabilities | {required}
    if len(set(raw)) != len(raw) or required not in raw or not set(raw) <= allowed:
        raise LedgerError(
            "CAPABILITY_SCOPE_INVALID",
            f"capability_scope must hold {required!r} and at most {sorted(allowed)}",
        )
    return (required, *sorted(set(raw) - {required}))


_ENVELOPE_KEYS = frozenset(
    {
        "schema",
        "task_id",
        "job_id",
        "binding",
        "action",
        "adapter",
        "capability_scope",
        "runtime_input",
        "governance",
        "execution_digest",
    }
)


def verify_execution_envelope(raw: object) -> JsonObject:
    """Re-derive an envelope from its own binding and inputs; refuse any that does not match."""
    if not isinstance(raw, Mapping) or set(raw) != _ENVELOPE_KEYS:
        raise LedgerError("EXECUTION_ENVELOPE_INVALID", "not an execution envelope")
    if raw["schema"] != ENVELOPE_SCHEMA:
        raise LedgerError("EXECUTION_ENVELOPE_INVALID", f"schema must be {ENVELOPE_SCHEMA}")
    try:
        binding = GovernedExecutionBinding.from_mapping(raw["binding"])
        action = {name: raw[name] for name in attrs.fields_dict(EnvelopeAction)}
        rebuilt = project_execution_envelope(binding, action)
    except LedgerError as refused:
        raise LedgerError("EXECUTION_ENVELOPE_INVALID", str(refused)) from None
    if canonical_json(dict(raw)) != canonical_json(rebuilt):
        raise LedgerError(
            "EXECUTION_ENVELOPE_INVALID", "the envelope does not match its own execution_digest"
        )
    return rebuilt
