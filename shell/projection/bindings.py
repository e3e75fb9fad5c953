"""Registered governed bindings and the built-in resolver that projects envelopes from them."""

from __future__ import annotations

import os
from typing import Any

from aios_ledger.core import GovernedExecutionBinding, JsonObject, LedgerError
from aios_ledger.core.log import LEDGER_CHAIN
from aios_ledger.core.projection import (
    BindingAnswer,
    BindingRow,
    BindingState,
    decide_register_binding,
)
from aios_ledger.core.projection.bindings import envelope_from_binding
from aios_ledger.shell.actors import current_actor
from aios_ledger.shell.clock import Clock, read_clock, system_clock
from aios_ledger.shell.db.apply import PlanExecutor
from aios_ledger.shell.db.connection import Database, fetch_record
from aios_ledger.shell.db.run import Connection


def _binding_row(conn: Connection, task_id: str, job_id: str) -> BindingRow | None:
    return fetch_record(conn, "get_binding", {"task_id": task_id, "job_id": job_id}, BindingRow)


def register_binding(db: Database, raw: object, *, clock: Clock = system_clock) -> BindingAnswer:
    binding = GovernedExecutionBinding.from_mapping(raw)

    actor = current_actor()

    def write(conn: Connection) -> BindingAnswer:
        plans = PlanExecutor(conn)
        prior = _binding_row(conn, binding.task_id, binding.job_id)
        state = BindingState(prior=prior, tail=plans.tail(LEDGER_CHAIN))
        return plans.apply(
            decide_register_binding(state, binding, now=read_clock(clock), actor=actor)
        )

    return db.write(write)


def registered_binding(db: Database, task_id: str, job_id: str) -> GovernedExecutionBinding:
    """The binding registered for a task's job; `GOVERNED_BINDING_NOT_FOUND` when there is none."""
    row = db.read(lambda conn: _binding_row(conn, task_id, job_id))
    if row is None:
        raise LedgerError(
            "GOVERNED_BINDING_NOT_FOUND", f"no binding registered for {task_id!r}/{job_id!r}"
        )
    return row.binding()


class RegisteredBindingResolver:
    """The projection's resolver over the registered bindings; a `database` given stays the
    caller's to close."""

    def __init__(
        self,
        path: str | os.PathLike[str] | None,
        *,
        migrate: bool = True,
        database: Database | None = None,
    ) -> None:
        self._owns_db = database is None
        self._db = database if database is not None else Database(path, migrate=migrate)

    def close(self) -> None:
        if self._owns_db:
            self._db.close()

    def __call__(
        self, task_id: str, job_id: str, capability: str, adapter: str, runtime_input: Any
    ) -> JsonObject:
        return envelope_from_binding(
            registered_binding(self._db, task_id, job_id),
            capability=capability,
            adapter=adapter,
            runtime_input=runtime_input,
        )
