"""aios-ledger's imperative shell: apsw connections, migrations, stores, services and the CLI.

What this module exports is listed and described in `docs/api.md` (a test holds the two equal):
the stores and services, the command line's entry point, the answers their methods give (the
core's `TypedDict`s, re-exported), and the projection's seed names together with the core
records they take, so that `from aios_ledger.shell import ...` serves a caller that embeds the
whole store.
"""

from typing import TYPE_CHECKING

from aios_ledger.core import (
    CancelAnswer,
    ClaimAnswer,
    CreateAnswer,
    EventView,
    ExpireAnswer,
    GovernedExecutionBinding,
    HeartbeatAnswer,
    HistoryEntry,
    InitialExecutionProjectionError,
    LedgerError,
    RetryAnswer,
    SubmitAnswer,
    TaskSummary,
    TaskView,
    VerifyAnswer,
    project_execution_envelope,
)
from aios_ledger.core.projection import (
    BindingAnswer,
    InitialExecutionProjectionRequest,
    ProjectionAnswer,
    SourceCaptureProjectionRecoveryRequest,
)
from aios_ledger.shell.api.tokens import issue_token, list_tokens, revoke_token
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
from aios_ledger.shell.git.proposals import ProposalLimits, record_proposal
from aios_ledger.shell.git.repos import add_repository, change_repository_settings
from aios_ledger.shell.git.workspace import GitWorkspaces
from aios_ledger.shell.git.writes import governed_write, recover_writes
from aios_ledger.shell.log.archive import (
    archive_tasks,
    restore_archive,
    show_archive,
    verify_archive,
)
from aios_ledger.shell.log.export import export_log, verify_export
from aios_ledger.shell.log.merkle import current_tree_head, prove_consistency, prove_inclusion
from aios_ledger.shell.log.verification import ledger_head, verify_log
from aios_ledger.shell.projection.bindings import RegisteredBindingResolver, register_binding
from aios_ledger.shell.projection.store import InitialExecutionProjectionStore
from aios_ledger.shell.remote.bindings import HttpBindingResolver
from aios_ledger.shell.remote.client import LedgerClient
from aios_ledger.shell.remote.workspaces import RemoteWorkspaces
from aios_ledger.shell.runs.store import RunEvidenceReader, RunStore
from aios_ledger.shell.tasks.ledger import TaskLedger
from aios_ledger.shell.work.reviewer import review_submitted
from aios_ledger.shell.work.worker import Worker, WorkerConfig

if TYPE_CHECKING:
    from aios_ledger.shell.api.app import create_app
    from aios_ledger.shell.api.backend import ApiSettings
    from aios_ledger.shell.cli import main


def __getattr__(name: str) -> object:
    """`main` is loaded when it is asked for: the command line imports every command, and
    `python -m aios_ledger.shell.cli` must find its module not yet imported by this package."""
    if name == "main":
        from aios_ledger.shell.cli import main

        return main
    # The HTTP server's names are loaded when asked for: the command line need not import
    # Starlette for every command.
    if name == "create_app":
        from aios_ledger.shell.api.app import create_app

        return create_app
    if name == "ApiSettings":
        from aios_ledger.shell.api.backend import ApiSettings

        return ApiSettings
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = [
    "add_repository",
    "change_repository_settings",
    "record_proposal",
    "governed_write",
    "recover_writes",
    "GitWorkspaces",
    "RemoteWorkspaces",
    "ProposalLimits",
    # stores and services
    "TaskLedger",
    "RunStore",
    "RunEvidenceReader",
    "AuxiliaryRunService",
    "AuxiliaryRunHandle",
    "AuxiliaryRunContext",
    "AuxiliaryExecutor",
    "CancellationToken",
    "InitialExecutionProjectionStore",
    "RegisteredBindingResolver",
    "LedgerClient",
    "HttpBindingResolver",
    "Database",
    "Worker",
    "WorkerConfig",
    # functions
    "register_binding",
    "list_auxiliary_runs",
    "read_auxiliary_run",
    "review_submitted",
    "migrate_database",
    "migration_status",
    "MigrationReport",
    "export_log",
    "verify_export",
    "archive_tasks",
    "restore_archive",
    "show_archive",
    "verify_archive",
    "verify_log",
    "ledger_head",
    "current_tree_head",
    "prove_inclusion",
    "prove_consistency",
    "system_clock",
    "main",
    "AUTHORIZATION_ENV",
    "create_app",
    "ApiSettings",
    "issue_token",
    "revoke_token",
    "list_tokens",
    # re-exported from the core: the seed's names, and the answers of the methods above
    "LedgerError",
    "GovernedExecutionBinding",
    "project_execution_envelope",
    "InitialExecutionProjectionError",
    "InitialExecutionProjectionRequest",
    "SourceCaptureProjectionRecoveryRequest",
    "TaskSummary",
    "CreateAnswer",
    "ClaimAnswer",
    "HeartbeatAnswer",
    "SubmitAnswer",
    "VerifyAnswer",
    "CancelAnswer",
    "RetryAnswer",
    "ExpireAnswer",
    "TaskView",
    "EventView",
    "HistoryEntry",
    "ProjectionAnswer",
    "BindingAnswer",
]
