"""The projection unit's loop closed: with `AIOS_GOVERNED_WRITE_API_URL` set, `aios-ledger
project` reads the governed binding from the API (`GET /v1/bindings/…`) with the token of the
`agent_task_control_token` credential in `$CREDENTIALS_DIRECTORY`, and refuses with
`BINDING_UNAVAILABLE`, writing nothing, when the API is down or refuses the token.

The server serves one ledger (holding the binding); the projection writes another, which has
the task but no binding: a projection that succeeds got its binding over HTTP.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from aios_ledger.shell import AUTHORIZATION_ENV
from api_server import ApiServer, cli, free_port
from cli_runner import CliResult, run_cli
from legacy_fixtures import OWNER, TASK, binding, dump, legacy_database, projection_mapping


@pytest.fixture
def server(tmp_path: Path) -> Iterator[ApiServer]:
    served = legacy_database(tmp_path / "served.db")
    with ApiServer(served) as running:
        owner = running.issue("owner-1", "owner")
        bound = binding().public()
        put = httpx.put(
            f"{running.url}/v1/bindings/{bound['task_id']}/{bound['job_id']}",
            json=bound,
            headers={"Authorization": f"Bearer {owner}"},
        )
        assert put.status_code == 200, put.text
        yield running


def credentials(directory: Path, token: str) -> Path:
    directory.mkdir(mode=0o700)
    (directory / "agent_task_control_token").write_text(token + "\n")
    return directory


def project(db: Path, request: Path, url: str, credential_dir: Path | None) -> CliResult:
    env = {**os.environ, AUTHORIZATION_ENV: OWNER, "AIOS_GOVERNED_WRITE_API_URL": url}
    env.pop("CREDENTIALS_DIRECTORY", None)
    if credential_dir is not None:
        env["CREDENTIALS_DIRECTORY"] = str(credential_dir)
    return run_cli("--db", db, "project", TASK, "--request", request, env=env)


@pytest.fixture
def projected_db(tmp_path: Path) -> Path:
    """The unit's ledger: the task, and no binding of its own."""
    db = legacy_database(tmp_path / "unit.db")
    cli("--db", str(db), "migrate")
    return db


@pytest.fixture
def request_file(tmp_path: Path) -> Path:
    path = tmp_path / "request.json"
    path.write_text(json.dumps(projection_mapping()))
    return path


def test_the_projection_resolves_its_binding_through_the_api(
    server: ApiServer, projected_db: Path, request_file: Path, tmp_path: Path
) -> None:
    # Without the API, this ledger has no binding for the task.
    local = run_cli(
        "--db",
        projected_db,
        "project",
        TASK,
        "--request",
        request_file,
        env={**os.environ, AUTHORIZATION_ENV: OWNER},
    )
    assert local.returncode == 1 and local.stderr.startswith("GOVERNED_BINDING_NOT_FOUND")
    token = server.issue("projection-unit", "owner")
    creds = credentials(tmp_path / "creds", token)
    answer = project(projected_db, request_file, server.url, creds)
    assert answer.returncode == 0, answer.stderr
    projected = json.loads(answer.stdout)
    task = json.loads(cli("--db", str(projected_db), "task", "show", TASK))
    assert task["metadata"]["execution"]["execution_digest"] == projected["execution_digest"]
    assert token not in answer.stdout + answer.stderr


@pytest.mark.parametrize("failure", ["api-down", "token-refused", "token-revoked", "no-credential"])
def test_no_binding_from_the_api_is_binding_unavailable_and_writes_nothing(
    server: ApiServer, projected_db: Path, request_file: Path, tmp_path: Path, failure: str
) -> None:
    url = server.url
    creds: Path | None = tmp_path / "creds"
    if failure == "api-down":
        creds = credentials(tmp_path / "creds", server.issue("unit", "owner"))
        url = f"http://127.0.0.1:{free_port()}"
    elif failure == "token-refused":
        creds = credentials(tmp_path / "creds", "never-issued-token-0123456789abcdef")
    elif failure == "token-revoked":
        creds = credentials(tmp_path / "creds", server.issue("unit", "owner"))
        cli("--db", str(server.db), "token", "revoke", "unit")
    else:
        creds = None
    before = dump(projected_db)
    answer = project(projected_db, request_file, url, creds)
    assert answer.returncode == 1
    assert answer.stderr.startswith("BINDING_UNAVAILABLE: "), answer.stderr
    assert dump(projected_db) == before


def test_a_binding_the_api_does_not_have_is_not_found(
    server: ApiServer, projected_db: Path, tmp_path: Path
) -> None:
    request = tmp_path / "other.json"
    request.write_text(json.dumps(projection_mapping(expected_job_id="job-unknown")))
    creds = credentials(tmp_path / "creds", server.issue("unit", "owner"))
    before = dump(projected_db)
    answer = project(projected_db, request, server.url, creds)
    assert answer.returncode == 1
    assert answer.stderr.startswith("GOVERNED_BINDING_NOT_FOUND"), answer.stderr
    assert dump(projected_db) == before
