"""aios-ledger's imperative shell: apsw connections, migrations, stores, services and the CLI.

What this module exports is listed and described in `docs/api.md` (a test holds the two equal):
the stores and services, the command line's entry point, the answers their methods give (the
core's `TypedDict`s, re-exported), and the projection's seed names together with the core
records they take, so that `from aios_ledger.shell import ...` serves a caller that embeds the
whole store.
"""

import importlib
from typing import Any

# Each public name and the module that defines it, loaded on first use (PEP 562) rather than
# imported here: every process of the command line imports this package, and a command needs a
# few of the shell's modules, not the whole store (`python -m aios_ledger.shell.cli` also needs
# its module not yet imported by this package).
_HOMES: dict[str, str] = {
    "add_repository": "aios_ledger.shell.git.repos",
    "change_repository_settings": "aios_ledger.shell.git.repos",
    "record_proposal": "aios_ledger.shell.git.proposals",
    "governed_write": "aios_ledger.shell.governed.writes",
    "recover_writes": "aios_ledger.shell.governed.writes",
    "GitWorkspaces": "aios_ledger.shell.git.workspace",
    "RemoteWorkspaces": "aios_ledger.shell.remote.workspaces",
    "ProposalLimits": "aios_ledger.shell.git.proposals",
    # stores and services
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
    # functions
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
    # re-exported from the core: the seed's names, and the answers of the methods above
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

__all__ = list(_HOMES)


def __getattr__(name: str) -> Any:
    """The public name `name`, imported from its home the first time it is asked for."""
    if name not in _HOMES:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(_HOMES[name]), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
