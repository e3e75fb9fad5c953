"""What a task accepts as its result: never a governance flag, and under an envelope only a result
that meets its action's contract and echoes the envelope."""

from __future__ import annotations

from collections.abc import Mapping

from aios_ledger.core.contracts.checks import require_contract
from aios_ledger.core.envelopes import verify_execution_envelope
from aios_ledger.core.errors import LedgerError
from aios_ledger.core.jsonvalue import JsonObject
from aios_ledger.core.tasks.records import TaskRow

# Which contract (a file `core/contracts/<name>.json`) each envelope action's results must meet.
RESULT_CONTRACTS: Mapping[str, str] = {
    "agent_runtime": "agent_runtime_result.v1",
    "source_capture": "source_capture_result.v1",
}
# Any of these set (to anything but false or null) is a governance violation.
RESULT_GOVERNANCE_FLAGS = (
    "direct_main_write",
    "main_write",
    "production_write",
    "force_push",
    "protected_ref_bypass",
    "secret_material_exposed",
)
_BINDING_ECHOES = ("repository", "base_oid", "expected_branch_oid", "target_branch", "generation")


def task_envelope(task: TaskRow) -> JsonObject | None:
    """The task's verified execution envelope, or None when it has none."""
    metadata = task.metadata()
    return None if "execution" not in metadata else verify_execution_envelope(metadata["execution"])


def check_task_result(
    task: TaskRow, result: JsonObject, contracts: Mapping[str, Mapping[str, object]]
) -> None:
    flags = [flag for flag in RESULT_GOVERNANCE_FLAGS if result.get(flag) not in (None, False)]
    if flags:
        raise LedgerError(
            "RESULT_GOVERNANCE_VIOLATION", f"the result sets governance flags {flags}"
        )
    envelope = task_envelope(task)
    if envelope is None:
        return
    action = str(envelope["action"])
    contract_name = RESULT_CONTRACTS.get(action)
    schema = None if contract_name is None else contracts.get(contract_name)
    if schema is None:
        raise LedgerError("RESULT_CONTRACT_UNKNOWN", f"no result contract for action {action!r}")
    require_contract(schema, result, code="RESULT_CONTRACT_INVALID")
    for name in ("task_id", "job_id"):
        if result.get(name) != envelope[name]:
            raise LedgerError("RESULT_CONTRACT_INVALID", f"$.{name}: is not the envelope's {name}")
    binding = envelope["binding"]
    assert isinstance(binding, dict)
    drifted = [name for name in _BINDING_ECHOES if name in result and result[name] != binding[name]]
    if drifted:
        raise LedgerError(
            "RESULT_CONTRACT_INVALID", f"$.{drifted[0]}: is not the envelope's binding"
        )
    if result.get("execution_digest") != envelope["execution_digest"]:
        raise LedgerError(
            "RESULT_EXECUTION_DIGEST_MISMATCH",
            "$.execution_digest: the result does not echo the envelope's execution_digest",
        )
