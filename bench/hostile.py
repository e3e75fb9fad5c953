"""What a hostile proposal costs the server before its refusal (issue 26, cheap checks first).

An agent holding nothing uploads the issue's bundle (one 4 MiB blob under 5 paths, a few KB
once packed) to a task it does not hold, under a lease that is not the task's, to a real
`aios-ledger serve` on loopback: once with the lease in the `Aios-Lease-Token` header (refused
before the body is read) and once with it in the body, as clients before the header sent it
(refused once the body is parsed, before the bundle is decoded). Each upload's time is taken
from its request to its answer, as the agent sees it; every answer must be 409 LEASE_INVALID
and the ledger's bundles folder must stay empty. Before these checks came first, the same
upload was scanned for 62.7 s before its refusal, and its bundle was kept.

    python -m bench.hostile [--uploads N] [--blob-mib M] [--paths P]

One JSON object on stdout: the bundle's size, and per mode the uploads' median, p99 and
largest time in milliseconds, beside the same figures of a plain authenticated read of the
task (`GET /v1/tasks/{task_id}`) on the same connection, the floor of any answer.
"""

from __future__ import annotations

import argparse
import base64
import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import httpx
from aios_ledger.shell import AUTHORIZATION_ENV, Database, TaskLedger
from aios_ledger.shell.api.tokens import issue_token
from aios_ledger.shell.git.proposals import proposals_dir
from aios_ledger.shell.git.workspace import LEASE_TOKEN_HEADER

from .harness import free_port, percentile

WRONG_LEASE = "x" * 43
START_PATIENCE = 60.0  # seconds for the server to come up


def _git(*args: str, cwd: Path) -> None:
    identity = {
        "GIT_AUTHOR_NAME": "bench",
        "GIT_AUTHOR_EMAIL": "bench@example.invalid",
        "GIT_COMMITTER_NAME": "bench",
        "GIT_COMMITTER_EMAIL": "bench@example.invalid",
    }
    subprocess.run(["git", *args], cwd=cwd, check=True, env={**os.environ, **identity})


def hostile_bundle(folder: Path, *, blob_bytes: int, paths: int) -> bytes:
    """One highly compressible blob under `paths` names: small on the wire, big to scan."""
    work = folder / "hostile-work"
    work.mkdir()
    _git("init", "--quiet", cwd=work)
    line = b"value = 'aaaaaaaaaaaaaaaa'\n"
    blob = line * (blob_bytes // len(line))
    for number in range(paths):
        (work / f"part-{number}.py").write_bytes(blob)
    _git("add", "--all", cwd=work)
    _git("commit", "--quiet", "-m", "hostile", cwd=work)
    out = folder / "hostile.bundle"
    _git("bundle", "create", "--quiet", str(out), "HEAD", cwd=work)
    return out.read_bytes()


def _serve(db: Path, port: int, log: Path) -> subprocess.Popen[bytes]:
    with log.open("ab") as out:
        command = [sys.executable, "-m", "aios_ledger.shell.cli", "--db", str(db), "serve"]
        server = subprocess.Popen(
            [*command, "--listen", f"127.0.0.1:{port}"],
            env={**os.environ, AUTHORIZATION_ENV: "owner-bench"},
            stdout=out,
            stderr=out,
        )
    deadline = time.monotonic() + START_PATIENCE
    while time.monotonic() < deadline:
        if server.poll() is not None:
            raise SystemExit(f"the server exited: {log.read_text()}")
        try:
            if httpx.get(f"http://127.0.0.1:{port}/v1/health", timeout=1.0).status_code == 200:
                return server
        except httpx.TransportError:
            pass
        time.sleep(0.05)
    server.kill()
    raise SystemExit("the server did not come up")


def _timed(client: httpx.Client, url: str, body: bytes, headers: dict[str, str]) -> float:
    started = time.perf_counter()
    answer = client.post(url, content=body, headers=headers)
    elapsed = (time.perf_counter() - started) * 1000
    if answer.status_code != 409 or answer.json().get("code") != "LEASE_INVALID":
        raise SystemExit(f"expected 409 LEASE_INVALID, got {answer.status_code}: {answer.text}")
    return elapsed


def _timed_read(client: httpx.Client, url: str) -> float:
    started = time.perf_counter()
    client.get(url).raise_for_status()
    return (time.perf_counter() - started) * 1000


def _figures(times: Sequence[float]) -> dict[str, float]:
    return {
        "median_ms": round(percentile(times, 0.5), 2),
        "p99_ms": round(percentile(times, 0.99), 2),
        "max_ms": round(max(times), 2),
    }


def measure(uploads: int, blob_bytes: int, paths: int) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="aios-bench-hostile-") as scratch:
        folder = Path(scratch)
        db = folder / "ledger.db"
        subprocess.run(
            [sys.executable, "-m", "aios_ledger.shell.cli", "--db", str(db), "init"],
            check=True,
            capture_output=True,
        )
        with Database(db) as opened:
            token = issue_token(opened, "intruder", ["agent"])["token"]
            bundles = proposals_dir(opened)
        ledger = TaskLedger(db)
        try:
            ledger.create_task(
                {"task_id": "victim", "goal": "g", "instructions": "i"},
                idempotency_key="create-victim",
            )
        finally:
            ledger.close()
        data = hostile_bundle(folder, blob_bytes=blob_bytes, paths=paths)
        encoded = base64.b64encode(data).decode()
        port = free_port()
        server = _serve(db, port, folder / "serve.log")
        try:
            with httpx.Client(
                base_url=f"http://127.0.0.1:{port}",
                headers={"Authorization": f"Bearer {token}", "Content-Type": "application/json"},
                timeout=120.0,
            ) as client:
                url = "/v1/tasks/victim/proposal"
                in_header = json.dumps({"bundle_base64": encoded}).encode()
                in_body = json.dumps({"lease_token": WRONG_LEASE, "bundle_base64": encoded})
                header_times = [
                    _timed(client, url, in_header, {LEASE_TOKEN_HEADER: WRONG_LEASE})
                    for _ in range(uploads)
                ]
                body_times = [_timed(client, url, in_body.encode(), {}) for _ in range(uploads)]
                read_times = [_timed_read(client, "/v1/tasks/victim") for _ in range(uploads)]
        finally:
            server.terminate()
            server.wait(timeout=30)
        left = sorted(str(path) for path in bundles.rglob("*")) if bundles.exists() else []
        if left:
            raise SystemExit(f"a refused upload left bundles behind: {left}")
        return {
            "benchmark": "hostile proposal, wrong lease, agent holding nothing",
            "bundle_bytes": len(data),
            "blob_bytes": blob_bytes,
            "paths": paths,
            "uploads": uploads,
            "lease_in_header": _figures(header_times),
            "lease_in_body": _figures(body_times),
            "baseline_task_read": _figures(read_times),
            "bundles_left": 0,
        }


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.hostile", description=__doc__)
    parser.add_argument("--uploads", type=int, default=50, help="uploads per mode")
    parser.add_argument("--blob-mib", type=int, default=4, help="the blob's size in MiB")
    parser.add_argument("--paths", type=int, default=5, help="names the blob goes under")
    args = parser.parse_args(argv)
    figures = measure(args.uploads, args.blob_mib * 1024 * 1024, args.paths)
    print(json.dumps(figures, indent=2))


if __name__ == "__main__":
    main()
