"""aios-ledger's imperative shell: apsw connections, migrations, stores, services and the CLI.

What this module exports is described in `docs/api.md` (a test holds the two equal), so that
`from aios_ledger.shell import ...` serves a caller that embeds the whole store.
"""

import ast
import importlib
from pathlib import Path
from typing import TYPE_CHECKING, Any

# Each public name is loaded on first use (PEP 562): a command needs a few of the shell's
# modules, not the whole store. Type checkers and `_homes` read the one list of names below.
if TYPE_CHECKING:
    from aios_ledger.core import (
        CancelAnswer as CancelAnswer,
        ClaimAnswer as ClaimAnswer,
        CreateAnswer as CreateAnswer,
        EventView as EventView,
        ExpireAnswer as ExpireAnswer,
        GovernedExecutionBinding as GovernedExecutionBinding,
        HeartbeatAnswer as HeartbeatAnswer,
        HistoryEntry as HistoryEntry,
        InitialExecutionProjectionError as InitialExecutionProjectionError,
        LedgerError as LedgerError,
        RetryAnswer as RetryAnswer,
        SubmitAnswer as SubmitAnswer,
        TaskSummary as TaskSummary,
        TaskView as TaskView,
        VerifyAnswer as VerifyAnswer,
        project_execution_envelope as project_execution_envelope,
    )
    from aios_ledger.core.projection import (
        BindingAnswer as BindingAnswer,
        InitialExecutionProjectionRequest as InitialExecutionProjectionRequest,
        ProjectionAnswer as ProjectionAnswer,
        SourceCaptureProjectionRecoveryRequest as SourceCaptureProjectionRecoveryRequest,
    )
    from aios_ledger.shell.actors import acting_as as acting_as
    from aios_ledger.shell.api.app import create_app as create_app
    from aios_ledger.shell.api.backend import ApiSettings as ApiSettings
    from aios_ledger.shell.api.tokens import (
        issue_token as issue_token,
        list_tokens as list_tokens,
        revoke_token as revoke_token,
    )
    from aios_ledger.shell.auxiliary.service import (
        AuxiliaryExecutor as AuxiliaryExecutor,
        AuxiliaryRunContext as AuxiliaryRunContext,
        AuxiliaryRunHandle as AuxiliaryRunHandle,
        AuxiliaryRunService as AuxiliaryRunService,
        CancellationToken as CancellationToken,
        list_auxiliary_runs as list_auxiliary_runs,
        read_auxiliary_run as read_auxiliary_run,
    )
    from aios_ledger.shell.cli import main as main
    from aios_ledger.shell.clock import (
        AUTHORIZATION_ENV as AUTHORIZATION_ENV,
        system_clock as system_clock,
    )
    from aios_ledger.shell.db.connection import Database as Database
    from aios_ledger.shell.db.merkle import (
        current_tree_head as current_tree_head,
        prove_consistency as prove_consistency,
        prove_inclusion as prove_inclusion,
    )
    from aios_ledger.shell.db.migrator import (
        MigrationReport as MigrationReport,
        migrate_database as migrate_database,
        migration_status as migration_status,
    )
    from aios_ledger.shell.git.proposals import (
        ProposalLimits as ProposalLimits,
        record_proposal as record_proposal,
    )
    from aios_ledger.shell.git.repos import (
        add_repository as add_repository,
        change_repository_settings as change_repository_settings,
    )
    from aios_ledger.shell.git.workspace import GitWorkspaces as GitWorkspaces
    from aios_ledger.shell.governed.writes import (
        governed_write as governed_write,
        recover_writes as recover_writes,
    )
    from aios_ledger.shell.log.archive import (
        archive_tasks as archive_tasks,
        restore_archive as restore_archive,
        show_archive as show_archive,
        verify_archive as verify_archive,
    )
    from aios_ledger.shell.log.export import (
        export_log as export_log,
        verify_export as verify_export,
    )
    from aios_ledger.shell.log.verification import (
        ledger_head as ledger_head,
        verify_log as verify_log,
    )
    from aios_ledger.shell.projection.bindings import (
        RegisteredBindingResolver as RegisteredBindingResolver,
        register_binding as register_binding,
    )
    from aios_ledger.shell.projection.store import (
        InitialExecutionProjectionStore as InitialExecutionProjectionStore,
    )
    from aios_ledger.shell.remote.bindings import HttpBindingResolver as HttpBindingResolver
    from aios_ledger.shell.remote.client import LedgerClient as LedgerClient
    from aios_ledger.shell.remote.workspaces import RemoteWorkspaces as RemoteWorkspaces
    from aios_ledger.shell.runs.store import (
        RunEvidenceReader as RunEvidenceReader,
        RunStore as RunStore,
    )
    from aios_ledger.shell.tasks.ledger import TaskLedger as TaskLedger
    from aios_ledger.shell.work.reviewer import review_submitted as review_submitted
    from aios_ledger.shell.work.worker import Worker as Worker, WorkerConfig as WorkerConfig


def _homes() -> dict[str, str]:
    """Each name imported under `TYPE_CHECKING` above, and the module it is imported from."""
    tree = ast.parse(Path(__file__).read_text(encoding="utf-8"))
    guarded = next(node for node in tree.body if isinstance(node, ast.If))
    return {
        alias.name: statement.module
        for statement in guarded.body
        if isinstance(statement, ast.ImportFrom) and statement.module is not None
        for alias in statement.names
    }


_HOMES = _homes()
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
