"""`aios-ledger worker`: claims tasks and runs a command for each, under the task's lease.

For each claim the command gets the claim as JSON on stdin and `AIOS_TASK_ID`,
`AIOS_EXECUTION_DIGEST`, `AIOS_ATTEMPT` in its environment; what it prints on stderr becomes run
events (the evidence a reviewer reads), and the JSON object it prints on stdout is submitted as
the result. A command that fails, hangs past the timeout or prints garbage leads to a submitted
failure result; a lost lease stops the command and submits nothing.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import queue
import signal
import subprocess
import threading
import time
from typing import IO, Any

import attrs
from aios_ledger.core import ClaimAnswer, LedgerError
from aios_ledger.core.jsonvalue import loads_object
from aios_ledger.core.work import (
    evidence_run,
    evidence_session,
    failure_result,
    heartbeat_interval,
    next_poll_delay,
)
from aios_ledger.shell.clock import Clock
from aios_ledger.shell.runs.store import RunStore
from aios_ledger.shell.tasks.ledger import TaskLedger

MAX_STDOUT_BYTES = 4 * 1024 * 1024
MAX_STDERR_LINE = 4000
KILL_WAIT_SECONDS = 2.0
TICK_SECONDS = 0.05
LOG = logging.getLogger("aios_ledger.worker")
LEASE_LOST = frozenset({"LEASE_EXPIRED", "LEASE_INVALID", "INVALID_TRANSITION", "TASK_NOT_FOUND"})


@attrs.frozen
class WorkerConfig:
    agent_id: str
    capabilities: tuple[str, ...]
    command: str
    lease_seconds: int = 30
    timeout: float | None = None
    once: bool = False
    until_empty: bool = False
    max_tasks: int | None = None
    poll_min: float = 0.2
    poll_max: float = 5.0
    grace: float = 10.0


@attrs.frozen
class TaskOutcome:
    task_id: str
    attempt: int
    outcome: str  # submitted | failure-submitted | lease-lost | stopped | refused
    detail: str
    seconds: float


class Worker:
    def __init__(
        self,
        path: str | os.PathLike[str],
        config: WorkerConfig,
        *,
        clock: Clock | None = None,
        migrate: bool = True,
        synchronous: str = "FULL",
    ) -> None:
        self.config = config
        self.ledger = TaskLedger(path, clock=clock, migrate=migrate, synchronous=synchronous)
        self.runs = RunStore(path, migrate=migrate)
        self._stop = threading.Event()
        self.outcomes: list[TaskOutcome] = []

    def close(self) -> None:
        self.ledger.close()
        self.runs.close()

    def log(self, message: str, *, level: int = logging.INFO, **fields: object) -> None:
        """A record of the `aios_ledger.worker` logger; `fields` go along as structured extras
        (the JSON log format shows them)."""
        agent_id = self.config.agent_id
        LOG.log(level, f"worker {agent_id}: {message}", extra={"agent_id": agent_id, **fields})

    def request_stop(self) -> None:
        self._stop.set()

    def install_signal_handlers(self) -> None:
        def stop(signum: int, _frame: object) -> None:
            self.log(f"{signal.Signals(signum).name}, stopping")
            self.request_stop()

        signal.signal(signal.SIGTERM, stop)
        signal.signal(signal.SIGINT, stop)

    def run(self) -> int:
        """Claim and work until stopped, `--once`, or `--max-tasks`; 0 on a clean stop."""
        delay = self.config.poll_min
        handled = 0
        while not self._stop.is_set():
            if self.config.max_tasks is not None and handled >= self.config.max_tasks:
                break
            claim = self._claim()
            if claim is None:
                if self.config.once or self.config.until_empty:
                    break
                self._stop.wait(delay)
                delay = next_poll_delay(
                    delay, minimum=self.config.poll_min, maximum=self.config.poll_max
                )
                continue
            delay = self.config.poll_min
            self.outcomes.append(self._work(claim))
            handled += 1
            if self.config.once:
                break
        return 0

    def _claim(self) -> ClaimAnswer | None:
        try:
            # The claim itself takes over the leases of dead workers.
            return self.ledger.claim(
                agent_id=self.config.agent_id,
                capabilities=self.config.capabilities,
                lease_seconds=self.config.lease_seconds,
            )
        except LedgerError as refused:
            self.log(f"claim refused: {refused}", level=logging.WARNING, code=refused.code)
            return None

    def _work(self, claim: ClaimAnswer) -> TaskOutcome:
        started = time.monotonic()
        task_id, attempt = str(claim["task_id"]), int(claim["attempt"])
        run_id = evidence_run(task_id, attempt)
        self.runs.create_run(evidence_session(task_id), f"attempt {attempt}", run_id=run_id)
        self.log(f"task {task_id} attempt {attempt}: started", task_id=task_id, attempt=attempt)
        execution = _Execution(self, claim, run_id)
        outcome, detail = execution.run()
        result = execution.result
        if result is not None:
            outcome, detail = self._submit(claim, run_id, result, outcome, detail)
        seconds = time.monotonic() - started
        self.log(
            f"task {task_id} attempt {attempt}: {outcome} ({detail}) in {seconds:.1f}s",
            task_id=task_id,
            attempt=attempt,
            outcome=outcome,
            seconds=round(seconds, 3),
        )
        return TaskOutcome(task_id, attempt, outcome, detail, seconds)

    def _submit(
        self,
        claim: ClaimAnswer,
        run_id: str,
        result: dict[str, Any],
        outcome: str,
        detail: str,
        *,
        key_suffix: str = "",
    ) -> tuple[str, str]:
        task_id, token = str(claim["task_id"]), str(claim["lease_token"])
        key = f"submit:{task_id}:{claim['attempt']}{key_suffix}"
        try:
            self.ledger.submit_result(
                task_id, lease_token=token, result=result, idempotency_key=key
            )
            return outcome, detail
        except LedgerError as refused:
            if refused.code in LEASE_LOST:
                return "lease-lost", refused.code
            if outcome != "submitted":
                return "refused", str(refused)
            # The command's own result broke the task's contract: record why, submit a failure.
            self._evidence(run_id, "result_refused", {"error": str(refused)[:MAX_STDERR_LINE]})
            failure = failure_result(claim, kind="result_refused", detail=str(refused))
            return self._submit(
                claim, run_id, failure, "failure-submitted", refused.code, key_suffix=":refused"
            )

    def _evidence(self, run_id: str, kind: str, payload: dict[str, Any]) -> None:
        try:
            self.runs.append_event(run_id, kind, payload)
        except LedgerError as refused:
            self.log(f"evidence not recorded: {refused}", level=logging.WARNING, run_id=run_id)


class _Execution:
    """One run of the command for one claim, with its heartbeats, timeout and stop handling."""

    def __init__(self, worker: Worker, claim: ClaimAnswer, run_id: str) -> None:
        self.worker = worker
        self.claim = claim
        self.run_id = run_id
        self.result: dict[str, Any] | None = None
        self._lines: queue.Queue[str] = queue.Queue()
        self._stdout = bytearray()

    def run(self) -> tuple[str, str]:
        config = self.worker.config
        envelope = self.claim.get("envelope") or {}
        env = {
            **os.environ,
            "AIOS_TASK_ID": str(self.claim["task_id"]),
            "AIOS_ATTEMPT": str(self.claim["attempt"]),
            "AIOS_EXECUTION_DIGEST": str(envelope.get("execution_digest", "")),
        }
        stdin = {k: v for k, v in self.claim.items() if k != "lease_token"}
        try:
            process = subprocess.Popen(
                ["/bin/sh", "-c", config.command],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                env=env,
                start_new_session=True,
            )
        except OSError as exc:
            return self._fail("spawn_failed", str(exc))
        readers = [
            threading.Thread(target=self._feed, args=(process.stdin, stdin), daemon=True),
            threading.Thread(target=self._read_stdout, args=(process.stdout,), daemon=True),
            threading.Thread(target=self._read_stderr, args=(process.stderr,), daemon=True),
        ]
        for reader in readers:
            reader.start()
        ended = self._supervise(process)
        for reader in readers:
            reader.join(timeout=KILL_WAIT_SECONDS)
        self._flush_evidence()
        self.worker._evidence(self.run_id, "exit", {"returncode": process.returncode})
        if ended is not None:
            return ended
        if process.returncode != 0:
            return self._fail("exit_status", f"exit status {process.returncode}")
        try:
            self.result = loads_object(bytes(self._stdout), what="stdout")
        except LedgerError as refused:
            return self._fail("invalid_output", refused.code)
        return "submitted", "result submitted"

    def _supervise(self, process: subprocess.Popen[bytes]) -> tuple[str, str] | None:
        """Wait for the command; heartbeat, enforce the timeout and the stop's grace period."""
        config = self.worker.config
        started = time.monotonic()
        beat_every = heartbeat_interval(config.lease_seconds)
        next_beat = started + beat_every
        grace_until: float | None = None
        while process.poll() is None:
            self._flush_evidence()
            now = time.monotonic()
            if config.timeout is not None and now - started >= config.timeout:
                _kill(process)
                return self._fail("timeout", f"no answer within {config.timeout:g}s")
            if now >= next_beat:
                next_beat = now + beat_every
                lost = self._heartbeat()
                if lost is not None:
                    _kill(process)
                    return "lease-lost", lost
            if self.worker._stop.is_set() and grace_until is None:
                grace_until = now + config.grace
            if grace_until is not None and now >= grace_until:
                _kill(process)
                return "stopped", f"still running after the {config.grace:g}s grace period"
            with contextlib.suppress(subprocess.TimeoutExpired):
                process.wait(timeout=TICK_SECONDS)
        return None

    def _heartbeat(self) -> str | None:
        try:
            self.worker.ledger.heartbeat(
                str(self.claim["task_id"]),
                lease_token=str(self.claim["lease_token"]),
                lease_seconds=self.worker.config.lease_seconds,
            )
            return None
        except LedgerError as refused:
            if refused.code in LEASE_LOST:
                return refused.code
            self.worker.log(
                f"heartbeat failed: {refused}",
                level=logging.WARNING,
                task_id=str(self.claim["task_id"]),
                code=refused.code,
            )
            return None

    def _fail(self, kind: str, detail: str) -> tuple[str, str]:
        self.result = failure_result(self.claim, kind=kind, detail=detail)
        return "failure-submitted", kind

    def _feed(self, pipe: IO[bytes] | None, value: Any) -> None:
        if pipe is None:
            return
        try:
            pipe.write(json.dumps(value, sort_keys=True).encode())
            pipe.close()
        except OSError:
            pass  # the command exited without reading its input; its exit status tells why

    def _read_stdout(self, pipe: IO[bytes] | None) -> None:
        if pipe is None:
            return
        for chunk in iter(lambda: pipe.read(65536), b""):
            room = MAX_STDOUT_BYTES + 1 - len(self._stdout)
            if room > 0:
                self._stdout += chunk[:room]

    def _read_stderr(self, pipe: IO[bytes] | None) -> None:
        if pipe is None:
            return
        for raw in iter(pipe.readline, b""):
            self._lines.put(raw.decode("utf-8", "replace").rstrip("\n")[:MAX_STDERR_LINE])

    def _flush_evidence(self) -> None:
        while True:
            try:
                line = self._lines.get_nowait()
            except queue.Empty:
                return
            self.worker._evidence(self.run_id, "stderr", {"line": line})


def _kill(process: subprocess.Popen[bytes]) -> None:
    """Stop the command and everything it started (it leads its own process group)."""
    for sig in (signal.SIGTERM, signal.SIGKILL):
        try:
            os.killpg(process.pid, sig)
        except ProcessLookupError:
            return
        try:
            process.wait(timeout=KILL_WAIT_SECONDS)
            return
        except subprocess.TimeoutExpired:
            continue
