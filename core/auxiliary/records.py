"""Auxiliary runs: isolated sub-agent runs over a pinned evidence snapshot.

An `AuxiliaryRunSpec` says which execution it belongs to (`ExecutionFrame`), what kind of helper
runs (`kind`), what it is told (`instruction`), which evidence it may read (`evidence_digest`),
what it may do (`AuxiliaryCapabilityProfile`, never wider than the parent's ceiling and never
writing the workspace) and what it must return (`output_schema`, `max_output_bytes`). Its
`digest()` is what idempotency compares: the same id with another spec is `SPEC_CONFLICT`.
"""

from __future__ import annotations

import enum
import re
from collections.abc import Mapping
from typing import Any

import attrs
from aios_ledger.core.auxiliary.states import AuxiliaryRunError, AuxiliaryRunState
from aios_ledger.core.contracts.checks import check_schema_well_formed, require_contract
from aios_ledger.core.digests import PREFIXED_DIGEST, canonical_json, digest_bytes, sha256_hex
from aios_ledger.core.errors import LedgerError
from aios_ledger.core.fields import IDENTIFIER
from aios_ledger.core.jsonvalue import JsonObject, JsonValue, check_json
from aios_ledger.core.runs.evidence import EvidenceSnapshot, ExecutionTarget

AUXILIARY_SNAPSHOT_SCHEMA_V1 = "aios.auxiliary_run.snapshot.v1"
SPEC_DOMAIN = "spec"
OUTPUT_DOMAIN = "output"
MAX_FRAME_DEPTH = 4
DEFAULT_MAX_OUTPUT_BYTES = 64 * 1024
MAX_OUTPUT_BYTES = 4 * 1024 * 1024
MAX_INSTRUCTION_CHARS = 16 * 1024
MAX_TIMEOUT_MS = 24 * 60 * 60 * 1000
MAX_TOOLS = 64
_TOOL_NAME = re.compile(r"^[a-z][a-z0-9_.:-]{0,63}$")


class AuxiliaryRunMode(enum.StrEnum):
    """How an auxiliary run relates to its parent: `ISOLATED` reads only the pinned evidence."""

    ISOLATED = "ISOLATED"


def _invalid(field: str, detail: str) -> AuxiliaryRunError:
    return AuxiliaryRunError.invalid_field(field, detail)


def _require_identifier(field: str, value: object) -> str:
    if not isinstance(value, str) or not IDENTIFIER.fullmatch(value):
        raise _invalid(field, f"{str(value)[:80]!r} is not an identifier")
    return value


def _require_bool(field: str, value: object) -> bool:
    if not isinstance(value, bool):
        raise _invalid(field, "must be true or false")
    return value


def _require_int(field: str, value: object, minimum: int, maximum: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not minimum <= value <= maximum:
        raise _invalid(field, f"must be an integer between {minimum} and {maximum}")
    return value


def _require_mapping(field: str, raw: object, names: frozenset[str]) -> Mapping[str, Any]:
    if not isinstance(raw, Mapping):
        raise _invalid(field, "must be a JSON object")
    keys = {str(key) for key in raw}
    if keys != names:
        unknown, missing = sorted(keys - names), sorted(names - keys)
        raise _invalid(field, f"unknown {unknown}, missing {missing}")
    return raw


# --- frames ---------------------------------------------------------------------------------


@attrs.frozen
class ExecutionFrame:
    """Where an auxiliary run sits: the target it serves, and how deep under the root run.

    `parent_id` names the auxiliary run that spawned a nested frame (None at the root).
    """

    target: ExecutionTarget
    depth: int = 0
    parent_id: str | None = None

    @classmethod
    def root(cls, target: ExecutionTarget) -> ExecutionFrame:
        return cls(target=target)

    def child(self, parent_id: str, *, max_depth: int = MAX_FRAME_DEPTH) -> ExecutionFrame:
        """The frame of an auxiliary run spawned by the run `parent_id` in this frame."""
        _require_identifier("frame.parent_id", parent_id)
        if self.depth + 1 > max_depth:
            raise AuxiliaryRunError(
                "FRAME_TOO_DEEP", f"auxiliary runs nest at most {max_depth} levels deep"
            )
        return ExecutionFrame(target=self.target, depth=self.depth + 1, parent_id=parent_id)

    def validate(self) -> None:
        if not isinstance(self.target, ExecutionTarget):
            raise _invalid("frame.target", "must be an ExecutionTarget")
        _require_identifier("frame.target.session_id", self.target.session_id)
        _require_identifier("frame.target.run_id", self.target.run_id)
        _require_int("frame.depth", self.depth, 0, 1_000_000)
        if self.depth > MAX_FRAME_DEPTH:
            raise AuxiliaryRunError(
                "FRAME_TOO_DEEP", f"auxiliary runs nest at most {MAX_FRAME_DEPTH} levels deep"
            )
        if (self.depth == 0) != (self.parent_id is None):
            raise _invalid("frame.parent_id", "only the root frame has no parent, and only it")
        if self.parent_id is not None:
            _require_identifier("frame.parent_id", self.parent_id)

    def public(self) -> JsonObject:
        return {"target": self.target.public(), "depth": self.depth, "parent_id": self.parent_id}

    @classmethod
    def from_mapping(cls, raw: object) -> ExecutionFrame:
        values = _require_mapping("frame", raw, frozenset({"target", "depth", "parent_id"}))
        target = ExecutionTarget.from_mapping(
            values["target"], error=AuxiliaryRunError, code="INVALID_FIELD"
        )
        frame = cls(target=target, depth=values["depth"], parent_id=values["parent_id"])
        frame.validate()
        return frame


# --- capabilities ---------------------------------------------------------------------------


@attrs.frozen
class AuxiliaryCapabilityProfile:
    """What an auxiliary run may do. `is_within` is the partial order ceilings are checked by."""

    read_workspace: bool = False
    write_workspace: bool = False
    network: bool = False
    tools: frozenset[str] = frozenset()
    max_output_bytes: int = DEFAULT_MAX_OUTPUT_BYTES

    @classmethod
    def tool_free(cls) -> AuxiliaryCapabilityProfile:
        """Reads nothing but its evidence, calls no tool, no network, the default output limit."""
        return cls()

    @classmethod
    def read_only(cls, max_output_bytes: int) -> AuxiliaryCapabilityProfile:
        """May also read the workspace; returns at most `max_output_bytes` of canonical JSON."""
        return cls(read_workspace=True, max_output_bytes=max_output_bytes)

    def with_tools(self, *tools: str) -> AuxiliaryCapabilityProfile:
        return attrs.evolve(self, tools=frozenset(tools))

    def is_within(self, ceiling: AuxiliaryCapabilityProfile) -> bool:
        return (
            (ceiling.read_workspace or not self.read_workspace)
            and (ceiling.write_workspace or not self.write_workspace)
            and (ceiling.network or not self.network)
            and self.tools <= ceiling.tools
            and self.max_output_bytes <= ceiling.max_output_bytes
        )

    def validate(self, field: str = "capabilities") -> None:
        for name in ("read_workspace", "write_workspace", "network"):
            _require_bool(f"{field}.{name}", getattr(self, name))
        if not isinstance(self.tools, frozenset) or len(self.tools) > MAX_TOOLS:
            raise _invalid(f"{field}.tools", f"must be a set of at most {MAX_TOOLS} tool names")
        for tool in self.tools:
            if not isinstance(tool, str) or not _TOOL_NAME.fullmatch(tool):
                raise _invalid(f"{field}.tools", f"{str(tool)[:80]!r} is not a tool name")
        _require_int(f"{field}.max_output_bytes", self.max_output_bytes, 1, MAX_OUTPUT_BYTES)

    def public(self) -> JsonObject:
        tools: list[JsonValue] = [str(tool) for tool in sorted(self.tools)]
        return {
            "read_workspace": self.read_workspace,
            "write_workspace": self.write_workspace,
            "network": self.network,
            "tools": tools,
            "max_output_bytes": self.max_output_bytes,
        }

    @classmethod
    def from_mapping(cls, raw: object, field: str = "capabilities") -> AuxiliaryCapabilityProfile:
        names = frozenset({"read_workspace", "write_workspace", "network", "tools"})
        values = _require_mapping(field, raw, names | {"max_output_bytes"})
        tools = values["tools"]
        if (
            not isinstance(tools, list)
            or len(tools) > MAX_TOOLS
            or not all(isinstance(tool, str) for tool in tools)
        ):
            raise _invalid(f"{field}.tools", "must be a list of tool names")
        if len(set(tools)) != len(tools):
            raise _invalid(f"{field}.tools", "names a tool twice")
        profile = cls(
            read_workspace=values["read_workspace"],
            write_workspace=values["write_workspace"],
            network=values["network"],
            tools=frozenset(tools),
            max_output_bytes=values["max_output_bytes"],
        )
        profile.validate(field)
        return profile


# --- the spec -------------------------------------------------------------------------------


_SPEC_FIELDS = frozenset(
    {
        "id",
        "frame",
        "kind",
        "instruction",
        "evidence_digest",
        "capabilities",
        "parent_ceiling",
        "output_schema",
        "timeout_ms",
        "mode",
    }
)


@attrs.frozen
class AuxiliaryRunSpec:
    """What to run. Without `with_id`, the id is derived from the rest of the spec."""

    frame: ExecutionFrame
    kind: str
    instruction: str
    evidence_digest: str
    _id: str | None = None
    capabilities: AuxiliaryCapabilityProfile = attrs.Factory(AuxiliaryCapabilityProfile.tool_free)
    parent_ceiling: AuxiliaryCapabilityProfile | None = None
    output_schema: JsonObject | None = attrs.field(default=None, eq=False, hash=False)
    timeout_ms: int | None = None
    mode: AuxiliaryRunMode = AuxiliaryRunMode.ISOLATED
    # Compared through its canonical form, so that equal schemas make equal specs.
    _schema_key: str | None = attrs.field(init=False, default=None, repr=False)

    def __attrs_post_init__(self) -> None:
        key = None
        if self.output_schema is not None:
            try:
                key = canonical_json(self.output_schema)
            except LedgerError:
                key = repr(self.output_schema)
        object.__setattr__(self, "_schema_key", key)

    @property
    def id(self) -> str:
        if self._id is not None:
            return self._id
        return "aux-" + sha256_hex(self._content())[:32]

    def with_id(self, run_id: str) -> AuxiliaryRunSpec:
        return attrs.evolve(self, id=run_id)

    def with_capabilities(self, capabilities: AuxiliaryCapabilityProfile) -> AuxiliaryRunSpec:
        return attrs.evolve(self, capabilities=capabilities)

    def with_parent_ceiling(self, ceiling: AuxiliaryCapabilityProfile) -> AuxiliaryRunSpec:
        return attrs.evolve(self, parent_ceiling=ceiling)

    def with_output_schema(self, schema: JsonObject) -> AuxiliaryRunSpec:
        return attrs.evolve(self, output_schema=schema)

    def with_timeout_ms(self, timeout_ms: int) -> AuxiliaryRunSpec:
        return attrs.evolve(self, timeout_ms=timeout_ms)

    def validate(self, evidence_digest: str) -> None:
        """Fields, then the evidence digest, then the capability ceiling, then the schema."""
        if not isinstance(self.frame, ExecutionFrame):
            raise _invalid("frame", "must be an ExecutionFrame")
        self.frame.validate()
        _require_identifier("id", self.id)
        _require_identifier("kind", self.kind)
        if (
            not isinstance(self.instruction, str)
            or not self.instruction.strip()
            or len(self.instruction) > MAX_INSTRUCTION_CHARS
        ):
            raise _invalid("instruction", f"must be text of 1 to {MAX_INSTRUCTION_CHARS} chars")
        try:
            check_json(self.instruction, what="instruction")
        except LedgerError as refused:
            raise _invalid("instruction", refused.detail) from None
        if not isinstance(self.evidence_digest, str) or not PREFIXED_DIGEST.fullmatch(
            self.evidence_digest
        ):
            raise _invalid("evidence_digest", "must be 'sha256:' followed by 64 hex")
        if self.timeout_ms is not None:
            _require_int("timeout_ms", self.timeout_ms, 1, MAX_TIMEOUT_MS)
        if not isinstance(self.mode, AuxiliaryRunMode):
            raise _invalid("mode", f"must be one of {[mode.value for mode in AuxiliaryRunMode]}")
        if not isinstance(self.capabilities, AuxiliaryCapabilityProfile):
            raise _invalid("capabilities", "must be an AuxiliaryCapabilityProfile")
        self.capabilities.validate("capabilities")
        if self.parent_ceiling is not None:
            if not isinstance(self.parent_ceiling, AuxiliaryCapabilityProfile):
                raise _invalid("parent_ceiling", "must be an AuxiliaryCapabilityProfile")
            self.parent_ceiling.validate("parent_ceiling")
        if self.evidence_digest != evidence_digest:
            raise AuxiliaryRunError(
                "EVIDENCE_DIGEST_MISMATCH", "the spec pins other evidence than it was given"
            )
        if self.capabilities.write_workspace:
            raise AuxiliaryRunError(
                "CAPABILITY_ESCALATION", "an auxiliary run never writes the workspace"
            )
        if self.parent_ceiling is not None and not self.capabilities.is_within(self.parent_ceiling):
            raise AuxiliaryRunError(
                "CAPABILITY_ESCALATION", "the capabilities exceed the parent's ceiling"
            )
        if self.output_schema is not None:
            try:
                check_json(self.output_schema, what="output_schema")
                check_schema_well_formed(self.output_schema, code="INVALID_FIELD")
            except LedgerError as refused:
                raise _invalid("output_schema", refused.detail) from None

    def _content(self) -> JsonObject:
        return {
            "frame": self.frame.public(),
            "kind": self.kind,
            "instruction": self.instruction,
            "evidence_digest": self.evidence_digest,
            "capabilities": self.capabilities.public(),
            "parent_ceiling": None if self.parent_ceiling is None else self.parent_ceiling.public(),
            "output_schema": self.output_schema,
            "timeout_ms": self.timeout_ms,
            "mode": str(self.mode),
        }

    def public(self) -> JsonObject:
        return {"id": self.id, **self._content()}

    def canonical_text(self) -> str:
        """The canonical JSON of `public()`: what is stored, and what `digest` covers."""
        try:
            return canonical_json(self.public())
        except LedgerError as refused:
            raise _invalid("spec", refused.detail) from None

    def digest(self) -> str:
        return spec_digest_of(self.canonical_text())

    @classmethod
    def from_mapping(cls, raw: object) -> AuxiliaryRunSpec:
        """Strictly, from `public()`'s shape; every refusal is an `INVALID_FIELD`."""
        values = _require_mapping("spec", raw, _SPEC_FIELDS)
        try:
            check_json(dict(values), what="spec")
        except LedgerError as refused:
            raise _invalid("spec", refused.detail) from None
        ceiling = values["parent_ceiling"]
        schema = values["output_schema"]
        if schema is not None and not isinstance(schema, dict):
            raise _invalid("output_schema", "must be a JSON object or null")
        mode = values["mode"]
        if not isinstance(mode, str) or mode not in {m.value for m in AuxiliaryRunMode}:
            raise _invalid("mode", f"must be one of {[m.value for m in AuxiliaryRunMode]}")
        spec = cls(
            frame=ExecutionFrame.from_mapping(values["frame"]),
            kind=_require_identifier("kind", values["kind"]),
            instruction=values["instruction"],
            evidence_digest=values["evidence_digest"],
            capabilities=AuxiliaryCapabilityProfile.from_mapping(values["capabilities"]),
            parent_ceiling=None
            if ceiling is None
            else AuxiliaryCapabilityProfile.from_mapping(ceiling, "parent_ceiling"),
            output_schema=schema,
            timeout_ms=values["timeout_ms"],
            mode=AuxiliaryRunMode(mode),
        )
        run_id = _require_identifier("id", values["id"])
        if run_id != spec.id:
            spec = spec.with_id(run_id)
        spec.validate(spec.evidence_digest)
        return spec


# --- output ---------------------------------------------------------------------------------


@attrs.frozen
class AuxiliaryRunOutput:
    """What a completed run returned, checked, and the digest it is stored under."""

    value: JsonValue = attrs.field(eq=False)
    digest: str
    size_bytes: int


def check_output(spec: AuxiliaryRunSpec, value: object) -> AuxiliaryRunOutput:
    """A JSON value, within the size limit (canonical bytes), satisfying the output schema."""
    try:
        encoded = canonical_json(value).encode("ascii")
    except LedgerError as refused:
        raise AuxiliaryRunError("OUTPUT_INVALID", f"the output is not JSON: {refused}") from None
    limit = spec.capabilities.max_output_bytes
    if len(encoded) > limit:
        raise AuxiliaryRunError(
            "OUTPUT_LIMIT", f"the output is {len(encoded)} bytes, over the limit of {limit}"
        )
    checked = check_json(value)
    if spec.output_schema is not None:
        require_contract(
            spec.output_schema, checked, code="OUTPUT_SCHEMA_MISMATCH", error=AuxiliaryRunError
        )
    return AuxiliaryRunOutput(
        value=checked, digest=digest_bytes(OUTPUT_DOMAIN, encoded), size_bytes=len(encoded)
    )


def failure_of(exc: BaseException) -> AuxiliaryRunError:
    """The terminal error an executor's exception becomes (its own code if it gave one)."""
    if isinstance(exc, AuxiliaryRunError):
        return AuxiliaryRunError(exc.code, exc.detail, field=exc.field)
    text = str(exc)[:2000]
    return AuxiliaryRunError("EXECUTOR", f"executor panicked: {type(exc).__name__}: {text}")


def state_after(error: AuxiliaryRunError) -> AuxiliaryRunState:
    return AuxiliaryRunState.CANCELLED if error.code == "CANCELLED" else AuxiliaryRunState.FAILED


def spec_digest_of(spec_text: str) -> str:
    """The digest of a spec from its canonical text (`AuxiliaryRunSpec.canonical_text`)."""
    return digest_bytes(SPEC_DOMAIN, spec_text.encode("ascii"))


@attrs.frozen
class CheckedSpawn:
    """A spawn `check_spawn` accepted, with what `decide_spawn` stores taken when it was checked:
    the evidence digest is recomputed once (the largest part of a spawn's checks), and a dict in
    the spec (its output schema) changed afterwards changes nothing that is written."""

    spec: AuxiliaryRunSpec
    spec_text: str
    spec_digest: str
    parent_text: str


def check_spawn(spec: AuxiliaryRunSpec, evidence: EvidenceSnapshot) -> CheckedSpawn:
    """What `spawn` refuses before anything is stored: target, evidence, spec. The shell checks
    before it opens the write transaction (outside the lock) and hands the result to
    `decide_spawn`."""
    if not isinstance(spec, AuxiliaryRunSpec):
        raise _invalid("spec", "must be an AuxiliaryRunSpec")
    if not isinstance(evidence, EvidenceSnapshot):
        raise _invalid("evidence", "must be an EvidenceSnapshot")
    if not isinstance(spec.frame, ExecutionFrame):
        raise _invalid("frame", "must be an ExecutionFrame")
    if spec.frame.target != evidence.target:
        raise AuxiliaryRunError(
            "TARGET_MISMATCH", "the evidence is about another execution target than the spec"
        )
    try:
        recomputed = evidence.computed_digest()
    except LedgerError as refused:
        raise _invalid("evidence", refused.detail) from None
    if recomputed != evidence.snapshot_digest:
        raise AuxiliaryRunError(
            "EVIDENCE_DIGEST_MISMATCH", "the evidence does not match its own snapshot digest"
        )
    spec.validate(evidence.snapshot_digest)
    spec_text = spec.canonical_text()
    return CheckedSpawn(
        spec=spec,
        spec_text=spec_text,
        spec_digest=spec_digest_of(spec_text),
        parent_text=canonical_json(spec.frame.public()),
    )


# --- snapshots ------------------------------------------------------------------------------


@attrs.frozen
class AuxiliaryRunSnapshot:
    """An auxiliary run as the ledger holds it; `validate()` checks its fields agree."""

    schema: str
    id: str
    parent: ExecutionFrame
    mode: AuxiliaryRunMode
    state: AuxiliaryRunState
    spec_digest: str
    created_at_ms: int
    updated_at_ms: int
    output_digest: str | None = None
    error: str | None = None

    def validate(self) -> None:
        if self.schema != AUXILIARY_SNAPSHOT_SCHEMA_V1:
            raise _invalid("schema", f"must be {AUXILIARY_SNAPSHOT_SCHEMA_V1}")
        _require_identifier("id", self.id)
        if not isinstance(self.parent, ExecutionFrame):
            raise _invalid("parent", "must be an ExecutionFrame")
        self.parent.validate()
        if not isinstance(self.mode, AuxiliaryRunMode):
            raise _invalid("mode", "is not an auxiliary run mode")
        if not isinstance(self.state, AuxiliaryRunState):
            raise _invalid("state", "is not an auxiliary run state")
        if not isinstance(self.spec_digest, str) or not PREFIXED_DIGEST.fullmatch(self.spec_digest):
            raise _invalid("spec_digest", "must be 'sha256:' followed by 64 hex")
        _require_int("created_at_ms", self.created_at_ms, 0, 2**62)
        _require_int("updated_at_ms", self.updated_at_ms, self.created_at_ms, 2**62)
        has_output = self.output_digest is not None
        has_error = self.error is not None
        if has_output and not (
            isinstance(self.output_digest, str) and PREFIXED_DIGEST.fullmatch(self.output_digest)
        ):
            raise _invalid("output_digest", "must be 'sha256:' followed by 64 hex")
        if has_error and (not isinstance(self.error, str) or not self.error):
            raise _invalid("error", "must be non-empty text")
        expected = {
            AuxiliaryRunState.PENDING: (False, False),
            AuxiliaryRunState.RUNNING: (False, False),
            AuxiliaryRunState.COMPLETED: (True, False),
            AuxiliaryRunState.FAILED: (False, True),
            AuxiliaryRunState.CANCELLED: (False, True),
        }[self.state]
        if (has_output, has_error) != expected:
            raise _invalid(
                "state",
                f"a {self.state} run has "
                f"{'an' if expected[0] else 'no'} output digest and "
                f"{'an' if expected[1] else 'no'} error",
            )

    @property
    def error_code(self) -> str | None:
        if self.error is None:
            return None
        return self.error.split(":", 1)[0]

    def public(self) -> JsonObject:
        return {
            "schema": self.schema,
            "id": self.id,
            "parent": self.parent.public(),
            "mode": str(self.mode),
            "state": str(self.state),
            "spec_digest": self.spec_digest,
            "created_at_ms": self.created_at_ms,
            "updated_at_ms": self.updated_at_ms,
            "output_digest": self.output_digest,
            "error": self.error,
        }
