"""aios-ledger's imperative shell: apsw connections, migrations, stores, services and the CLI.

The projection's public names are re-exported here together with the core records they take,
so that `from aios_ledger.shell import ...` serves a caller that embeds the whole store.
"""

from aios_ledger.core import (
    GovernedExecutionBinding,
    InitialExecutionProjectionError,
    InitialExecutionProjectionRequest,
    LedgerError,
    SourceCaptureProjectionRecoveryRequest,
    project_execution_envelope,
)

from .auxiliary import (
    AuxiliaryExecutor,
    AuxiliaryRunContext,
    AuxiliaryRunHandle,
    AuxiliaryRunService,
    CancellationToken,
    list_auxiliary_runs,
    read_auxiliary_run,
)
from .bindings import RegisteredBindingResolver, register_binding
from .clock import AUTHORIZATION_ENV, system_clock
from .database import Database
from .log_export import export_log, verify_export
from .log_verification import ledger_head, verify_log
from .migrations import MigrationReport, migrate_database, migration_status
from .projection_store import InitialExecutionProjectionStore
from .reviewer import review_submitted
from .runs import RunEvidenceReader, RunStore
from .task_ledger import TaskLedger
from .worker import Worker, WorkerConfig

__all__ = [
    "AUTHORIZATION_ENV",
    "AuxiliaryExecutor",
    "AuxiliaryRunContext",
    "AuxiliaryRunHandle",
    "AuxiliaryRunService",
    "CancellationToken",
    "Database",
    "GovernedExecutionBinding",
    "InitialExecutionProjectionError",
    "InitialExecutionProjectionRequest",
    "InitialExecutionProjectionStore",
    "LedgerError",
    "MigrationReport",
    "RegisteredBindingResolver",
    "RunEvidenceReader",
    "RunStore",
    "SourceCaptureProjectionRecoveryRequest",
    "TaskLedger",
    "Worker",
    "WorkerConfig",
    "export_log",
    "ledger_head",
    "list_auxiliary_runs",
    "migrate_database",
    "migration_status",
    "project_execution_envelope",
    "read_auxiliary_run",
    "register_binding",
    "review_submitted",
    "system_clock",
    "verify_export",
    "verify_log",
]
