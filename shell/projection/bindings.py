"""Registered governed bindings and the built-in resolver that projects envelopes from them."""

from __future__ import annotations

import os
from typing import Any

import apsw
from aios_ledger.core import (
    LEDGER_CHAIN,
    BindingRow,
    GovernedExecutionBinding,
    JsonObject,
    LedgerError,
    decide_register_binding,
    envelope_from_binding,
)
from aios_ledger.shell.clock import Clock, now_text, system_clock
from aios_ledger.shell.db.apply import PlanExecutor
from aios_ledger.shell.db.connection import Database, fetch_record


def _binding_row(conn: apsw.Connection, task_id: str, job_id: str) -> BindingRow | None:
    return fetch_record(conn, "get_binding", {"task_id": task_id, "job_id": job_id}, BindingRow)


def register_binding(db: Database, raw: object, *, clock: Clock = system_clock) -> dict[str, Any]:
    binding = GovernedExecutionBinding.from_mapping(raw)

    def write(conn: apsw.Connection) -> dict[str, Any]:
        plans = PlanExecutor(conn)
        prior = _binding_row(conn, binding.task_id, binding.job_id)
        tail = plans.tail(LEDGER_CHAIN)
        return plans.apply(decide_register_binding(binding, prior, now=now_text(clock), tail=tail))

    return db.write(write)


class RegisteredBindingResolver:
    """`resolver(task_id, job_id, capability, adapter, runtime_input)` over `governed_bindings`."""

    def __init__(self, path: str | os.PathLike[str], *, migrate: bool = True) -> None:
        self._db = Database(path, migrate=migrate)

    def close(self) -> None:
        self._db.close()

    def __call__(
        self, task_id: str, job_id: str, capability: str, adapter: str, runtime_input: Any
    ) -> JsonObject:
        row = self._db.read(lambda conn: _binding_row(conn, task_id, job_id))
        if row is None:
            raise LedgerError(
                "GOVERNED_BINDING_NOT_FOUND", f"no binding registered for {task_id!r}/{job_id!r}"
            )
        return envelope_from_binding(
            row.binding(), capability=capability, adapter=adapter, runtime_input=runtime_input
        )
