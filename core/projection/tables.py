"""The projection's sealed tables, as the log reads them back (`core.log.tables`)."""

from aios_ledger.core.log.records import EventRow
from aios_ledger.core.log.rows import (
    GOVERNED_BINDINGS,
    INITIAL_PROJECTIONS,
    SOURCE_CAPTURE_RECOVERIES,
)
from aios_ledger.core.log.tables import SealedTable
from aios_ledger.core.projection.bindings import BINDING_REGISTERED
from aios_ledger.core.projection.records import BindingRow, ProjectionLedgerRow


def _registers_binding(event: EventRow) -> bool:
    return event.event_type == BINDING_REGISTERED


SEALED_TABLES: tuple[SealedTable, ...] = (
    SealedTable(INITIAL_PROJECTIONS, "idempotency_key", ProjectionLedgerRow),
    SealedTable(SOURCE_CAPTURE_RECOVERIES, "idempotency_key", ProjectionLedgerRow),
    # Keyed by two columns: the statement selects their `binding_key` beside them.
    SealedTable(GOVERNED_BINDINGS, "binding_key", BindingRow, unsealed_writer=_registers_binding),
)
