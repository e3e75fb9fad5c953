"""The governed repositories of a worker away from the ledger's host (`worker --api`): the
local worker's workspace code over the API's workspace download and proposal upload.
"""

from __future__ import annotations

import contextlib
import tempfile
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any, Protocol

from aios_ledger.core import GovernedExecutionBinding, LedgerError
from aios_ledger.core.git import ProposalAnswer
from aios_ledger.shell.git.workspace import Workspaces

# What the server answers for a claim whose binding names no repository it governs.
NOT_GOVERNED = frozenset({"TASK_NOT_BOUND", "REPOSITORY_NOT_FOUND"})


class GovernedClient(Protocol):
    """The two calls of `LedgerClient` the remote workspaces make."""

    def download_workspace(self, task_id: str, *, lease_token: str, out: str) -> int: ...

    def upload_proposal(
        self, task_id: str, *, lease_token: str, bundle: bytes
    ) -> ProposalAnswer: ...


class ApiRepositories:
    """The governed repositories as the API serves them to the agent holding a task."""

    def __init__(self, client: GovernedClient) -> None:
        self._client = client

    @contextlib.contextmanager
    def source(
        self, claim: Mapping[str, Any], binding: GovernedExecutionBinding
    ) -> Iterator[str | None]:
        with tempfile.TemporaryDirectory(prefix="aios-remote-base-") as folder:
            out = str(Path(folder, "base.bundle"))
            try:
                self._client.download_workspace(
                    str(claim["task_id"]), lease_token=str(claim["lease_token"]), out=out
                )
            except LedgerError as refused:
                if refused.code not in NOT_GOVERNED:
                    raise
                yield None
                return
            yield out

    def record(self, claim: Mapping[str, Any], bundle: bytes) -> ProposalAnswer:
        return self._client.upload_proposal(
            str(claim["task_id"]), lease_token=str(claim["lease_token"]), bundle=bundle
        )


class RemoteWorkspaces(Workspaces):
    def __init__(self, client: GovernedClient) -> None:
        super().__init__(ApiRepositories(client))
