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
from aios_ledger.shell.auxiliary.service import (
    AuxiliaryExecutor,
    AuxiliaryRunContext,
    AuxiliaryRunHandle,
    AuxiliaryRunService,
    CancellationToken,
    list_auxiliary_runs,
    read_auxiliary_run,
)
from aios_ledger.shell.clock import AUTHORIZATION_ENV, system_clock
from aios_ledger.shell.db.connection import Database
from aios_ledger.shell.db.migrator import MigrationReport, migrate_database, migration_status
from aios_ledger.shell.log.export import export_log, verify_export
from aios_ledger.shell.log.verification import ledger_head, verify_log
from aios_ledger.shell.projection.bindings import RegisteredBindingResolver, register_binding
from aios_ledger.shell.projection.store import InitialExecutionProjectionStore
from aios_ledger.shell.runs.store import RunEvidenceReader, RunStore
from aios_ledger.shell.tasks.ledger import TaskLedger
from aios_ledger.shell.work.reviewer import review_submitted
from aios_ledger.shell.work.worker import Worker, WorkerConfig

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
