"""Test fixtures for `aios-ledger serve`: the same server in this process, or a real process.

`ApiServer(db, *serve_flags)` initialises the ledger if the file does not exist and serves it
on a loopback port (a free one, or `port=`) from a thread of this process: the server `serve`
builds from the same flags (`shell.serve.cli.configured_server`), uvicorn and its lifespan
included, so that tests keep their `httpx.Client(base_url=...)` and starting one costs no
interpreter; `clock=` is the server's clock. `ServeProcess(db, *serve_flags)` starts a real
`serve` instead, for tests whose subject is the process: `kill()` SIGKILLs it and `start()`
brings it back on the same port, `stop()` ends it with SIGTERM, `command_prefix` runs it under
another command, and its output goes to a file.

Both: tokens are issued with `issue(name, role..., capabilities=...)` through the command line
(the way an owner does; granted the capabilities listed, or any with `capabilities=None`),
`token_file(...)` writes one for `--token-file`; `role_tokens=True` issues one token per role
(and a second agent, both granted any capability, as each test offers capabilities of its own)
into `tokens`, and `client(role)` gives an httpx client carrying it. `log()` is what the server
logged, so that a test can show a token never reaches it: a process's output, or for a server
here every line this process's ledger and uvicorn loggers made while it ran (a superset).

`Scenario` puts tasks in the states a route needs, each with a capability no other test offers,
so that a claim in one test never takes another test's task on a shared server.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import secrets
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path
from types import TracebackType
from typing import Any, Self

import httpx
from aios_ledger.core.actors import the_ledger
from aios_ledger.shell import AUTHORIZATION_ENV, Database
from aios_ledger.shell.actors import acting_as
from aios_ledger.shell.api.tokens import issue_token
from aios_ledger.shell.cli import build_parser
from aios_ledger.shell.clock import Clock, system_clock
from aios_ledger.shell.logs import ROOT, TEXT_FORMAT
from aios_ledger.shell.serve.cli import configured_server
from cli_runner import run_cli
from legacy_fixtures import OWNER

START_PATIENCE = 60.0  # seconds; a bound on waiting for the server, never a speed assertion
ROLE_NAMES = {
    "agent": "agent-1",
    "reviewer": "reviewer-1",
    "owner": "owner-1",
    "auditor": "auditor-1",
    "witness": "witness-1",
}
SECOND_AGENT = "agent-2"


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def cli(*args: str, check: bool = True, env: dict[str, str] | None = None) -> str:
    answer = run_cli(*args, env=env)
    if check:
        assert answer.returncode == 0, answer.stderr
    return answer.stdout


class Served:
    """What both kinds of server share: the ledger, its tokens and clients."""

    def __init__(
        self, db: Path | str, serve_flags: Sequence[str], port: int | None, role_tokens: bool
    ) -> None:
        self.target = db
        self.serve_flags = tuple(serve_flags)
        self.port = port or free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.tokens: dict[str, str] = {}
        self._clients: list[httpx.Client] = []
        if not isinstance(db, Path) or not db.exists():
            cli("--db", str(db), "init")
        if role_tokens:
            with Database(db) as opened:
                for role, name in ROLE_NAMES.items():
                    issued = issue_token(opened, name, [role], any_capability=role == "agent")
                    self.tokens[role] = issued["token"]
                second = issue_token(opened, SECOND_AGENT, ["agent"], any_capability=True)
                self.tokens[SECOND_AGENT] = second["token"]

    @property
    def db(self) -> Path:
        """The ledger file (a server over a URL has none: its `target` is the URL)."""
        assert isinstance(self.target, Path), "this server runs over a URL"
        return self.target

    def serve_argv(self) -> list[str]:
        return [
            "--db",
            str(self.target),
            "serve",
            "--listen",
            f"127.0.0.1:{self.port}",
            *self.serve_flags,
        ]

    def stop(self) -> None:
        self.close_clients()

    def close_clients(self) -> None:
        """Closes every client `client()` gave, and so their connections to the server."""
        for client in self._clients:
            client.close()
        self._clients.clear()

    def issue(self, name: str, *roles: str, capabilities: Sequence[str] | None = ()) -> str:
        """A token issued with the command line, granted `capabilities` (None: any)."""
        flags = [part for role in roles for part in ("--role", role)]
        if capabilities is None:
            flags.append("--any-capability")
        else:
            flags.extend(part for granted in capabilities for part in ("--capability", granted))
        answer = json.loads(cli("--db", str(self.target), "token", "issue", name, *flags))
        return str(answer["token"])

    def token_file(
        self, directory: Path, name: str, *roles: str, capabilities: Sequence[str] | None = ()
    ) -> Path:
        path = directory / f"{name}.token"
        path.write_text(self.issue(name, *roles, capabilities=capabilities) + "\n")
        path.chmod(0o600)
        return path

    def client(self, who: str | None = None, *, token: str | None = None) -> httpx.Client:
        """A client with the token of a role (or of `agent-2`), of `token`, or none."""
        headers = {}
        bearer = token if token is not None else (None if who is None else self.tokens[who])
        if bearer is not None:
            headers["Authorization"] = f"Bearer {bearer}"
        client = httpx.Client(base_url=self.url, headers=headers, timeout=90.0)
        self._clients.append(client)
        return client

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        value: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.stop()


class _ServedHere:
    """What a real `serve` process has of its own, set in this process while at least one
    server runs here: serve's log level, the owner authorization in the environment, and a
    record of every line the ledger's and uvicorn's loggers make (a record factory rather
    than a handler: `run_cli` replaces the ledger logger's handlers at each call)."""

    def __init__(self) -> None:
        self.running: list[list[str]] = []  # each running server's lines
        self._format = logging.Formatter(TEXT_FORMAT)
        self._saved: tuple[Any, int, str | None] | None = None

    def enter(self, level: str, lines: list[str]) -> None:
        if not self.running:
            before = logging.getLogRecordFactory()
            self._saved = (before, ROOT.level, os.environ.get(AUTHORIZATION_ENV))

            def capture(*args: Any, **kwargs: Any) -> logging.LogRecord:
                record: logging.LogRecord = before(*args, **kwargs)
                if record.name.split(".")[0] in ("aios_ledger", "uvicorn"):
                    line = self._format.format(record)
                    for running in self.running:
                        running.append(line)
                return record

            logging.setLogRecordFactory(capture)
            ROOT.setLevel(level)
            os.environ[AUTHORIZATION_ENV] = OWNER
        self.running.append(lines)

    def leave(self, lines: list[str]) -> None:
        self.running = [running for running in self.running if running is not lines]
        if self.running or self._saved is None:
            return
        factory, level, authorization = self._saved
        logging.setLogRecordFactory(factory)
        ROOT.setLevel(level)
        if authorization is None:
            os.environ.pop(AUTHORIZATION_ENV, None)
        else:
            os.environ[AUTHORIZATION_ENV] = authorization


_SERVED_HERE = _ServedHere()


class HeldClock:
    """A server's clock: the system's until a test holds it, then moved only by the test, so
    that a lease expires when the test says and not when a loaded machine gets round to it."""

    def __init__(self) -> None:
        self.held: datetime | None = None

    def __call__(self) -> datetime:
        return datetime.now(UTC) if self.held is None else self.held

    def hold(self) -> None:
        self.held = datetime.now(UTC)

    def advance(self, seconds: float) -> None:
        assert self.held is not None, "hold the clock first"
        self.held += timedelta(seconds=seconds)

    def release(self) -> None:
        self.held = None


class ApiServer(Served):
    """`serve` in a thread of this process: the same app, uvicorn, lifespan and flags."""

    def __init__(
        self,
        db: Path | str,
        *serve_flags: str,
        port: int | None = None,
        role_tokens: bool = False,
        clock: Clock = system_clock,
    ) -> None:
        super().__init__(db, serve_flags, port, role_tokens)
        self.clock = clock
        self._lines: list[str] = []
        self._resources = contextlib.ExitStack()
        self._thread: threading.Thread | None = None
        self._failure: BaseException | None = None
        self.start()

    def start(self) -> None:
        argv = self.serve_argv()
        args = build_parser(argv).parse_args(argv)
        _SERVED_HERE.enter(args.log_level or args.default_log_level, self._lines)
        try:
            self.server, listener = self._resources.enter_context(
                configured_server(args, self.clock)
            )
        except BaseException:
            _SERVED_HERE.leave(self._lines)
            raise

        def serve() -> None:
            try:
                with acting_as(the_ledger("serve")):
                    self.server.run(sockets=[listener])
            except BaseException as failure:  # the test thread raises it
                self._failure = failure

        self._thread = threading.Thread(target=serve, name="api-server", daemon=True)
        self._thread.start()
        deadline = time.monotonic() + START_PATIENCE
        while not self.server.started:
            if not self._thread.is_alive() or time.monotonic() >= deadline:
                self.stop()
                raise AssertionError(f"the server did not come up: {self._failure!r}")
            time.sleep(0.01)

    @property
    def app(self) -> Any:
        """The Starlette app served (its `state` holds the backend and the console)."""
        return self.server.config.app

    def log(self) -> str:
        return "\n".join(self._lines)

    def stop(self) -> None:
        super().stop()
        if self._thread is None:
            return
        self.server.should_exit = True
        self._thread.join(timeout=START_PATIENCE)
        assert not self._thread.is_alive(), "the server did not stop"
        self._thread = None
        self._resources.close()
        _SERVED_HERE.leave(self._lines)
        if self._failure is not None:
            raise self._failure


class ServeProcess(Served):
    """A real `aios-ledger serve` process, for tests whose subject is the process."""

    def __init__(
        self,
        db: Path | str,
        *serve_flags: str,
        port: int | None = None,
        role_tokens: bool = False,
        log: Path | None = None,
        command_prefix: Sequence[str] = (),
    ) -> None:
        """`db` is a ledger file or a PostgreSQL URL; for a URL, `log` names the file the
        server's output goes to (a file ledger's goes beside it). `command_prefix` runs the
        server under another command (`setpriv ...`, as another user)."""
        if log is None:
            assert isinstance(db, Path), "a server over a URL needs log="
            log = db.with_suffix(".serve.log")
        self.log_path = log
        self.command_prefix = tuple(command_prefix)
        self.process: subprocess.Popen[bytes] | None = None
        super().__init__(db, serve_flags, port, role_tokens)
        self.start()

    def start(self) -> None:
        with self.log_path.open("ab") as log:
            self.process = subprocess.Popen(
                [
                    *self.command_prefix,
                    sys.executable,
                    "-m",
                    "aios_ledger.shell.cli",
                    *self.serve_argv(),
                ],
                env={**os.environ, AUTHORIZATION_ENV: OWNER},
                stdout=log,
                stderr=log,
                start_new_session=True,
            )
        deadline = time.monotonic() + START_PATIENCE
        while True:
            assert self.process.poll() is None, f"the server exited: {self.log()}"
            try:
                if httpx.get(f"{self.url}/v1/health", timeout=1.0).status_code == 200:
                    return
            except httpx.TransportError:
                pass
            if time.monotonic() >= deadline:
                self.kill()
                raise AssertionError(f"the server did not come up: {self.log()}")
            time.sleep(0.05)

    def log(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""

    def kill(self) -> None:
        if self.process is not None and self.process.poll() is None:
            os.kill(self.process.pid, signal.SIGKILL)
            self.process.wait()

    def stop(self) -> None:
        super().stop()
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.kill()


class Scenario:
    """Tasks in the states a route needs, each with a capability no other test offers."""

    def __init__(self, server: Served) -> None:
        self.server = server
        self.owner = server.client("owner")
        self.agent = server.client("agent")
        self.reviewer = server.client("reviewer")
        self.cap = "cap-" + secrets.token_hex(6)

    def key(self) -> str:
        return "k-" + secrets.token_hex(8)

    def queued(self, **task: Any) -> str:
        body = {
            "idempotency_key": self.key(),
            "task": {
                "goal": "g",
                "instructions": "i",
                "required_capabilities": [self.cap],
                **task,
            },
        }
        answer = self.owner.post("/v1/tasks", json=body)
        assert answer.status_code == 201, answer.text
        return str(answer.json()["task_id"])

    def claimed(self) -> tuple[str, str]:
        task_id = self.queued()
        answer = self.agent.post(
            "/v1/claims",
            json={"capabilities": [self.cap], "lease_seconds": 300, "task_id": task_id},
        )
        assert answer.status_code == 200, answer.text
        return task_id, str(answer.json()["lease_token"])

    def submitted(self) -> str:
        task_id, lease = self.claimed()
        answer = self.agent.post(
            f"/v1/tasks/{task_id}/result",
            json={"lease_token": lease, "result": {"ok": True}, "idempotency_key": self.key()},
        )
        assert answer.status_code == 200, answer.text
        return task_id

    def cancelled(self) -> str:
        task_id = self.queued()
        answer = self.owner.post(
            f"/v1/tasks/{task_id}/cancel", json={"reason": "r", "idempotency_key": self.key()}
        )
        assert answer.status_code == 200, answer.text
        return task_id

    def run(self) -> str:
        answer = self.agent.post("/v1/runs", json={"prompt": "p"})
        assert answer.status_code == 201, answer.text
        return str(answer.json()["run_id"])
