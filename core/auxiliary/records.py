"""Auxiliary runs: isolated sub-agent runs over a pinned evidence snapshot, never wider than the
parent's capabilities and never writing the workspace."""

from __future__ import annotations

import enum
import re
from collections.abc import Mapping, Sequence
from functools import lru_cache
from typing import Annotated, Any, NewType

import attrs
from aios_ledger.core.auxiliary.states import AuxiliaryRunState, parse_state
from aios_ledger.core.contracts.checks import check_schema_well_formed, require_contract
from aios_ledger.core.digests import canonical_json, digest_bytes, sha256_hex
from aios_ledger.core.errors import AuxiliaryRunError, LedgerError
from aios_ledger.core.jsonvalue import JsonObject, JsonValue, check_json, loads_document
from aios_ledger.core.kinds import Between, Identifier, JsonObjectValue, OneOf, PrefixedDigest, Text
from aios_ledger.core.log.rows import AUXILIARY_RUNS, RowImage, row_image
from aios_ledger.core.records import record_from_row
from aios_ledger.core.runs.evidence import EvidenceSnapshot, ExecutionTarget
from aios_ledger.core.structuring import (
    NOT_PUBLIC,
    FieldRefused,
    Problem,
    Refusal,
    check_built,
    complete_form,
    register_kind,
    structure,
    unstructure,
)

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


def _invalid_fields(*, named: bool) -> Refusal:
    """`INVALID_FIELD` naming the first problem's path, under the record's name when `named`."""

    def refuse(what: str, problems: Sequence[Problem]) -> AuxiliaryRunError:
        paths = [problem.at(what if named else "") or what for problem in problems]
        detail = "; ".join(
            f"{path}: {problem.message}" for path, problem in zip(paths, problems, strict=True)
        )
        return AuxiliaryRunError("INVALID_FIELD", detail, field=paths[0])

    return refuse


_NAMED = _invalid_fields(named=True)
_RELATIVE = _invalid_fields(named=False)

ToolNames = NewType("ToolNames", frozenset[str])


def _tool_names(value: Any) -> frozenset[str]:
    if (
        not isinstance(value, list)
        or len(value) > MAX_TOOLS
        or not all(isinstance(tool, str) for tool in value)
    ):
        raise FieldRefused(f"must be a list of at most {MAX_TOOLS} tool names")
    if len(set(value)) != len(value):
        raise FieldRefused("names a tool twice")
    for tool in value:
        if not _TOOL_NAME.fullmatch(tool):
            raise FieldRefused(f"{tool[:80]!r} is not a tool name")
    return frozenset(value)


def _sorted_tools(tools: Any) -> list[str]:
    if not isinstance(tools, frozenset):
        raise TypeError("tools must be a frozenset")
    return sorted(tools)


register_kind(ToolNames, _tool_names, unstructure_as=_sorted_tools)


# --- frames ---------------------------------------------------------------------------------


@complete_form
@attrs.frozen
class ExecutionFrame:
    """Where an auxiliary run sits: its target, depth, and the run that spawned it."""

    target: ExecutionTarget
    depth: Annotated[int, Between(0, 1_000_000)] = 0
    parent_id: Annotated[str, Identifier] | None = None

    @classmethod
    def root(cls, target: ExecutionTarget) -> ExecutionFrame:
        return cls(target=target)

    def child(self, parent_id: str) -> ExecutionFrame:
        """The frame of an auxiliary run spawned by the run `parent_id` in this frame."""
        frame = ExecutionFrame(target=self.target, depth=self.depth + 1, parent_id=parent_id)
        frame.validate()
        return frame

    def validate(self) -> None:
        check_built(self, what="frame", refuse=_NAMED)
        _check_frame(self)

    def public(self) -> JsonObject:
        return unstructure(self)

    @classmethod
    def from_mapping(cls, raw: object) -> ExecutionFrame:
        frame = structure(raw, cls, what="frame", refuse=_NAMED)
        _check_frame(frame)
        return frame


def _check_frame(frame: ExecutionFrame) -> None:
    if frame.depth > MAX_FRAME_DEPTH:
        raise AuxiliaryRunError(
            "FRAME_TOO_DEEP", f"auxiliary runs nest at most {MAX_FRAME_DEPTH} levels deep"
        )
    if (frame.depth == 0) != (frame.parent_id is None):
        raise _invalid("frame.parent_id", "only the root frame has no parent, and only it")


# --- capabilities ---------------------------------------------------------------------------


@complete_form
@attrs.frozen
class AuxiliaryCapabilityProfile:
    """What an auxiliary run may do. `is_within` is the partial order ceilings are checked by."""

    read_workspace: bool = False
    write_workspace: bool = False
    network: bool = False
    tools: Annotated[frozenset[str], ToolNames] = frozenset()
    max_output_bytes: Annotated[int, Between(1, MAX_OUTPUT_BYTES)] = DEFAULT_MAX_OUTPUT_BYTES

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
        check_built(self, what=field, refuse=_NAMED)

    def public(self) -> JsonObject:
        return unstructure(self)

    @classmethod
    def from_mapping(cls, raw: object, field: str = "capabilities") -> AuxiliaryCapabilityProfile:
        return structure(raw, cls, what=field, refuse=_NAMED)


# --- the spec -------------------------------------------------------------------------------


@complete_form
@attrs.frozen
class AuxiliaryRunSpec:
    """What to run; without an id, the id is derived from the rest of the spec."""

    frame: ExecutionFrame
    kind: Annotated[str, Identifier]
    instruction: Annotated[str, Text(max_length=MAX_INSTRUCTION_CHARS, nul=True)]
    evidence_digest: Annotated[str, PrefixedDigest]
    _id: Annotated[str, Identifier] | None = attrs.field(default=None, metadata=NOT_PUBLIC)
    capabilities: AuxiliaryCapabilityProfile = attrs.Factory(AuxiliaryCapabilityProfile.tool_free)
    parent_ceiling: AuxiliaryCapabilityProfile | None = None
    output_schema: Annotated[JsonObject, JsonObjectValue] | None = attrs.field(
        default=None, eq=False, hash=False
    )
    timeout_ms: Annotated[int, Between(1, MAX_TIMEOUT_MS)] | None = None
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
        return self._id if self._id is not None else "aux-" + sha256_hex(unstructure(self))[:32]

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
        """Fields, then the frame, the evidence digest, the capability ceiling, the schema."""
        check_built(self, what="spec", refuse=_RELATIVE)
        self._check_rules(evidence_digest)

    def _check_rules(self, evidence_digest: str) -> None:
        _check_frame(self.frame)
        if self.evidence_digest != evidence_digest:
            raise AuxiliaryRunError(
                "EVIDENCE_DIGEST_MISMATCH",
                f"the spec pins evidence {self.evidence_digest}, it was given {evidence_digest}",
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
                check_schema_well_formed(self.output_schema, code="INVALID_FIELD")
            except LedgerError as refused:
                raise _invalid("output_schema", refused.detail) from None

    def public(self) -> JsonObject:
        return {"id": self.id, **unstructure(self)}

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
        """Strictly, from `public()`'s shape; every field refused is an `INVALID_FIELD`."""
        spec = structure(raw, cls, what="spec", refuse=_RELATIVE)
        if spec._id is not None and spec._id == attrs.evolve(spec, id=None).id:
            spec = attrs.evolve(spec, id=None)  # the derived id: equal to the spec built alike
        spec._check_rules(spec.evidence_digest)
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
    return digest_bytes(SPEC_DOMAIN, spec_text.encode("ascii"))


@attrs.frozen
class CheckedSpawn:
    """A checked spawn, with what `decide_spawn` stores taken at the check."""

    spec: AuxiliaryRunSpec
    spec_text: str
    spec_digest: str
    parent_text: str


def check_spawn(spec: AuxiliaryRunSpec, evidence: EvidenceSnapshot) -> CheckedSpawn:
    """What `spawn` refuses before anything is stored, checked outside the write lock."""
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
            "EVIDENCE_DIGEST_MISMATCH",
            f"the evidence's digest is {recomputed}, its snapshot_digest says "
            f"{evidence.snapshot_digest}",
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


Milliseconds = Annotated[int, Between(0, 2**62)]


@complete_form
@attrs.frozen
class AuxiliaryRunSnapshot:
    """An auxiliary run as the ledger holds it; `validate()` checks its fields agree."""

    schema: Annotated[str, OneOf((AUXILIARY_SNAPSHOT_SCHEMA_V1,))]
    id: Annotated[str, Identifier]
    parent: ExecutionFrame
    mode: AuxiliaryRunMode
    state: AuxiliaryRunState
    spec_digest: Annotated[str, PrefixedDigest]
    created_at_ms: Milliseconds
    updated_at_ms: Milliseconds
    output_digest: Annotated[str, PrefixedDigest] | None = None
    error: Annotated[str, Text(max_length=None, nul=True)] | None = None

    @classmethod
    def from_mapping(cls, raw: object) -> AuxiliaryRunSnapshot:
        """From `public()`'s shape; every refusal is an `INVALID_FIELD`, as `validate()`'s."""
        snapshot = structure(raw, cls, what="snapshot", refuse=_RELATIVE)
        snapshot._check_rules()
        return snapshot

    def validate(self) -> None:
        check_built(self, what="snapshot", refuse=_RELATIVE)
        self._check_rules()

    def _check_rules(self) -> None:
        _check_frame(self.parent)
        if self.updated_at_ms < self.created_at_ms:
            raise _invalid("updated_at_ms", "must not be before created_at_ms")
        # A completed run has its output's digest, a run that ended otherwise its error.
        has_output = self.state is AuxiliaryRunState.COMPLETED
        has_error = self.state.is_terminal and not has_output
        if (self.output_digest is not None, self.error is not None) != (has_output, has_error):
            raise _invalid(
                "state",
                f"a {self.state} run has "
                f"{'an' if has_output else 'no'} output digest and "
                f"{'an' if has_error else 'no'} error",
            )

    @property
    def error_code(self) -> str | None:
        return None if self.error is None else self.error.split(":", 1)[0]

    def public(self) -> JsonObject:
        return unstructure(self)


@attrs.frozen
class AuxiliaryRunRow:
    aux_id: str
    session_id: str
    run_id: str
    parent_json: str
    kind: str
    mode: str
    state: str
    spec_json: str
    spec_digest: str
    evidence_digest: str
    owner: str
    revision: int
    created_at_ms: int
    updated_at_ms: int
    output_json: str | None
    output_digest: str | None
    error_code: str | None
    error: str | None

    @classmethod
    def from_row(cls, row: Mapping[str, Any]) -> AuxiliaryRunRow:
        return record_from_row(cls, row)

    def image(self) -> RowImage:
        return row_image(AUXILIARY_RUNS, self.aux_id, attrs.asdict(self))

    @property
    def run_state(self) -> AuxiliaryRunState:
        return parse_state(self.state)

    def snapshot(self) -> AuxiliaryRunSnapshot:
        try:
            parent = _parent_frame(self.parent_json)
            mode = AuxiliaryRunMode(self.mode)
        except (LedgerError, ValueError) as refused:
            raise AuxiliaryRunError(
                "RUN_ROW_CORRUPT", f"auxiliary run {self.aux_id}: {refused}"
            ) from None
        return AuxiliaryRunSnapshot(
            schema=AUXILIARY_SNAPSHOT_SCHEMA_V1,
            id=self.aux_id,
            parent=parent,
            mode=mode,
            state=self.run_state,
            spec_digest=self.spec_digest,
            created_at_ms=self.created_at_ms,
            updated_at_ms=self.updated_at_ms,
            output_digest=self.output_digest,
            error=self.error,
        )

    def spec(self) -> AuxiliaryRunSpec:
        return AuxiliaryRunSpec.from_mapping(loads_document(self.spec_json, what="spec"))

    def output_value(self) -> JsonValue:
        return None if self.output_json is None else loads_document(self.output_json, what="output")

    def failure(self) -> AuxiliaryRunError | None:
        if self.error_code is None:
            return None
        detail = (self.error or "").removeprefix(f"{self.error_code}: ")
        return AuxiliaryRunError(self.error_code, detail)

    def outcome(self) -> AuxiliaryRunOutput | AuxiliaryRunError | None:
        """The terminal result: the output, the error, or None while the run is not over."""
        if not self.run_state.is_terminal:
            return None
        failure = self.failure()
        if failure is not None:
            return failure
        if self.output_digest is None:
            return AuxiliaryRunError("RUN_ROW_CORRUPT", f"{self.aux_id} completed without output")
        output = self.output_json or "null"
        return AuxiliaryRunOutput(
            value=self.output_value(), digest=self.output_digest, size_bytes=len(output)
        )

    def listed(self) -> JsonObject:
        """The snapshot, with what a listing also shows: kind, target, error code."""
        return {
            **self.snapshot().public(),
            "kind": self.kind,
            "target": {"session_id": self.session_id, "run_id": self.run_id},
            "error_code": self.error_code,
        }

    def public(self) -> JsonObject:
        """The listing's fields, with what `aux show` also shows: spec, output, revision."""
        return {
            **self.listed(),
            "evidence_digest": self.evidence_digest,
            "revision": self.revision,
            "spec": loads_document(self.spec_json, what="spec"),
            "output": self.output_value(),
        }


@lru_cache(maxsize=1024)
def _parent_frame(parent_json: str) -> ExecutionFrame:
    """A row's parent frame, parsed once per text; a corrupt row is refused every time."""
    return ExecutionFrame.from_mapping(loads_document(parent_json, what="parent"))
