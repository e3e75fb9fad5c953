"""`aios-ledger review`: an auxiliary run judges each submitted task from its evidence.

For each SUBMITTED task the reviewer reads the evidence of the task's latest attempt (the run
the worker recorded), spawns a tool-free auxiliary run whose output must be
`{decision, reason}`, with the review command as its executor, and records the decision with
`verify`. The command gets `{instruction, evidence, result}` as JSON on stdin and prints its
decision as JSON on stdout.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
from typing import Any

from aios_ledger.core import (
    AuxiliaryCapabilityProfile,
    AuxiliaryRunError,
    AuxiliaryRunSpec,
    EvidenceReadRequest,
    ExecutionFrame,
    ExecutionTarget,
    LedgerError,
    TaskView,
)
from aios_ledger.core.config import DEFAULT_REVIEW_TIMEOUT
from aios_ledger.core.jsonvalue import loads_object
from aios_ledger.core.work import (
    REVIEW_OUTPUT_SCHEMA,
    evidence_run,
    evidence_session,
    review_instruction,
)
from aios_ledger.shell.auxiliary.service import AuxiliaryRunContext, AuxiliaryRunService
from aios_ledger.shell.runs.store import RunEvidenceReader, RunStore
from aios_ledger.shell.tasks.ledger import TaskLedger

LOG = logging.getLogger("aios_ledger.review")
MAX_REVIEW_OUTPUT = 64 * 1024


class CommandReviewer:
    """An auxiliary executor that runs a shell command and reads its JSON decision."""

    def __init__(self, command: str, *, results: dict[str, Any]) -> None:
        self.command = command
        self.results = results

    async def execute(self, context: AuxiliaryRunContext) -> Any:
        task_id = context.evidence.target.session_id.removeprefix("task:")
        stdin = json.dumps(
            {
                "instruction": context.spec.instruction,
                "evidence": context.evidence.public(),
                "result": self.results.get(task_id),
            },
            sort_keys=True,
        ).encode()
        process = await asyncio.create_subprocess_exec(
            "/bin/sh",
            "-c",
            self.command,
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            start_new_session=True,
        )
        communicate = asyncio.ensure_future(process.communicate(stdin))
        cancelled = asyncio.ensure_future(context.cancellation.cancelled())
        done, _ = await asyncio.wait({communicate, cancelled}, return_when=asyncio.FIRST_COMPLETED)
        if cancelled in done:
            process.kill()
            await process.wait()
            raise AuxiliaryRunError("CANCELLED", "the review was cancelled")
        cancelled.cancel()
        stdout, stderr = communicate.result()
        if process.returncode != 0:
            tail = stderr.decode("utf-8", "replace")[-500:]
            raise AuxiliaryRunError("EXECUTOR", f"review exited {process.returncode}: {tail}")
        return loads_object(stdout[:MAX_REVIEW_OUTPUT], what="review output")


def review_submitted(
    path: str | os.PathLike[str],
    command: str,
    *,
    limit: int = 100,
    timeout: float = DEFAULT_REVIEW_TIMEOUT,
    migrate: bool = True,
) -> list[dict[str, Any]]:
    """Review every SUBMITTED task (up to `limit`); returns one record per task reviewed."""
    return asyncio.run(_review(path, command, limit=limit, timeout=timeout, migrate=migrate))


async def _review(
    path: str | os.PathLike[str],
    command: str,
    *,
    limit: int,
    timeout: float,
    migrate: bool,
) -> list[dict[str, Any]]:
    ledger = TaskLedger(path, migrate=migrate)
    runs = RunStore(path, migrate=migrate)
    results: dict[str, Any] = {}
    service = AuxiliaryRunService(CommandReviewer(command, results=results), path, migrate=migrate)
    reviewed: list[dict[str, Any]] = []
    try:
        for task in ledger.list_tasks("SUBMITTED", limit=limit):
            task_id, attempt = str(task["task_id"]), int(task["attempt"])
            results[task_id] = task.get("result")
            record = await _review_one(ledger, runs, service, task, timeout)
            reviewed.append(record)
            LOG.info(
                f"review: task {task_id} attempt {attempt}: {record['outcome']}",
                extra={"task_id": task_id, "attempt": attempt, "outcome": record["outcome"]},
            )
    finally:
        service.close()
        runs.close()
        ledger.close()
    return reviewed


async def _review_one(
    ledger: TaskLedger,
    runs: RunStore,
    service: AuxiliaryRunService,
    task: TaskView,
    timeout: float,
) -> dict[str, Any]:
    task_id, attempt, revision = str(task["task_id"]), int(task["attempt"]), int(task["revision"])
    target = ExecutionTarget(evidence_session(task_id), evidence_run(task_id, attempt))
    try:
        evidence = RunEvidenceReader(runs).read(EvidenceReadRequest(target))
    except LedgerError:
        # Submitted without a worker (from the command line): review an empty evidence run.
        runs.create_run(target.session_id, f"attempt {attempt}", run_id=target.run_id)
        evidence = RunEvidenceReader(runs).read(EvidenceReadRequest(target))
    spec = (
        AuxiliaryRunSpec(
            ExecutionFrame.root(target),
            "review",
            review_instruction(task),
            evidence.snapshot_digest,
        )
        .with_id(f"review-{task_id}-{attempt}-{revision}")
        .with_capabilities(AuxiliaryCapabilityProfile.tool_free())
        .with_output_schema(REVIEW_OUTPUT_SCHEMA)
        .with_timeout_ms(int(timeout * 1000))
    )
    handle = await service.spawn(spec, evidence)
    try:
        output = await handle.wait()
    except AuxiliaryRunError as failed:
        return {"task_id": task_id, "outcome": f"review failed: {failed}", "aux_id": handle.id}
    verdict = output.value
    assert isinstance(verdict, dict)  # the output schema requires {decision, reason}
    decision, reason = str(verdict["decision"]), str(verdict["reason"])
    verified = ledger.verify(
        task_id,
        decision=decision,
        reason=reason,
        idempotency_key=f"review:{task_id}:{revision}",
        expected_result_digest=task.get("result_digest"),
    )
    return {
        "task_id": task_id,
        "outcome": f"{decision} -> {verified['status']}",
        "decision": decision,
        "reason": reason,
        "aux_id": handle.id,
        "status": verified["status"],
    }
