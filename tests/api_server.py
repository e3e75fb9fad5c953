"""A real `aios-ledger serve` on a loopback port, in a subprocess, for the client's tests.

`ApiServer(db)` starts the server on a free port and waits for `/v1/health`; `issue(name,
role...)` issues a token with the command line (the way an owner does); `kill()` SIGKILLs the
server and `start()` brings it back on the same port.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from types import TracebackType

import httpx

START_PATIENCE = 60.0  # seconds; a bound on waiting for the server, never a speed assertion


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def cli(*args: str, check: bool = True, env: dict[str, str] | None = None) -> str:
    answer = subprocess.run(
        [sys.executable, "-m", "aios_ledger.shell.cli", *args],
        capture_output=True,
        text=True,
        env=env,
    )
    if check:
        assert answer.returncode == 0, answer.stderr
    return answer.stdout


class ApiServer:
    def __init__(self, db: Path, *, port: int | None = None) -> None:
        self.db = db
        self.port = port or free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.process: subprocess.Popen[bytes] | None = None
        if not db.exists():
            cli("--db", str(db), "init")
        self.start()

    def start(self) -> None:
        self.process = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "aios_ledger.shell.cli",
                "--db",
                str(self.db),
                "--log-level",
                "WARNING",
                "serve",
                "--listen",
                f"127.0.0.1:{self.port}",
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        deadline = time.monotonic() + START_PATIENCE
        while True:
            assert self.process.poll() is None, "the server exited"
            try:
                if httpx.get(f"{self.url}/v1/health", timeout=1.0).status_code == 200:
                    return
            except httpx.TransportError:
                pass
            assert time.monotonic() < deadline, "the server did not come up"
            time.sleep(0.05)

    def kill(self) -> None:
        if self.process is not None and self.process.poll() is None:
            os.kill(self.process.pid, signal.SIGKILL)
            self.process.wait()

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.kill()

    def issue(self, name: str, *roles: str) -> str:
        flags = [part for role in roles for part in ("--role", role)]
        answer = json.loads(cli("--db", str(self.db), "token", "issue", name, *flags))
        return str(answer["token"])

    def token_file(self, directory: Path, name: str, *roles: str) -> Path:
        path = directory / f"{name}.token"
        path.write_text(self.issue(name, *roles) + "\n")
        path.chmod(0o600)
        return path

    def __enter__(self) -> ApiServer:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        value: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.stop()
