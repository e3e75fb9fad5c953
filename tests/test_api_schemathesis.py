"""schemathesis against the server's own `/openapi.json` (ASGI mode, in process): for requests
generated from the document, valid and invalid, the server never answers 5xx, and every answer
(status, media type, body) is one the document describes. The app is the one `serve` runs
(`served_app`: the core routes, the governed-write and the review routes), and the cases are
every operation of its document.

The token holds every role, so that each generated request gets past authentication and reaches
the document's validation, the core and the ledger. Long polls are asked not to wait (a
generated `wait_seconds` of 60 would only make the run slow). Examples per operation are few:
the run stays fast; the property is the same at any count."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import schemathesis
from aios_ledger.shell import AUTHORIZATION_ENV, Database
from aios_ledger.shell.api.backend import ApiSettings
from aios_ledger.shell.api.openapi import build_document
from aios_ledger.shell.api.tokens import issue_token
from aios_ledger.shell.serve.app import served_app, served_operations
from hypothesis import HealthCheck, given, settings
from legacy_fixtures import OWNER
from schemathesis.checks import (
    content_type_conformance,
    not_a_server_error,
    response_schema_conformance,
    status_code_conformance,
)
from schemathesis.generation import GenerationMode

CHECKS = [
    not_a_server_error,
    status_code_conformance,
    content_type_conformance,
    response_schema_conformance,
]
SOAK = os.environ.get("AIOS_SOAK") == "1"
# A few per operation in `make test`; `make soak` (AIOS_SOAK=1) generates ten times as many, and
# also mixes in constants schemathesis reads from the app's source (a fifth of the CPU here).
EXAMPLES = 60 if SOAK else 6


@pytest.fixture(scope="module")
def api(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Any, str]]:
    """The app (in process) over a fresh ledger, its schema as schemathesis loads it, and a
    token that holds every role."""
    path: Path = tmp_path_factory.mktemp("schemathesis") / "ledger.db"
    with Database(path) as db:
        roles = ["agent", "reviewer", "owner", "auditor"]
        token = issue_token(db, "all-roles", roles, any_capability=True)["token"]
    # An event stream ends after a moment: the in-process client reads an answer whole.
    settings = ApiSettings(db_path=str(path), max_body=256 * 1024, stream_max_seconds=0.05)
    app = served_app(settings)
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv(AUTHORIZATION_ENV, OWNER)
        schema = schemathesis.openapi.from_asgi("/openapi.json", app)
        schema.config.analysis.constants.enabled = SOAK
        yield schema, token
    app.state.backend.close()


def generated() -> list[tuple[str, GenerationMode]]:
    """Each operation with valid data, and with invalid data where it has something to get
    wrong (a body or a parameter)."""
    document = build_document(served_operations(), version="test")
    cases = []
    for path, entry in document["paths"].items():
        for method, operation in entry.items():
            name = f"{method.upper()} {path}"
            cases.append((name, GenerationMode.POSITIVE))
            if operation["parameters"] or "requestBody" in operation:
                cases.append((name, GenerationMode.NEGATIVE))
    return cases


def test_the_cases_are_every_route_the_served_app_answers(api: tuple[Any, str]) -> None:
    schema, _ = api
    served = {
        f"{method.upper()} {path}"
        for path, entry in schema.raw_schema["paths"].items()
        for method in entry
    }
    assert {name for name, _ in generated()} == served
    assert any(path.endswith("/governed-write") for path in served)
    assert any("/review" in path for path in served)


@pytest.mark.parametrize(("name", "mode"), generated(), ids=lambda v: getattr(v, "value", v))
def test_the_document_holds_for_generated_requests(
    api: tuple[Any, str], name: str, mode: GenerationMode
) -> None:
    schema, token = api
    method, path = name.split(" ", 1)
    operation = schema[path][method]

    @given(case=operation.as_strategy(generation_mode=mode))
    @settings(
        max_examples=EXAMPLES,
        deadline=None,
        suppress_health_check=list(HealthCheck),
        derandomize=True,
        database=None,
    )
    def holds(case: Any) -> None:
        if isinstance(case.body, dict) and "wait_seconds" in case.body:
            case.body["wait_seconds"] = 0
        case.call_and_validate(headers={"Authorization": f"Bearer {token}"}, checks=CHECKS)

    holds()
