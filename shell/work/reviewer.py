"""`aios-ledger review`: an auxiliary run judges each submitted task from its evidence.

The review command gets `{instruction, evidence, result}` on stdin and prints `{decision,
reason}`, recorded with `verify`. Each review is an auxiliary run of its own,
`review:TASK:ATTEMPT:N`, so a failed review stays as evidence and the next round runs N+1 until
`max_attempts` have failed; a completed review is never run again, only its decision recorded.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import json
import logging
import os
import signal
from typing import TYPE_CHECKING, Any, TypeAlias

from aios_ledger.core import (
    AuxiliaryRunError,
    JsonObject,
    LedgerError,
    TaskRow,
    TaskView,
)
from aios_ledger.core.auxiliary import (
    AuxiliaryCapabilityProfile,
    AuxiliaryRunRow,
    AuxiliaryRunSpec,
    ExecutionFrame,
)
from aios_ledger.core.auxiliary.queries import MAX_AUXILIARY_LIST
from aios_ledger.core.config import DEFAULT_REVIEW_ATTEMPTS, DEFAULT_REVIEW_TIMEOUT, ReviewSettings
from aios_ledger.core.jsonvalue import loads_object
from aios_ledger.core.runs import EvidenceReadRequest, EvidenceSnapshot, ExecutionTarget
from aios_ledger.core.structuring import structure
from aios_ledger.core.tasks.attempts import evidence_run, evidence_session
from aios_ledger.core.work import (
    FAILED_REVIEW_OUTCOMES,
    REVIEW_EVIDENCE_TAIL,
    REVIEW_KIND,
    REVIEW_OUTPUT_SCHEMA,
    NextReview,
    ReviewStep,
    next_review,
    review_id,
    review_instruction,
    review_summary,
)
from aios_ledger.shell.auxiliary.service import (
    AuxiliaryExecutor,
    AuxiliaryRunContext,
    AuxiliaryRunService,
    list_auxiliary_runs,
)
from aios_ledger.shell.db.connection import fetch_all
from aios_ledger.shell.db.run import Connection
from aios_ledger.shell.runs.store import RunEvidenceReader, RunStore
from aios_ledger.shell.tasks.holders import task_views
from aios_ledger.shell.tasks.ledger import TaskLedger
from aios_ledger.shell.tracing import attempt_span, traceparent_environment

# The API's client (and httpx under it) is imported by `review --api` alone.
if TYPE_CHECKING:
    from aios_ledger.shell.remote.review import RemoteReview

LOG = logging.getLogger("aios_ledger.review")
MAX_REVIEW_OUTPUT = 64 * 1024
# How a review's record shows on its span.
SPAN_ATTRIBUTES = (
    ("outcome", "aios.review.outcome"),
    ("decision", "aios.review.decision"),
    ("error_code", "error.type"),
)
LEFT_TO_A_PERSON = (
    "left SUBMITTED: every review allowed failed; a person or the task's owner decides "
    "(aios-ledger task verify)"
)


class CommandReviewer:
    """An auxiliary executor that runs a shell command and reads its JSON decision."""

    def __init__(self, command: str, *, results: dict[str, Any]) -> None:
        self.command = command
        self.results = results

    async def execute(self, context: AuxiliaryRunContext) -> Any:
        task_id = context.evidence.target.session_id.removeprefix("task:")
        given = {
            "instruction": context.spec.instruction,
            "evidence": context.evidence.public(),
            "result": self.results.get(task_id),
        }
        stdin = json.dumps(given, sort_keys=True).encode()
        traced = traceparent_environment()  # the review's span, while tracing is on
        process = await asyncio.create_subprocess_exec(
            "/bin/sh",
            "-c",
            self.command,
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            start_new_session=True,
            env={**os.environ, **traced} if traced else None,
        )
        communicate = asyncio.ensure_future(process.communicate(stdin))
        cancelled = asyncio.ensure_future(context.cancellation.cancelled())
        done, _ = await asyncio.wait({communicate, cancelled}, return_when=asyncio.FIRST_COMPLETED)
        if cancelled in done:
            # The command leads its own session: stop whatever it started too.
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGKILL)
            await process.wait()
            raise AuxiliaryRunError("CANCELLED", "the review was cancelled")
        cancelled.cancel()
        stdout, stderr = communicate.result()
        if process.returncode != 0:
            tail = stderr.decode("utf-8", "replace")[-500:]
            raise AuxiliaryRunError("EXECUTOR", f"review exited {process.returncode}: {tail}")
        try:
            return loads_object(stdout[:MAX_REVIEW_OUTPUT], what="review output")
        except LedgerError as nonsense:
            raise AuxiliaryRunError("OUTPUT_INVALID", str(nonsense)) from None


# What a review round reads and writes: a ledger file, or the API.
ReviewBackend: TypeAlias = "LocalReview | RemoteReview"


class LocalReview:
    """A review round over a ledger file, judged under the name `reviewer`, which the core
    holds against each result's author (SELF_REVIEW)."""

    def __init__(
        self, path: str | os.PathLike[str], *, reviewer: str, migrate: bool = True
    ) -> None:
        self._path = path
        self._migrate = migrate
        self.ledger = TaskLedger(path, migrate=migrate)
        self.runs = RunStore(path, migrate=migrate)
        # The module's reads over this ledger's runs, and its verify under the reviewer's name.
        self.candidates = functools.partial(tasks_to_review, self.runs)
        self.reviews_of = functools.partial(reviews_of, self.runs)
        self.evidence = functools.partial(attempt_evidence, self.runs)
        self.verify = functools.partial(self.ledger.verify, reviewer=reviewer)

    def service(self, executor: AuxiliaryExecutor) -> AuxiliaryRunService:
        return AuxiliaryRunService(executor, self._path, migrate=self._migrate)

    def close(self) -> None:
        self.runs.close()
        self.ledger.close()


def review_submitted(
    path: str | os.PathLike[str] | None,
    command: str,
    *,
    limit: int = 100,
    timeout: float = DEFAULT_REVIEW_TIMEOUT,
    max_attempts: int = DEFAULT_REVIEW_ATTEMPTS,
    migrate: bool = True,
    backend: ReviewBackend | None = None,
    reviewer: str | None = None,
) -> JsonObject:
    """Review SUBMITTED tasks (up to `limit`), over the ledger at `path` as `reviewer`, or
    through `backend` (closed after); answers `review_summary`'s `{reviews, counts, exit}`."""
    settings = structure(
        {
            "exec": command,
            "limit": limit,
            "timeout": timeout,
            "max_attempts": max_attempts,
            "reviewer": reviewer,
        },
        ReviewSettings,
        what="review settings",
    )
    if backend is None:
        if path is None:
            raise LedgerError("FIELDS_INVALID", "review needs a ledger path or a backend")
        if settings.reviewer is None:
            raise LedgerError(
                "FIELDS_INVALID",
                "reviewer: a review over a ledger file needs the reviewer's name, which the "
                "ledger holds against each result's author (SELF_REVIEW)",
            )
        backend = LocalReview(path, reviewer=settings.reviewer, migrate=migrate)
    try:
        reviews = asyncio.run(_review(backend, command, settings))
    finally:
        backend.close()
    return review_summary(reviews)


async def _review(
    backend: ReviewBackend, command: str, settings: ReviewSettings
) -> list[dict[str, Any]]:
    results: dict[str, Any] = {}
    service = backend.service(CommandReviewer(command, results=results))
    reviewed: list[dict[str, Any]] = []
    try:
        for task in backend.candidates(settings.limit):
            task_id, attempt = str(task["task_id"]), int(task["attempt"])
            results[task_id] = task.get("result")
            runs = backend.reviews_of(task_id, attempt)
            step = next_review(runs, max_attempts=settings.max_attempts)
            with attempt_span(
                "review task",
                task_id,
                attempt,
                kind="CONSUMER",
                attributes={"aios.review.attempt": step.review_attempt},
            ) as span:
                record = await _review_one(backend, service, task, step, settings.timeout)
                if span is not None:
                    shown = {a: str(record[f]) for f, a in SPAN_ATTRIBUTES if f in record}
                    span.set_attributes(shown)
            reviewed.append(record)
            _log(record)
    finally:
        service.close()
    return reviewed


def tasks_to_review(runs: RunStore, limit: int) -> list[TaskView]:
    """The tasks a round reviews, in order (the `review_candidates` read is the one rule)."""

    def read(conn: Connection) -> list[TaskView]:
        rows = fetch_all(conn, "review_candidates", {"limit": limit})
        return task_views(conn, [TaskRow.from_row(row) for row in rows])

    return runs.database.read(read)


def reviews_of(runs: RunStore, task_id: str, attempt: int) -> list[AuxiliaryRunRow]:
    """The auxiliary runs on an attempt's evidence, oldest first (what `next_review` reads)."""
    return list_auxiliary_runs(
        runs.database,
        session_id=evidence_session(task_id),
        run_id=evidence_run(task_id, attempt),
        limit=MAX_AUXILIARY_LIST,
    )


def _log(record: dict[str, Any]) -> None:
    outcome = str(record["outcome"])
    message = f"review: task {record['task_id']} attempt {record['attempt']}: {outcome}"
    if "decision" in record:
        message += f" {record['decision']}"
    if "error_code" in record:
        message += f" ({record['error_code']}: {record['error']})"
    level = logging.WARNING if outcome in FAILED_REVIEW_OUTCOMES else logging.INFO
    fields = {"task_id": record["task_id"], "attempt": record["attempt"], "outcome": outcome}
    LOG.log(level, message, extra=fields)


async def _review_one(
    backend: ReviewBackend,
    service: AuxiliaryRunService,
    task: TaskView,
    step: NextReview,
    timeout: float,
) -> dict[str, Any]:
    task_id, attempt = str(task["task_id"]), int(task["attempt"])
    record: dict[str, Any] = {
        "task_id": task_id,
        "attempt": attempt,
        "review_attempt": step.review_attempt,
        "failed_reviews": len(step.failed),
    }
    if step.step is ReviewStep.EXHAUSTED:
        last = step.failed[-1]
        return {
            **record,
            "outcome": "exhausted",
            "aux_id": last.aux_id,
            "error_code": last.error_code,
            "error": last.error,
            "detail": LEFT_TO_A_PERSON,
        }
    if step.run is not None:  # in progress elsewhere, or completed: never run again
        record["aux_id"] = step.run.aux_id
        if step.step is ReviewStep.IN_PROGRESS:
            return {**record, "outcome": "in_progress"}
        return _record_verdict(backend, task, step.run.output_value(), record)
    evidence = backend.evidence(task_id, attempt)
    spec = review_spec(task, evidence, step.review_attempt, timeout)
    handle = await service.spawn(spec, evidence)
    record["aux_id"] = handle.id
    try:
        output = await handle.wait()
    except AuxiliaryRunError as failed:
        return {
            **record,
            "outcome": "review_failed",
            "failed_reviews": len(step.failed) + 1,
            "error_code": failed.code,
            "error": failed.detail,
        }
    return _record_verdict(backend, task, output.value, record)


def review_spec(
    task: TaskView, evidence: EvidenceSnapshot, review_attempt: int, timeout: float
) -> AuxiliaryRunSpec:
    """The tool-free auxiliary run that reviews one attempt over its pinned evidence."""
    task_id, attempt = str(task["task_id"]), int(task["attempt"])
    return (
        AuxiliaryRunSpec(
            ExecutionFrame.root(evidence.target),
            REVIEW_KIND,
            review_instruction(task),
            evidence.snapshot_digest,
        )
        .with_id(review_id(task_id, attempt, review_attempt))
        .with_capabilities(AuxiliaryCapabilityProfile.tool_free())
        .with_output_schema(REVIEW_OUTPUT_SCHEMA)
        .with_timeout_ms(int(timeout * 1000))
    )


def attempt_evidence(runs: RunStore, task_id: str, attempt: int) -> EvidenceSnapshot:
    """The evidence a review reads: the attempt's run, with its last events when it is long."""
    target = ExecutionTarget(evidence_session(task_id), evidence_run(task_id, attempt))
    request = EvidenceReadRequest(target, tail_events=REVIEW_EVIDENCE_TAIL)
    try:
        return RunEvidenceReader(runs).read(request)
    except LedgerError as missing:
        if missing.code != "RUN_NOT_FOUND":
            raise
        # Claimed by a ledger from before claims created their runs: review an empty run.
        runs.create_attempt_run(task_id, attempt)
        return RunEvidenceReader(runs).read(request)


def _record_verdict(
    backend: ReviewBackend, task: TaskView, verdict: Any, record: dict[str, Any]
) -> dict[str, Any]:
    """Record a completed review's decision with `verify`, idempotent by the task's revision."""
    assert isinstance(verdict, dict)  # the output schema requires {decision, reason}
    decision, reason = str(verdict["decision"]), str(verdict["reason"])
    task_id, revision = str(task["task_id"]), int(task["revision"])
    record = {**record, "decision": decision, "reason": reason}
    try:
        verified = backend.verify(
            task_id,
            decision=decision,
            reason=reason,
            idempotency_key=f"review:{task_id}:{revision}",
            expected_result_digest=task.get("result_digest"),
        )
    except LedgerError as refused:
        failed = {"outcome": "verify_failed", "error_code": refused.code, "error": refused.detail}
        return {**record, **failed}
    return {**record, "outcome": "verified", "status": verified["status"]}
