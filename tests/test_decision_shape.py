"""Every decision has one shape: `decide_<operation>(state, request, *, now, **generated)`,
and `now` is a `Timestamp`, never text an embedder formatted itself."""

from __future__ import annotations

import importlib
import inspect
import pkgutil
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

import aios_ledger.core
import pytest
from aios_ledger.core import LedgerError, Timestamp

# The core's public modules: `aios_ledger.core` and each domain subpackage.
PUBLIC = [
    aios_ledger.core,
    *(
        importlib.import_module(f"aios_ledger.core.{found.name}")
        for found in pkgutil.iter_modules(aios_ledger.core.__path__)
        if found.ispkg
    ),
]
DECISIONS: dict[str, Callable[..., Any]] = {
    name: getattr(module, name)
    for module in PUBLIC
    for name in module.__all__
    if name.startswith("decide_")
}


def test_every_operation_has_its_decision() -> None:
    assert set(DECISIONS) == {
        "decide_adoption_seals",
        "decide_append_run_event",
        "decide_attest_commit",
        "decide_cancel",
        "decide_change_repository_settings",
        "decide_charge_scan",
        "decide_claim",
        "decide_create",
        "decide_cosign",
        "decide_create_run",
        "decide_expire",
        "decide_heartbeat",
        "decide_issue_token",
        "decide_projection",
        "decide_record_proposal",
        "decide_recover_interrupted",
        "decide_register_binding",
        "decide_register_repository",
        "decide_retry",
        "decide_revoke_token",
        "decide_spawn",
        "decide_stop",
        "decide_submit",
        "decide_task",
        "decide_transition",
        "decide_verify",
        "decide_write_intent",
        "decide_write_outcome",
    }


@pytest.mark.parametrize("name", sorted(DECISIONS))
def test_state_request_then_keywords(name: str) -> None:
    parameters = list(inspect.signature(DECISIONS[name]).parameters.values())
    assert [(p.name, p.kind) for p in parameters[:3]] == [
        ("state", inspect.Parameter.POSITIONAL_OR_KEYWORD),
        ("request", inspect.Parameter.POSITIONAL_OR_KEYWORD),
        ("now", inspect.Parameter.KEYWORD_ONLY),
    ]
    assert all(p.kind is inspect.Parameter.KEYWORD_ONLY for p in parameters[2:])
    assert parameters[2].annotation in (Timestamp, "Timestamp")


def _generated(name: str) -> dict[str, Any]:
    """Every keyword after `now`, as None: the clock is refused before any of them is read."""
    parameters = list(inspect.signature(DECISIONS[name]).parameters.values())[3:]
    return {p.name: None for p in parameters if p.default is inspect.Parameter.empty}


@pytest.mark.parametrize("name", sorted(DECISIONS))
@pytest.mark.parametrize(
    "now",
    [
        "2026-08-20T00:00:00Z",
        "2026-08-20T00:00:00.000001+00:00",  # what datetime.isoformat() gives
        datetime(2026, 8, 20, tzinfo=UTC),
        1_787_184_000_000,
        None,
    ],
)
def test_now_must_be_a_timestamp(name: str, now: object) -> None:
    with pytest.raises(LedgerError) as refused:
        DECISIONS[name](None, None, now=now, **_generated(name))
    assert refused.value.code == "TIMESTAMP_INVALID"
    assert "now must be a Timestamp" in refused.value.detail
