"""aios-ledger's imperative shell: apsw connections, migrations, stores, services and the CLI.

What this module exports is listed and described in `docs/api.md` (a test holds the two equal):
the stores and services, the command line's entry point, the answers their methods give (the
core's `TypedDict`s, re-exported), and the projection's seed names together with the core
records they take, so that `from aios_ledger.shell import ...` serves a caller that embeds the
whole store.
"""

import importlib
import typing

if typing.TYPE_CHECKING:
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
    from aios_ledger.shell.actors import acting_as
    from aios_ledger.shell.api.app import create_app
    from aios_ledger.shell.api.backend import ApiSettings
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
    from aios_ledger.shell.cli import main
    from aios_ledger.shell.clock import AUTHORIZATION_ENV, system_clock
    from aios_ledger.shell.db.connection import Database
    from aios_ledger.shell.db.merkle import current_tree_head, prove_consistency, prove_inclusion
    from aios_ledger.shell.db.migrator import MigrationReport, migrate_database, migration_status
    from aios_ledger.shell.git.proposals import ProposalLimits, record_proposal
    from aios_ledger.shell.git.repos import add_repository, change_repository_settings
    from aios_ledger.shell.git.workspace import GitWorkspaces
    from aios_ledger.shell.governed.writes import governed_write, recover_writes
    from aios_ledger.shell.log.archive import (
        archive_tasks,
        restore_archive,
        show_archive,
        verify_archive,
    )
    from aios_ledger.shell.log.export import export_log, verify_export
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
    "acting_as",
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

# Where each name above is defined; `__getattr__` imports that one module when the name is first
# asked for (tests/test_public_api.py holds this table equal to the imports for type checkers).
_HOMES: dict[str, str] = {
    "add_repository": "aios_ledger.shell.git.repos",
    "change_repository_settings": "aios_ledger.shell.git.repos",
    "record_proposal": "aios_ledger.shell.git.proposals",
    "governed_write": "aios_ledger.shell.governed.writes",
    "recover_writes": "aios_ledger.shell.governed.writes",
    "GitWorkspaces": "aios_ledger.shell.git.workspace",
    "RemoteWorkspaces": "aios_ledger.shell.remote.workspaces",
    "ProposalLimits": "aios_ledger.shell.git.proposals",
    "TaskLedger": "aios_ledger.shell.tasks.ledger",
    "RunStore": "aios_ledger.shell.runs.store",
    "RunEvidenceReader": "aios_ledger.shell.runs.store",
    "AuxiliaryRunService": "aios_ledger.shell.auxiliary.service",
    "AuxiliaryRunHandle": "aios_ledger.shell.auxiliary.service",
    "AuxiliaryRunContext": "aios_ledger.shell.auxiliary.service",
    "AuxiliaryExecutor": "aios_ledger.shell.auxiliary.service",
    "CancellationToken": "aios_ledger.shell.auxiliary.service",
    "InitialExecutionProjectionStore": "aios_ledger.shell.projection.store",
    "RegisteredBindingResolver": "aios_ledger.shell.projection.bindings",
    "LedgerClient": "aios_ledger.shell.remote.client",
    "HttpBindingResolver": "aios_ledger.shell.remote.bindings",
    "Database": "aios_ledger.shell.db.connection",
    "Worker": "aios_ledger.shell.work.worker",
    "WorkerConfig": "aios_ledger.shell.work.worker",
    "register_binding": "aios_ledger.shell.projection.bindings",
    "list_auxiliary_runs": "aios_ledger.shell.auxiliary.service",
    "read_auxiliary_run": "aios_ledger.shell.auxiliary.service",
    "review_submitted": "aios_ledger.shell.work.reviewer",
    "migrate_database": "aios_ledger.shell.db.migrator",
    "migration_status": "aios_ledger.shell.db.migrator",
    "MigrationReport": "aios_ledger.shell.db.migrator",
    "export_log": "aios_ledger.shell.log.export",
    "verify_export": "aios_ledger.shell.log.export",
    "archive_tasks": "aios_ledger.shell.log.archive",
    "restore_archive": "aios_ledger.shell.log.archive",
    "show_archive": "aios_ledger.shell.log.archive",
    "verify_archive": "aios_ledger.shell.log.archive",
    "verify_log": "aios_ledger.shell.log.verification",
    "ledger_head": "aios_ledger.shell.log.verification",
    "current_tree_head": "aios_ledger.shell.db.merkle",
    "prove_inclusion": "aios_ledger.shell.db.merkle",
    "prove_consistency": "aios_ledger.shell.db.merkle",
    "system_clock": "aios_ledger.shell.clock",
    "main": "aios_ledger.shell.cli",
    "AUTHORIZATION_ENV": "aios_ledger.shell.clock",
    "acting_as": "aios_ledger.shell.actors",
    "create_app": "aios_ledger.shell.api.app",
    "ApiSettings": "aios_ledger.shell.api.backend",
    "issue_token": "aios_ledger.shell.api.tokens",
    "revoke_token": "aios_ledger.shell.api.tokens",
    "list_tokens": "aios_ledger.shell.api.tokens",
    "LedgerError": "aios_ledger.core",
    "GovernedExecutionBinding": "aios_ledger.core",
    "project_execution_envelope": "aios_ledger.core",
    "InitialExecutionProjectionError": "aios_ledger.core",
    "InitialExecutionProjectionRequest": "aios_ledger.core.projection",
    "SourceCaptureProjectionRecoveryRequest": "aios_ledger.core.projection",
    "TaskSummary": "aios_ledger.core",
    "CreateAnswer": "aios_ledger.core",
    "ClaimAnswer": "aios_ledger.core",
    "HeartbeatAnswer": "aios_ledger.core",
    "SubmitAnswer": "aios_ledger.core",
    "VerifyAnswer": "aios_ledger.core",
    "CancelAnswer": "aios_ledger.core",
    "RetryAnswer": "aios_ledger.core",
    "ExpireAnswer": "aios_ledger.core",
    "TaskView": "aios_ledger.core",
    "EventView": "aios_ledger.core",
    "HistoryEntry": "aios_ledger.core",
    "ProjectionAnswer": "aios_ledger.core.projection",
    "BindingAnswer": "aios_ledger.core.projection",
}

if not typing.TYPE_CHECKING:

    def __getattr__(name: str) -> object:
        """Each public name, loaded on first use (PEP 562): every process of the command line
        imports this package, and a command needs a few of its modules, not the whole store
        (importing them all was about half of a command's start). `python -m
        aios_ledger.shell.cli` also needs its module not yet imported by this package."""
        if name not in _HOMES:
            raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(_HOMES[name]), name)
        globals()[name] = value
        return value

    def __dir__() -> list[str]:
        return sorted({*globals(), *__all__})
