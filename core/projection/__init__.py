"""Governed bindings, execution envelopes and the initial execution projection."""

from aios_ledger.core.envelopes import ENVELOPE_SCHEMA, GOVERNANCE_FLAGS
from aios_ledger.core.projection.answers import BindingAnswer, ProjectionAnswer
from aios_ledger.core.projection.bindings import (
    BINDING_REGISTERED,
    BindingState,
    decide_register_binding,
)
from aios_ledger.core.projection.decisions import (
    PROJECTION_EVENT,
    InitialExecutionProjectionRequest,
    ProjectionCommand,
    ProjectionState,
    ResolverCall,
    SourceCaptureProjectionRecoveryRequest,
    decide_projection,
    prepare_projection,
)
from aios_ledger.core.projection.pin import (
    PinCommand,
    PinnedProjection,
    PinRead,
    pin_projection,
    prepare_pin,
)
from aios_ledger.core.projection.records import BindingRow

__all__ = [
    "ResolverCall",
    "InitialExecutionProjectionRequest",
    "SourceCaptureProjectionRecoveryRequest",
    "ProjectionCommand",
    "ProjectionState",
    "BindingRow",
    "BindingState",
    "decide_projection",
    "decide_register_binding",
    "prepare_projection",
    "ProjectionAnswer",
    "BindingAnswer",
    "ENVELOPE_SCHEMA",
    "GOVERNANCE_FLAGS",
    "PROJECTION_EVENT",
    "BINDING_REGISTERED",
    "PinCommand",
    "PinnedProjection",
    "PinRead",
    "pin_projection",
    "prepare_pin",
]
