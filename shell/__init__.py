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

from .bindings import RegisteredBindingResolver, register_binding
from .clock import AUTHORIZATION_ENV, system_clock
from .database import Database
from .migrations import MigrationReport, migrate_database, migration_status
from .projection_store import InitialExecutionProjectionStore
from .task_ledger import TaskLedger

__all__ = [
    "AUTHORIZATION_ENV",
    "Database",
    "GovernedExecutionBinding",
    "InitialExecutionProjectionError",
    "InitialExecutionProjectionRequest",
    "InitialExecutionProjectionStore",
    "LedgerError",
    "MigrationReport",
    "RegisteredBindingResolver",
    "SourceCaptureProjectionRecoveryRequest",
    "TaskLedger",
    "migrate_database",
    "migration_status",
    "project_execution_envelope",
    "register_binding",
    "system_clock",
]
