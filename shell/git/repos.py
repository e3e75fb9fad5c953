"""Governed repositories: `repo add NAME PATH [--protected PATTERN ...] [--no-default-protection]`,
`repo list`, `repo show`.

A governed repository is a bare git repository on this machine, registered under the name the
bindings use (`aios/aios`); the ledger is the only writer of its branches."""

from __future__ import annotations

import os
from collections.abc import Sequence

from aios_ledger.core import LedgerError
from aios_ledger.core.git import (
    RegisterRepositoryRequest,
    RepositoryAnswer,
    RepositoryRow,
    RepositoryState,
    decide_register_repository,
)
from aios_ledger.core.git.answers import repository_answer
from aios_ledger.core.log import LEDGER_CHAIN
from aios_ledger.shell.clock import Clock, read_clock, system_clock
from aios_ledger.shell.db.apply import PlanExecutor
from aios_ledger.shell.db.connection import Database, fetch_all, fetch_record
from aios_ledger.shell.db.run import Connection
from aios_ledger.shell.git.runner import run_git


def repository_row(conn: Connection, name: str) -> RepositoryRow | None:
    return fetch_record(conn, "get_governed_repository", {"name": name}, RepositoryRow)


def require_bare(path: str) -> str:
    """The absolute, resolved path of a bare repository, or `REPOSITORY_NOT_BARE`."""
    resolved = os.path.realpath(path)
    if not os.path.isdir(resolved):
        raise LedgerError("REPOSITORY_NOT_BARE", f"{path!r} is not a directory")
    found = run_git(
        ["--git-dir", resolved, "rev-parse", "--is-bare-repository"], cwd=resolved, check=False
    )
    if found.returncode != 0 or found.text.strip() != "true":
        raise LedgerError("REPOSITORY_NOT_BARE", f"{path!r} is not a bare git repository")
    return resolved


def head_branch(path: str) -> str | None:
    """The branch the repository's HEAD names (None: HEAD is detached)."""
    found = run_git(["--git-dir", path, "symbolic-ref", "--quiet", "--short", "HEAD"], check=False)
    name = found.text.strip()
    return name if found.returncode == 0 and name else None


def add_repository(
    db: Database,
    name: str,
    path: str,
    protected: Sequence[str] | None = None,
    *,
    default_protection: bool = True,
    clock: Clock = system_clock,
) -> RepositoryAnswer:
    """Register the bare repository at `path` under `name`. Its HEAD branch is always
    protected; `protected` patterns are added to the defaults (main, master, release/*), or
    replace them with `default_protection=False`."""
    raw_path = path if isinstance(path, str) else ""
    request = RegisterRepositoryRequest.from_mapping(
        {
            "name": name,
            "path": require_bare(raw_path) if raw_path else raw_path,
            "protected": None if protected is None else list(protected),
            "default_protection": default_protection,
        }
    )
    head = head_branch(request.path)

    def write(conn: Connection) -> RepositoryAnswer:
        plans = PlanExecutor(conn)
        state = RepositoryState(
            prior=repository_row(conn, request.name), tail=plans.tail(LEDGER_CHAIN)
        )
        return plans.apply(
            decide_register_repository(state, request, now=read_clock(clock), head_branch=head)
        )

    return db.write(write)


def list_repositories(db: Database) -> list[RepositoryAnswer]:
    def read(conn: Connection) -> list[RepositoryAnswer]:
        rows = fetch_all(conn, "list_governed_repositories")
        return [repository_answer(RepositoryRow.from_row(row), idempotent=False) for row in rows]

    answers = db.read(read)
    for answer in answers:
        answer.pop("idempotent")  # type: ignore[misc]
    return answers


def get_repository(db: Database, name: str) -> RepositoryRow:
    row = db.read(lambda conn: repository_row(conn, name))
    if row is None:
        raise LedgerError("REPOSITORY_NOT_FOUND", f"no governed repository {name!r}")
    return row


def show_repository(db: Database, name: str) -> dict[str, object]:
    row = get_repository(db, name)
    shown: dict[str, object] = dict(repository_answer(row, idempotent=False))
    shown.pop("idempotent")
    shown["registered_at"] = row.created_at
    return shown
