"""The HTTP binding resolver: the governed binding of a projection, read from the API with a
systemd credential's token instead of the ledger file.

Any failure to get the binding is `BINDING_UNAVAILABLE`, raised before the projection writes
anything.
"""

from __future__ import annotations

from typing import Any

from aios_ledger.core import (
    GovernedExecutionBinding,
    InitialExecutionProjectionError,
    JsonObject,
    LedgerError,
)
from aios_ledger.core.projection.bindings import envelope_from_binding
from aios_ledger.shell.remote.client import LedgerClient, api_path
from aios_ledger.shell.remote.credentials import credential_token

# A oneshot unit: a short wait for an API that is restarting, not a long one.
RESOLVER_RETRIES = 2
PASSED_THROUGH = frozenset({"GOVERNED_BINDING_NOT_FOUND"})


def _unavailable(cause: LedgerError) -> InitialExecutionProjectionError:
    return InitialExecutionProjectionError(
        "BINDING_UNAVAILABLE", f"the governed write API gave no binding: {cause}"
    )


class HttpBindingResolver:
    """`resolver(task_id, job_id, capability, adapter, runtime_input)` over the API."""

    def __init__(self, url: str, token: str | None = None) -> None:
        try:
            token = credential_token() if token is None else token
            self._client = LedgerClient(url, token, retries=RESOLVER_RETRIES)
        except LedgerError as refused:
            raise _unavailable(refused) from None

    def close(self) -> None:
        self._client.close()

    def __call__(
        self, task_id: str, job_id: str, capability: str, adapter: str, runtime_input: Any
    ) -> JsonObject:
        try:
            raw = self._client.get_json(api_path("bindings", task_id, job_id))
            binding = GovernedExecutionBinding.from_mapping(raw)
        except LedgerError as refused:
            if refused.code in PASSED_THROUGH:
                raise InitialExecutionProjectionError(refused.code, refused.detail) from None
            raise _unavailable(refused) from None
        if (binding.task_id, binding.job_id) != (task_id, job_id):
            raise InitialExecutionProjectionError(
                "BINDING_UNAVAILABLE", "the API answered the binding of another task or job"
            )
        return envelope_from_binding(
            binding, capability=capability, adapter=adapter, runtime_input=runtime_input
        )
