"""A real `aios-ledger serve` in a subprocess on a free loopback port, its tokens, and clients.

`LiveServer.start(path)` initialises a ledger (a file, or a PostgreSQL URL with `log=` the file
the server's output goes to), issues one token per role (and a second agent),
starts the server and waits until `/v1/health` answers. Every test talks to it over real HTTP
with httpx. Tests that create tasks give them a capability of their own (`Scenario.cap`), so
that a claim in one test never takes another test's task.
"""

from __future__ import annotations

import os
import secrets
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
from aios_ledger.shell import AUTHORIZATION_ENV, Database
from aios_ledger.shell.api.tokens import issue_token
from legacy_fixtures import OWNER

ROLE_NAMES = {
    "agent": "agent-1",
    "reviewer": "reviewer-1",
    "owner": "owner-1",
    "auditor": "auditor-1",
}
SECOND_AGENT = "agent-2"
STARTUP_SECONDS = 30.0


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


class LiveServer:
    def __init__(
        self, path: Path, process: subprocess.Popen[bytes], url: str, log: Path | None = None
    ) -> None:
        self.path = path
        self.log_path = log if log is not None else path.with_suffix(".serve.log")
        self.process = process
        self.url = url
        self.tokens: dict[str, str] = {}
        self._clients: list[httpx.Client] = []

    @classmethod
    def start(
        cls, path: Path, *extra: str, tokens: bool = True, log: Path | None = None
    ) -> LiveServer:
        subprocess.run(
            [sys.executable, "-m", "aios_ledger.shell.cli", "--db", str(path), "init"],
            check=True,
            capture_output=True,
        )
        issued: dict[str, str] = {}
        if tokens:
            with Database(path) as db:
                for role, name in ROLE_NAMES.items():
                    issued[role] = issue_token(db, name, [role])["token"]
                issued[SECOND_AGENT] = issue_token(db, SECOND_AGENT, ["agent"])["token"]
        server = cls.launch(path, *extra, log=log)
        server.tokens = issued
        return server

    @classmethod
    def launch(cls, path: Path, *extra: str, log: Path | None = None) -> LiveServer:
        port = free_port()
        env = {**os.environ, AUTHORIZATION_ENV: OWNER}
        log_path = log if log is not None else path.with_suffix(".serve.log")
        out = open(log_path, "ab")  # noqa: SIM115 (kept for the process)
        process = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "aios_ledger.shell.cli",
                "--db",
                str(path),
                "serve",
                "--listen",
                f"127.0.0.1:{port}",
                *extra,
            ],
            env=env,
            stdout=out,
            stderr=out,
            start_new_session=True,
        )
        out.close()
        server = cls(path, process, f"http://127.0.0.1:{port}", log_path)
        server.wait_ready()
        return server

    def wait_ready(self) -> None:
        deadline = time.monotonic() + STARTUP_SECONDS
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"the server exited: {self.log()}")
            try:
                if httpx.get(self.url + "/v1/health", timeout=1.0).status_code == 200:
                    return
            except httpx.TransportError:
                time.sleep(0.05)
        self.stop()
        raise RuntimeError(f"the server did not start: {self.log()}")

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    def client(self, who: str | None = None, *, token: str | None = None) -> httpx.Client:
        """A client with the token of a role (or of `agent-2`), of `token`, or none."""
        headers = {}
        bearer = token if token is not None else (None if who is None else self.tokens[who])
        if bearer is not None:
            headers["Authorization"] = f"Bearer {bearer}"
        client = httpx.Client(base_url=self.url, headers=headers, timeout=90.0)
        self._clients.append(client)
        return client

    def stop(self) -> None:
        for client in self._clients:
            client.close()
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()


def serve(path: Path, *extra: str) -> Iterator[LiveServer]:
    server = LiveServer.start(path, *extra)
    try:
        yield server
    finally:
        server.stop()


class Scenario:
    """Tasks in the states a route needs, each with a capability no other test offers."""

    def __init__(self, server: LiveServer) -> None:
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
