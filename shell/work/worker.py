"""`aios-ledger worker`: claims tasks and runs a command for each, under the task's lease.

The command gets the claim as JSON on stdin; its stderr becomes evidence and its stdout's JSON
object the result, and a command that fails still submits a failure result saying why, so a
reviewer always has something to judge (docs/worker.md). Each command runs in its own thread
and process group, under a guard (`guard.py`) that takes it down with a killed worker.
"""

from __future__ import annotations

import collections
import contextlib
import contextvars
import json
import logging
import os
import queue
import shutil
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import IO, Any, Literal, ParamSpec, Protocol, TypeVar

import attrs
from aios_ledger.core import ClaimAnswer, LedgerError
from aios_ledger.core.git import ProposalAnswer
from aios_ledger.core.jsonvalue import loads_object
from aios_ledger.core.runs import RunEventRow
from aios_ledger.core.tasks.attempts import evidence_run
from aios_ledger.core.work import (
    STDERR_TAIL_LINES,
    FailureEvidence,
    IdleReason,
    exec_program,
    failure_result,
    heartbeat_interval,
    next_poll_delay,
)
from aios_ledger.shell.cli_support import UsageError
from aios_ledger.shell.clock import Clock
from aios_ledger.shell.git.workspace import SOURCE_CAPTURE_CAPABILITY, GitWorkspaces, Workspace
from aios_ledger.shell.runs.store import RunStore
from aios_ledger.shell.tasks.ledger import TaskLedger
from aios_ledger.shell.tasks.surface import TaskSurface
from aios_ledger.shell.tracing import AgentRun, attempt_span, child_span
from aios_ledger.shell.work.guard import guarded

MAX_STDOUT_BYTES = 4 * 1024 * 1024
MAX_STDERR_LINE = 4000
KILL_WAIT_SECONDS = 2.0
TICK_SECONDS = 0.05
# The signal handler only sets a flag, so the claiming loop never sleeps longer than this.
STOP_POLL_SECONDS = 0.1
LOG = logging.getLogger("aios_ledger.worker")
LEASE_LOST = frozenset({"LEASE_EXPIRED", "LEASE_INVALID", "INVALID_TRANSITION", "TASK_NOT_FOUND"})
# Refusals of the worker itself, not of a task: waiting would not change them.
IDENTITY_REFUSED = frozenset(
    {"UNAUTHENTICATED", "FORBIDDEN", "AGENT_MISMATCH", "CAPABILITY_NOT_GRANTED"}
)

P = ParamSpec("P")
T = TypeVar("T")
# Why the worker ended a command before it exited by itself.
Ending = tuple[Literal["timeout", "wall-time", "lease-lost", "stopped"], str]
FAILURE_OF_ENDING = {"timeout": "timeout", "wall-time": "wall_time_exceeded"}


def require_exec_program(command: str, option: str = "--exec") -> None:
    """Refuse at start-up a command whose program cannot run, instead of failing every task."""
    program = exec_program(command)
    if program is None:
        return
    if "/" not in program:
        if shutil.which(program) is None:
            path = os.environ.get("PATH", "")
            raise UsageError(
                "EXEC_NOT_FOUND",
                f"{option} runs {program!r}, which is not on PATH ({path[:300]}): "
                "install it, give its full path, or fix the command",
            )
        return
    if not os.path.isfile(program):
        raise UsageError("EXEC_NOT_FOUND", f"{option} runs {program!r}, which does not exist")
    if not os.access(program, os.X_OK):
        raise UsageError(
            "EXEC_NOT_EXECUTABLE",
            f"{option} runs {program!r}, which is not executable: chmod +x it, "
            "or run it through its interpreter",
        )


class WorkRuns(Protocol):
    """The evidence writes a worker makes: RunStore's, and LedgerClient's."""

    def append_event(
        self, run_id: str, kind: str, payload: Any = None, *, lease_token: str | None = None
    ) -> RunEventRow: ...


class WorkRepositories(Protocol):
    """The worker's governed-repository hooks (`GitWorkspaces` on the ledger's host,
    `RemoteWorkspaces` over the API)."""

    def prepare(self, claim: Mapping[str, Any], agent_id: str) -> Workspace | None: ...

    def propose(self, workspace: Workspace, claim: Mapping[str, Any]) -> ProposalAnswer | None: ...

    def source_capture(self, claim: Mapping[str, Any]) -> dict[str, Any] | None: ...


class NoWorkspaces:
    """The hooks of a worker that reaches no governed repository: every claim runs its command
    without a workspace."""

    def prepare(self, claim: Mapping[str, Any], agent_id: str) -> Workspace | None:
        return None

    def propose(self, workspace: Workspace, claim: Mapping[str, Any]) -> ProposalAnswer | None:
        return None

    def source_capture(self, claim: Mapping[str, Any]) -> dict[str, Any] | None:
        return None


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
    concurrency: int = 1


@attrs.frozen
class TaskOutcome:
    task_id: str
    attempt: int
    outcome: str  # submitted | failure-submitted | lease-lost | released | refused
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
        ledger = TaskLedger(path, clock=clock, migrate=migrate, synchronous=synchronous)
        runs = RunStore(path, clock=clock, migrate=migrate)
        capture = SOURCE_CAPTURE_CAPABILITY in config.capabilities
        workspaces = GitWorkspaces(path, migrate=migrate, capture_unprojected=capture)
        # The executions' threads share these two connections, one call at a time.
        closers = (ledger.close, runs.close)
        idle = ledger.idle_reason
        self._attach(
            config, ledger, runs, workspaces, closers=closers, serial=True, explain_idle=idle
        )

    @classmethod
    def over(
        cls,
        ledger: TaskSurface,
        runs: WorkRuns,
        config: WorkerConfig,
        *,
        workspaces: WorkRepositories | None = None,
        close: Callable[[], None] | None = None,
        explain_idle: Callable[[Sequence[str]], IdleReason] | None = None,
    ) -> Worker:
        """A worker over another backend (a `LedgerClient` serves as both), which takes
        concurrent calls, so they are not serialised."""
        worker = cls.__new__(cls)
        closers = () if close is None else (close,)
        repositories = workspaces or NoWorkspaces()
        worker._attach(
            config, ledger, runs, repositories, closers=closers, explain_idle=explain_idle
        )
        return worker

    def _attach(
        self,
        config: WorkerConfig,
        ledger: TaskSurface,
        runs: WorkRuns,
        workspaces: WorkRepositories,
        *,
        closers: tuple[Callable[[], None], ...],
        serial: bool = False,
        explain_idle: Callable[[Sequence[str]], IdleReason] | None = None,
    ) -> None:
        self.config = config
        self._explain_idle = explain_idle
        # Why the last claim found nothing (None: it found something, or no reason is read).
        self.idle: IdleReason | None = None
        self.ledger = ledger
        self.runs = runs
        self.workspaces = workspaces
        self._closers = closers
        self._serial: threading.Lock | contextlib.nullcontext[None] = (
            threading.Lock() if serial else contextlib.nullcontext()
        )
        # Plain flags, not Events: the signal handler sets them, and must take no lock the thread
        # it interrupted may hold. `hurried`: a second stop, running commands are killed now.
        self.stopping = False
        self.hurried = False
        self._slot_freed = threading.Event()
        self._crash: BaseException | None = None
        self.outcomes: list[TaskOutcome] = []

    def close(self) -> None:
        for close in self._closers:
            close()

    def log(self, message: str, *, level: int = logging.INFO, **fields: object) -> None:
        """`fields` go along as structured extras, which the JSON log format shows."""
        agent_id = self.config.agent_id
        LOG.log(level, f"worker {agent_id}: {message}", extra={"agent_id": agent_id, **fields})

    def request_stop(self) -> None:
        """Stop claiming; running commands get the grace period."""
        self.stopping = True

    def install_signal_handlers(self) -> None:
        def stop(signum: int, _frame: object) -> None:
            # The flag before the log line: a second signal can run this handler again inside
            # the first one's logging, and must find the worker stopping already.
            if self.stopping:
                self.hurried = True
                self.log(f"{signal.Signals(signum).name} again, killing the running commands")
                return
            self.request_stop()
            self.log(f"{signal.Signals(signum).name}, stopping (again to kill the commands now)")

        signal.signal(signal.SIGTERM, stop)
        signal.signal(signal.SIGINT, stop)

    def serialised(self, call: Callable[P, T], *args: P.args, **kwargs: P.kwargs) -> T:
        """On a ledger file, calls from the executions' threads take turns."""
        with self._serial:
            return call(*args, **kwargs)

    def run(self) -> int:
        """Claim and work until stopped or done, with up to `concurrency` commands at once. An
        execution that crashes stops the others, then its exception is raised here."""
        executions: list[threading.Thread] = []
        delay = self.config.poll_min
        bound = 1 if self.config.once else self.config.max_tasks
        started = 0
        try:
            while not self.stopping:
                self._slot_freed.clear()
                executions = [thread for thread in executions if thread.is_alive()]
                # How many more tasks this worker may start; None: no bound.
                budget = None if bound is None else bound - started
                if budget == 0:
                    break
                free = self.config.concurrency - len(executions)
                if free == 0:
                    self._slot_freed.wait(STOP_POLL_SECONDS)
                    continue
                claims = self._claim(free if budget is None else min(free, budget))
                executions.extend(self._start(claim) for claim in claims)
                started += len(claims)
                if claims:
                    delay = self.config.poll_min
                    self.idle = None
                    continue
                if not executions:
                    self._note_idle()
                if not executions and (self.config.once or self.config.until_empty):
                    break
                self._idle(delay)
                delay = next_poll_delay(
                    delay, minimum=self.config.poll_min, maximum=self.config.poll_max
                )
        except BaseException:
            self.request_stop()  # e.g. KeyboardInterrupt without the signal handlers
            raise
        finally:
            for thread in executions:
                # In slices: a join without a timeout would hold off a second Ctrl-C's handler.
                while thread.is_alive():
                    thread.join(STOP_POLL_SECONDS)
        if self._crash is not None:
            raise self._crash
        return 0

    def _note_idle(self) -> None:
        """Log why nothing was claimable, when it is not what was logged last."""
        if self._explain_idle is None:
            return
        try:
            reason = self.serialised(self._explain_idle, self.config.capabilities)
        except LedgerError as refused:
            self.log(f"idle reason not read: {refused}", level=logging.DEBUG)
            return
        if reason != self.idle:
            self.log(f"nothing to claim: {reason.text()}", idle=reason.public())
        self.idle = reason

    def _idle(self, seconds: float) -> None:
        """Wait up to `seconds`, less when a stop comes or a running command ends."""
        until = time.monotonic() + seconds
        while not self.stopping:
            left = until - time.monotonic()
            if left <= 0 or self._slot_freed.wait(min(left, STOP_POLL_SECONDS)):
                return

    def _claim(self, count: int) -> list[ClaimAnswer]:
        try:
            return self.serialised(
                self.ledger.claim_many,
                agent_id=self.config.agent_id,
                capabilities=self.config.capabilities,
                lease_seconds=self.config.lease_seconds,
                limit=count,
            )
        except LedgerError as refused:
            if refused.code in IDENTITY_REFUSED:
                raise
            # Only a long-running worker waits for a backend that does not answer.
            finite = self.config.once or self.config.until_empty
            if refused.code == "API_UNAVAILABLE" and finite:
                raise
            self.log(f"claim refused: {refused}", level=logging.WARNING, code=refused.code)
            return []

    def _start(self, claim: ClaimAnswer) -> threading.Thread:
        # In the starting thread's context: the task's writes name the worker's actor.
        thread = threading.Thread(
            target=contextvars.copy_context().run,
            args=(self._execute, claim),
            name=f"task {claim['task_id']}",
        )
        thread.start()
        return thread

    def _execute(self, claim: ClaimAnswer) -> None:
        try:
            self.outcomes.append(self._work(claim))
        except BaseException as crash:
            if self._crash is None:
                self._crash = crash
            self.request_stop()
        finally:
            self._slot_freed.set()

    def _work(self, claim: ClaimAnswer) -> TaskOutcome:
        started = time.monotonic()
        execution = _Execution(self, claim)
        task_id, attempt = execution.task_id, execution.attempt
        self.log(f"task {task_id} attempt {attempt}: started", task_id=task_id, attempt=attempt)
        with attempt_span(
            "process task",
            task_id,
            attempt,
            kind="CONSUMER",
            attributes={"aios.agent.id": self.config.agent_id},
        ) as span:
            outcome, detail = execution.run()
            if span is not None:
                span.set_attribute("aios.worker.outcome", outcome)
        seconds = time.monotonic() - started
        self.log(
            f"task {task_id} attempt {attempt}: {outcome} ({detail}) in {seconds:.1f}s",
            task_id=task_id,
            attempt=attempt,
            outcome=outcome,
            seconds=round(seconds, 3),
        )
        return TaskOutcome(task_id, attempt, outcome, detail, seconds)

    def evidence(self, claim: ClaimAnswer, kind: str, payload: dict[str, Any]) -> None:
        """One event in the evidence run the claim created, under the claim's lease."""
        run_id = evidence_run(str(claim["task_id"]), int(claim["attempt"]))
        try:
            self.serialised(
                self.runs.append_event, run_id, kind, payload, lease_token=str(claim["lease_token"])
            )
        except LedgerError as refused:
            self.log(f"evidence not recorded: {refused}", level=logging.WARNING, run_id=run_id)


class _Execution:
    """One run of the command for one claim, with its heartbeats, timeout and stop handling."""

    def __init__(self, worker: Worker, claim: ClaimAnswer) -> None:
        self.worker = worker
        self.claim = claim
        self.task_id = str(claim["task_id"])
        self.attempt = int(claim["attempt"])
        self._lines: queue.Queue[str] = queue.Queue()
        self._stderr_tail: collections.deque[str] = collections.deque(maxlen=STDERR_TAIL_LINES)
        self._stdout = bytearray()
        self._exit_status: int | None = None
        self._workspace: Workspace | None = None
        # The files of the proposal recorded for this attempt: a result must state them.
        self._proposed_files: tuple[str, ...] = ()

    def run(self) -> tuple[str, str]:
        if self.worker.stopping:
            return self._release("the worker stopped before the command started")
        lost: list[str] = []
        captured: dict[str, Any] | None = None
        try:
            # A remote worker may take a while to download the base.
            with self._keeping_lease(lost):
                captured = self.worker.workspaces.source_capture(self.claim)
                if captured is None:
                    self._workspace = self.worker.workspaces.prepare(
                        self.claim, self.worker.config.agent_id
                    )
        except LedgerError as refused:
            if lost:
                return "lease-lost", lost[0]
            return self._fail("workspace_failed", str(refused))
        try:
            if lost:
                return "lease-lost", lost[0]
            if captured is not None:  # executed by the worker itself, not by the command
                # The recovery projection asks for a heartbeat between claim and submit.
                code = self._heartbeat()
                if code is not None:
                    return "lease-lost", code
                return self._submit(captured, "submitted", "source captured")
            return self._run_command()
        finally:
            if self._workspace is not None:
                self._workspace.remove()

    @contextlib.contextmanager
    def _keeping_lease(self, lost: list[str]) -> Iterator[None]:
        """Heartbeat the lease while the worker's own git work runs; a lost lease's code is
        appended to `lost`."""
        done = threading.Event()
        every = heartbeat_interval(self.worker.config.lease_seconds)

        def beat() -> None:
            while not done.wait(every):
                code = self._heartbeat()
                if code is not None:
                    lost.append(code)
                    return

        thread = threading.Thread(
            target=contextvars.copy_context().run,
            args=(beat,),
            name=f"lease {self.task_id}",
            daemon=True,
        )
        thread.start()
        try:
            yield
        finally:
            done.set()
            thread.join()

    def _run_command(self) -> tuple[str, str]:
        envelope = self.claim.get("envelope") or {}
        agent = AgentRun.start(self.worker.config.agent_id)
        env = {
            **os.environ,
            "AIOS_TASK_ID": self.task_id,
            "AIOS_ATTEMPT": str(self.attempt),
            "AIOS_EXECUTION_DIGEST": str(envelope.get("execution_digest", "")),
            **(self._workspace.environment() if self._workspace is not None else {}),
            **agent.environment(),
        }
        stdin = {k: v for k, v in self.claim.items() if k != "lease_token"}
        try:
            process = subprocess.Popen(
                guarded(["/bin/sh", "-c", self.worker.config.command], parent=os.getpid()),
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                env=env,
                cwd=self._workspace.path if self._workspace is not None else None,
                start_new_session=True,
            )
        except OSError as exc:
            agent.end(None, ended_by=None, output=b"")
            return self._fail("spawn_failed", str(exc))
        assert process.stdin and process.stdout and process.stderr  # all three are pipes
        readers = [
            threading.Thread(target=self._feed, args=(process.stdin, stdin), daemon=True),
            threading.Thread(target=self._read_stdout, args=(process.stdout,), daemon=True),
            threading.Thread(target=self._read_stderr, args=(process.stderr,), daemon=True),
        ]
        for reader in readers:
            reader.start()
        ending = self._supervise(process)
        for reader in readers:
            reader.join(timeout=KILL_WAIT_SECONDS)
        self._flush_evidence()
        self._exit_status = process.returncode
        agent.end(
            process.returncode,
            ended_by=None if ending is None else ending[0],
            output=bytes(self._stdout),
        )
        self.worker.evidence(self.claim, "exit", {"returncode": process.returncode})
        if ending is not None:
            why, detail = ending
            if why == "stopped":
                return self._release(detail)
            if why == "lease-lost":
                return why, detail
            return self._fail(FAILURE_OF_ENDING[why], detail)
        if process.returncode != 0:
            return self._fail("exit_status", f"exit status {process.returncode}")
        try:
            result = loads_object(bytes(self._stdout), what="stdout")
        except LedgerError as refused:
            return self._fail("invalid_output", refused.code)
        # What the agent spent goes beside its result: a result contract has no field for it.
        usage = result.pop("usage", None)
        self._propose()
        return self._submit(result, "submitted", "result submitted", usage=usage)

    def _propose(self) -> None:
        """Record the agent's commits as the attempt's proposal, before its result; a refusal
        only becomes evidence."""
        if self._workspace is None:
            return
        try:
            with self._keeping_lease([]), child_span("propose task"):
                proposal = self.worker.workspaces.propose(self._workspace, self.claim)
        except LedgerError as refused:
            self.worker.evidence(self.claim, "proposal_refused", {"code": refused.code})
            return
        if proposal is not None:
            self._proposed_files = tuple(proposal["changed_files"])
            shown = {
                "proposal_id": proposal["proposal_id"],
                "head_oid": proposal["head_oid"],
                "changed_files": proposal["changed_files"],
            }
            self.worker.evidence(self.claim, "proposal", shown)

    def _supervise(self, process: subprocess.Popen[bytes]) -> Ending | None:
        """Wait for the command, heartbeating and enforcing the limits; None when it exited by
        itself, and then what it left running is killed so it cannot outlive the task."""
        config = self.worker.config
        started = time.monotonic()
        beat_every = heartbeat_interval(config.lease_seconds)
        next_beat = started + beat_every
        grace_until: float | None = None
        limit = _time_limit(config.timeout, self.claim)
        while process.poll() is None:
            self._flush_evidence()
            now = time.monotonic()
            if limit is not None and now - started >= limit[0]:
                _stop_group(process)
                return limit[1]
            if now >= next_beat:
                next_beat = now + beat_every
                lost = self._heartbeat()
                if lost is not None:
                    _stop_group(process)
                    return "lease-lost", lost
            if self.worker.hurried:
                _signal_group(process, signal.SIGKILL)
                with contextlib.suppress(subprocess.TimeoutExpired):
                    process.wait(timeout=KILL_WAIT_SECONDS)
                return "stopped", "the worker was stopped twice; the command was killed"
            if self.worker.stopping and grace_until is None:
                grace_until = now + config.grace
            if grace_until is not None and now >= grace_until:
                _stop_group(process)
                return "stopped", (
                    f"the worker stopped; the command still ran after the {config.grace:g}s "
                    "grace period"
                )
            with contextlib.suppress(subprocess.TimeoutExpired):
                process.wait(timeout=TICK_SECONDS)
        _signal_group(process, signal.SIGKILL)
        return None

    def _leased(self, call: Callable[..., object], **fields: Any) -> None:
        """`call` on the task under the claim's lease, taking its turn with the other threads."""
        lease_token = str(self.claim["lease_token"])
        self.worker.serialised(call, self.task_id, lease_token=lease_token, **fields)

    def _heartbeat(self) -> str | None:
        worker = self.worker
        try:
            self._leased(worker.ledger.heartbeat, lease_seconds=worker.config.lease_seconds)
            return None
        except LedgerError as refused:
            if refused.code in LEASE_LOST:
                return refused.code
            worker.log(
                f"heartbeat failed: {refused}",
                level=logging.WARNING,
                task_id=self.task_id,
                code=refused.code,
            )
            return None

    def _submit(
        self,
        result: dict[str, Any],
        outcome: str,
        detail: str,
        *,
        key_suffix: str = "",
        cause: str | None = None,
        usage: Any = None,
    ) -> tuple[str, str]:
        """A refused result becomes a failure result saying why, and a refused failure result
        (`cause` says what failed first) gives the task back."""
        worker = self.worker
        try:
            self._leased(
                worker.ledger.submit_result,
                result=result,
                idempotency_key=f"submit:{self.task_id}:{self.attempt}{key_suffix}",
                usage=usage,
            )
            return outcome, detail
        except LedgerError as refused:
            if refused.code in LEASE_LOST:
                return "lease-lost", refused.code
            if cause is None:
                worker.log(
                    f"task {self.task_id}: the result was refused: {refused}",
                    level=logging.WARNING,
                    task_id=self.task_id,
                    code=refused.code,
                )
                return self._fail("result_refused", str(refused), shown=refused.code)
            # Released now rather than left CLAIMED until its lease passes.
            return self._release(f"{cause} (the failure result was refused too: {refused})")

    def _fail(self, kind: str, detail: str, *, shown: str | None = None) -> tuple[str, str]:
        """Submit a failure result with the run's evidence; `shown` is the outcome's detail."""
        evidence = FailureEvidence.bounded(
            exit_status=self._exit_status,
            stderr_lines=tuple(self._stderr_tail),
            output=bytes(self._stdout),
        )
        payload = {"failure": kind, "detail": detail[:MAX_STDERR_LINE], **evidence.public()}
        self.worker.evidence(self.claim, "failure", payload)
        result = failure_result(
            self.claim,
            kind=kind,
            detail=detail,
            evidence=evidence,
            proposed_files=self._proposed_files,
        )
        suffix = ":refused" if kind == "result_refused" else ""
        return self._submit(
            result,
            "failure-submitted",
            shown or kind,
            key_suffix=suffix,
            cause=f"{kind}: {detail}"[:MAX_STDERR_LINE],
        )

    def _release(self, reason: str) -> tuple[str, str]:
        worker = self.worker
        worker.evidence(self.claim, "released", {"reason": reason})
        try:
            self._leased(worker.ledger.release, reason=reason)
            return "released", reason
        except LedgerError as refused:
            if refused.code in LEASE_LOST:
                return "lease-lost", refused.code
            return "refused", str(refused)

    def _feed(self, pipe: IO[bytes], value: Any) -> None:
        try:
            pipe.write(json.dumps(value, sort_keys=True).encode())
            pipe.close()
        except OSError:
            pass  # the command exited without reading its input; its exit status tells why

    def _read_stdout(self, pipe: IO[bytes]) -> None:
        for chunk in iter(lambda: pipe.read(65536), b""):
            room = MAX_STDOUT_BYTES + 1 - len(self._stdout)
            if room > 0:
                self._stdout += chunk[:room]

    def _read_stderr(self, pipe: IO[bytes]) -> None:
        for raw in iter(pipe.readline, b""):
            line = raw.decode("utf-8", "replace").rstrip("\n")[:MAX_STDERR_LINE]
            self._lines.put(line)
            self._stderr_tail.append(line)

    def _flush_evidence(self) -> None:
        while True:
            try:
                line = self._lines.get_nowait()
            except queue.Empty:
                return
            self.worker.evidence(self.claim, "stderr", {"line": line})


def _time_limit(timeout: float | None, claim: Mapping[str, Any]) -> tuple[float, Ending] | None:
    """When the command is stopped, and why: the worker's `timeout` or the task budget's wall
    limit, whichever comes first (a tie is the budget's, the limit the agent was held to)."""
    budget = claim.get("budget")
    wall = budget.get("wall_seconds") if isinstance(budget, Mapping) else None
    if (
        isinstance(wall, int)
        and not isinstance(wall, bool)
        and (timeout is None or wall <= timeout)
    ):
        return float(wall), ("wall-time", f"the task's budget allows {wall}s of wall time")
    if timeout is None:
        return None
    return timeout, ("timeout", f"no answer within {timeout:g}s")


def _signal_group(process: subprocess.Popen[bytes], sig: signal.Signals) -> None:
    """The group outlives its reaped guard while a member lives, so its id still reaches them."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(process.pid, sig)


def _stop_group(process: subprocess.Popen[bytes]) -> None:
    """SIGTERM to the command's group, then SIGKILL to whatever is left."""
    _signal_group(process, signal.SIGTERM)
    with contextlib.suppress(subprocess.TimeoutExpired):
        process.wait(timeout=KILL_WAIT_SECONDS)
    _signal_group(process, signal.SIGKILL)
    with contextlib.suppress(subprocess.TimeoutExpired):
        process.wait(timeout=KILL_WAIT_SECONDS)
