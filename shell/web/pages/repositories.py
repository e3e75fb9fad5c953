"""The Repositories page (`/repositories`): the registered repositories (each with its remote
and the forge its pull requests go to), the ledger's branch moves, the writer leases held now,
and for a commit typed in, what `aios-ledger why` answers."""

from __future__ import annotations

import json
from typing import Any

from aios_ledger.core import LedgerError
from aios_ledger.core.git.records import RepositoryRow
from aios_ledger.shell.api.app import READERS
from aios_ledger.shell.attest.commits import why_commit
from aios_ledger.shell.db.connection import fetch_all
from aios_ledger.shell.web.console import Page, Rendered, Visit

# Each list shows the newest this many rows: a page stays small whatever the ledger holds.
SHOWN = 50


def _repository(row: Any) -> dict[str, Any]:
    repository = RepositoryRow.from_row(row)
    pull_requests = repository.settings().pull_request()
    return {
        "name": repository.name,
        # Sealed without a credential (a token lives in its file), so it is shown whole.
        "remote_url": repository.remote_url,
        "pull_requests": None if pull_requests is None else pull_requests.public(),
        "head_branch": repository.head_branch,
        "protected": [str(pattern) for pattern in json.loads(repository.protected_json)],
        "revision": repository.revision,
        "updated_at": repository.updated_at,
    }


def repositories_page(visit: Visit) -> Rendered:
    commit = visit.query("commit")

    def read(stores: Any) -> dict[str, Any]:
        def rows(conn: Any) -> dict[str, Any]:
            return {
                "repositories": [
                    _repository(row) for row in fetch_all(conn, "all_governed_repositories")
                ][:SHOWN],
                "moves": fetch_all(conn, "console_branch_moves", {"limit": SHOWN}),
                "leases": fetch_all(conn, "console_writer_leases_held", {"limit": SHOWN}),
            }

        found: dict[str, Any] = stores.db.read(rows)
        found["why"], found["why_refused"] = None, None
        if commit is not None:
            try:
                found["why"] = why_commit(stores.db, commit)
            except LedgerError as refused:
                found["why_refused"] = refused.detail
        return found

    return Rendered("repositories.html", {"commit": commit or "", **visit.backend.read_now(read)})


PAGES = (Page("/repositories", "repositoriesPage", repositories_page, READERS, nav="Repositories"),)
