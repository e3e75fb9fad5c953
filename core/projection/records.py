"""The rows of projections: a `governed_bindings` row.

The projections' own idempotency ledgers are read only for their first answers, into the tasks'
`IdempotencyRow`."""

from __future__ import annotations

import attrs
from aios_ledger.core.jsonvalue import loads_object
from aios_ledger.core.projection.envelopes import GovernedExecutionBinding


@attrs.frozen
class BindingRow:
    """One row of `governed_bindings`: the binding registered, once, for a task's job."""

    task_id: str
    job_id: str
    binding_json: str
    binding_sha256: str
    created_at: str

    def binding(self) -> GovernedExecutionBinding:
        return GovernedExecutionBinding.from_mapping(loads_object(self.binding_json))
