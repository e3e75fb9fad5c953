"""One client of the API reliability test: the contention client's random operations, through
`LedgerClient` against `aios-ledger serve` (which the test SIGKILLs and restarts meanwhile).

    python reliability_api_client.py URL TOKEN_FILE HISTORY PROCESS SECONDS SEED

The token's name is `agent-PROCESS` with the agent, owner and reviewer roles, so that one client
creates, claims, heartbeats, submits and verifies, as the in-process clients do. The client's
retries span a restart (a lost answer is asked again: keyed writes and claims are replayed), so
every operation ends with an answer or a refusal; `expire` has no route and is left out (claims
take over passed leases themselves).
"""

from __future__ import annotations

import sys
from typing import Any

from aios_ledger.shell.remote.client import LedgerClient
from aios_ledger.shell.remote.credentials import read_token_file
from reliability_contention_client import Client
from reliability_operations import perform

# Enough tries to outlast a restart of the server (a second or two), never forever.
RETRIES = 60
BACKOFF_MAX = 0.5


class ApiClient(Client):
    def __init__(self, url: str, token_file: str, history: str, process: int, seed: int) -> None:
        super().__init__(":memory:", history, process, seed)
        self.ledger.close()
        self.remote = LedgerClient(
            url, read_token_file(token_file), retries=RETRIES, backoff_max=BACKOFF_MAX
        )
        self.ledger = self.remote  # type: ignore[assignment]

    def perform(self, op: str, args: dict[str, Any]) -> Any:
        if op == "expire":
            return {"expired": [], "count": 0}  # no route: logged as a no-op
        return perform(self.remote, op, args, agent_id=self.agent)  # type: ignore[arg-type]


def main(argv: list[str]) -> int:
    url, token_file, history, process, seconds, seed = argv[1:7]
    ApiClient(url, token_file, history, int(process), int(seed)).run(float(seconds))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv))
