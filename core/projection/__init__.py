"""Governed bindings, execution envelopes and the initial execution projection."""

import typing

if typing.TYPE_CHECKING:
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
    from aios_ledger.core.projection.envelopes import ENVELOPE_SCHEMA, GOVERNANCE_FLAGS
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

if not typing.TYPE_CHECKING:

    def __getattr__(name: str) -> object:
        """Each public name, loaded on first use (PEP 562): the core's modules import each
        other's across its subpackages, so a package that imported all of its modules as it is
        imported would close import cycles. The imports above, for type checkers, are these."""
        if name not in __all__:
            raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
        from aios_ledger.core.projection.answers import BindingAnswer, ProjectionAnswer  # noqa: F401
        from aios_ledger.core.projection.bindings import (  # noqa: F401
            BINDING_REGISTERED,
            BindingState,
            decide_register_binding,
        )
        from aios_ledger.core.projection.decisions import (  # noqa: F401
            PROJECTION_EVENT,
            InitialExecutionProjectionRequest,
            ProjectionCommand,
            ProjectionState,
            ResolverCall,
            SourceCaptureProjectionRecoveryRequest,
            decide_projection,
            prepare_projection,
        )
        from aios_ledger.core.projection.envelopes import ENVELOPE_SCHEMA, GOVERNANCE_FLAGS  # noqa: F401
        from aios_ledger.core.projection.pin import (  # noqa: F401
            PinCommand,
            PinnedProjection,
            PinRead,
            pin_projection,
            prepare_pin,
        )
        from aios_ledger.core.projection.records import BindingRow  # noqa: F401

        loaded = locals()
        globals().update({export: loaded[export] for export in __all__})
        return loaded[name]

    def __dir__() -> list[str]:
        return sorted({*globals(), *__all__})
