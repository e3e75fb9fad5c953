"""The projection's sealed tables, as the log reads them back and the statements render them
(`core.log.tables`)."""

from aios_ledger.core.log.rows import (
    GOVERNED_BINDINGS,
    INITIAL_PROJECTIONS,
    SOURCE_CAPTURE_RECOVERIES,
)
from aios_ledger.core.log.tables import SealedTable
from aios_ledger.core.projection.bindings import BINDING_REGISTERED
from aios_ledger.core.projection.records import BindingRow, ProjectionLedgerRow

TABLES = (
    SealedTable(
        INITIAL_PROJECTIONS,
        "idempotency_key",
        ProjectionLedgerRow,
        insert="insert_initial_projection",
        history="sealed_history_of_projections",
        of_task="of_task_by_task_id",
        delete="delete_archived_projections",
    ),
    SealedTable(
        SOURCE_CAPTURE_RECOVERIES,
        "idempotency_key",
        ProjectionLedgerRow,
        insert="insert_source_capture_recovery",
        history="sealed_history_of_projections",
        of_task="of_task_by_task_id",
        delete="delete_archived_recoveries",
    ),
    SealedTable(
        GOVERNED_BINDINGS,
        "binding_key",
        BindingRow,
        unsealed_writer=lambda event: event.event_type == BINDING_REGISTERED,
        key_columns="task_id job_id",
        insert="insert_binding",
        history="sealed_history_of_bindings",
        of_task="of_task_by_task_id",
        delete="delete_archived_bindings",
    ),
)
