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
from .log_export import export_log, verify_export
from .log_verification import ledger_head, verify_log
from .migrations import MigrationReport, migrate_database, migration_status
from .projection_store import InitialExecutionProjectionStore

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
    "export_log",
    "ledger_head",
    "migrate_database",
    "migration_status",
    "project_execution_envelope",
    "register_binding",
    "system_clock",
    "verify_export",
    "verify_log",
]
