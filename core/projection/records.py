"""The rows of projections: a `governed_bindings` row, and a row of a projection's ledger, which its
sealed event covers."""

from __future__ import annotations

from typing import NamedTuple

import attrs
from aios_ledger.core.envelopes import GovernedExecutionBinding
from aios_ledger.core.jsonvalue import loads_object
from aios_ledger.core.log.rows import GOVERNED_BINDINGS, RowImage, binding_key, row_image


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

    def image(self) -> RowImage:
        """The row as its `GOVERNED_BINDING_REGISTERED` seal covers it, under `binding_key`."""
        return row_image(
            GOVERNED_BINDINGS, binding_key(self.task_id, self.job_id), attrs.asdict(self)
        )


class ProjectionLedgerRow(NamedTuple):
    """One row of either projection ledger, which share their columns."""

    idempotency_key: str
    task_id: str
    job_id: str
    request_sha256: str
    execution_digest: str
    response_json: str
    created_at: str

    def image(self, table: str) -> RowImage:
        return row_image(table, self.idempotency_key, self._asdict())
