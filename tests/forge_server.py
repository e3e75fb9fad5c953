"""A forge's pull-request API on loopback, for the tests: it answers as GitHub, Gitea or GitLab do
and checks every request the ledger sends and every answer it gives against the forge's own
published API description (`tests/fixtures/forges/`, excerpts naming their source).

A request or an answer the description does not allow is kept in `violations` and answered 400,
so that a test fails on it. Schemas are checked with `openapi-schema-validator` (OpenAPI 3.0's
dialect of JSON Schema, which reads a Swagger 2.0 schema object the same way).
"""

from __future__ import annotations

import copy
import json
import re
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl, unquote, urlsplit

import attrs
import yaml
from openapi_schema_validator import OAS30Validator, oas30_format_checker
from referencing import Registry, Resource
from referencing.jsonschema import DRAFT4

FIXTURES = Path(__file__).parent / "fixtures" / "forges"
DOCUMENT_URI = "urn:forge-description"
# Where each forge's API is served under the server's root, and the prefix its description's paths
# leave out (Gitea's `basePath`; GitLab's paths hold their `/api/v4`).
API_ROOTS = {"github": "", "gitea": "/api/v1", "gitlab": "/api/v4"}
BASE_PATHS = {"github": "", "gitea": "/api/v1", "gitlab": ""}
DESCRIBED = ("github", "gitea", "gitlab")


def description(kind: str) -> dict[str, Any]:
    """A forge's excerpt of its published description."""
    if kind == "gitlab":
        document: dict[str, Any] = yaml.safe_load((FIXTURES / "gitlab.yaml").read_text())
    else:
        document = json.loads((FIXTURES / f"{kind}.json").read_text())
    return document


def resolve(document: dict[str, Any], node: Any) -> Any:
    """`node`, or what its `$ref` names in `document` (followed until it names no other)."""
    seen = 0
    while isinstance(node, dict) and "$ref" in node:
        target: Any = document
        for part in str(node["$ref"]).removeprefix("#/").split("/"):
            target = target[part]
        node = target
        seen += 1
        assert seen < 20, "a $ref loop"
    return node


@attrs.define
class Checker:
    """Requests and answers held against one forge's description."""

    kind: str
    document: dict[str, Any]

    def schema_errors(self, schema: Any, value: Any) -> list[str]:
        """Why `value` is not what `schema` (an object of the description) allows: the schema is
        checked where it stands in the document, so that its `$ref`s resolve there."""
        document = {**self.document, "x-checked": schema}
        resource = Resource.from_contents(document, default_specification=DRAFT4)
        validator = OAS30Validator(
            {"$ref": f"{DOCUMENT_URI}#/x-checked"},
            registry=Registry().with_resource(DOCUMENT_URI, resource),
            format_checker=oas30_format_checker,
        )
        return [
            f"{'/'.join(str(p) for p in error.absolute_path)}: {error.message[:300]}"
            for error in validator.iter_errors(value)
        ]

    def operation(self, method: str, path: str) -> tuple[str, dict[str, Any], dict[str, str]]:
        """The description's path template, operation and path parameters of a request."""
        for template, item in self.document["paths"].items():
            pattern = "^" + re.sub(r"\\\{([^}]+)\\\}", r"(?P<\1>[^/]+)", re.escape(template)) + "$"
            found = re.match(pattern, path)
            if found and method.lower() in item:
                params = {name: unquote(value) for name, value in found.groupdict().items()}
                return template, item[method.lower()], params
        raise LookupError(f"{method} {path}: no operation of the description")

    def parameters(self, template: str, operation: dict[str, Any]) -> list[dict[str, Any]]:
        shared = self.document["paths"][template].get("parameters", [])
        return [resolve(self.document, p) for p in [*shared, *operation.get("parameters", [])]]

    def request_errors(
        self,
        template: str,
        operation: dict[str, Any],
        path_params: dict[str, str],
        query: dict[str, str],
        body: Any,
    ) -> list[str]:
        errors: list[str] = []
        declared = self.parameters(template, operation)
        for where, given in (("path", path_params), ("query", query)):
            named = {p["name"]: p for p in declared if p["in"] == where}
            errors += [f"{where} parameter {n!r} is not described" for n in given if n not in named]
            for name, parameter in named.items():
                if name not in given:
                    if parameter.get("required"):
                        errors.append(f"{where} parameter {name!r} is required")
                    continue
                errors += [
                    f"{where} parameter {name!r}: {e}"
                    for e in self.schema_errors(
                        _parameter_schema(self.document, parameter), _typed(parameter, given[name])
                    )
                ]
        body_schema = self._body_schema(declared, operation)
        if body_schema is None:
            if body is not None:
                errors.append("a body the operation does not take")
        elif body is None:
            errors.append("the operation's body is missing")
        else:
            errors += [f"body {e}" for e in self.schema_errors(body_schema, body)]
        return errors

    def _body_schema(self, declared: list[dict[str, Any]], operation: dict[str, Any]) -> Any:
        for parameter in declared:
            if parameter["in"] == "body":  # Swagger 2.0
                return parameter["schema"]
        request_body = resolve(self.document, operation.get("requestBody"))
        if request_body is None:
            return None
        return request_body["content"]["application/json"]["schema"]

    def response_errors(self, operation: dict[str, Any], status: int, body: Any) -> list[str]:
        responses = operation["responses"]
        if str(status) not in responses:
            if status == 401:
                # Every forge answers a bad token 401 on any operation; no description lists it.
                return []
            return [f"status {status} is not described (only {', '.join(responses)})"]
        response = resolve(self.document, responses[str(status)])
        schema = response.get("schema")  # Swagger 2.0
        if schema is None and "content" in response:
            schema = response["content"]["application/json"]["schema"]
        if schema is None:
            return [] if body is None else [f"status {status} takes no body"]
        return [f"answer {e}" for e in self.schema_errors(schema, body)]


def _parameter_schema(document: dict[str, Any], parameter: dict[str, Any]) -> Any:
    if "schema" in parameter:  # OpenAPI 3
        return parameter["schema"]
    return {k: v for k, v in parameter.items() if k in ("type", "enum", "format", "items")}


def _typed(parameter: dict[str, Any], text: str) -> Any:
    kind = parameter.get("schema", parameter).get("type")
    if kind == "integer":
        try:
            return int(text)
        except ValueError:
            return text
    return text


@attrs.define
class PullRequest:
    number: int
    head: str
    base: str
    title: str
    body: str
    state: str = "open"


@attrs.define
class FakeForge:
    """One forge's pull requests for one project, behind its described API."""

    kind: str
    token: str
    project: str
    checker: Checker
    pulls: list[PullRequest] = attrs.Factory(list)
    requests: list[tuple[str, str, dict[str, str], Any, dict[str, str]]] = attrs.Factory(list)
    violations: list[str] = attrs.Factory(list)
    # A scripted answer for the next request that would open one: (status, body).
    refuse_next_create: tuple[int, Any] | None = None
    # A link the forge answers instead of its own (a hostile or broken forge's).
    answered_url: str | None = None
    url: str = ""

    @property
    def api_url(self) -> str:
        return self.url + API_ROOTS[self.kind]

    def created(self) -> list[tuple[str, str, dict[str, str], Any, dict[str, str]]]:
        return [r for r in self.requests if r[0] == "POST"]

    def authorised(self, headers: dict[str, str]) -> bool:
        expected = {
            "github": ("authorization", f"Bearer {self.token}"),
            "gitea": ("authorization", f"token {self.token}"),
            "gitlab": ("private-token", self.token),
        }[self.kind]
        return headers.get(expected[0]) == expected[1]

    # -- the forges' answers --

    def answer(
        self, method: str, path_params: dict[str, str], query: dict[str, str], body: Any
    ) -> tuple[int, Any]:
        if method == "GET" and "head" in path_params:  # Gitea's by base and head
            found = self._open(path_params["head"], path_params["base"])
            return (404, None) if found is None else (200, self.document_of(found))
        if method == "GET":
            head, base = self._wanted(query)
            found = self._open(head, base)
            return 200, [] if found is None else [self.document_of(found, listed=True)]
        if self.refuse_next_create is not None:
            refused, self.refuse_next_create = self.refuse_next_create, None
            return refused
        head, base = self._wanted(body)
        title = str(body.get("title"))
        text = str(body.get("description" if self.kind == "gitlab" else "body", ""))
        pull = PullRequest(len(self.pulls) + 1, head, base, title, text)
        self.pulls.append(pull)
        return 201, self.document_of(pull)

    def _wanted(self, given: dict[str, Any]) -> tuple[str, str]:
        if self.kind == "gitlab":
            return str(given["source_branch"]), str(given["target_branch"])
        head = str(given["head"])
        if self.kind == "github" and ":" in head:
            owner, _, head = head.partition(":")
            if owner != self.project.split("/")[0]:
                return f"{owner}:{head}", str(given["base"])
        return head, str(given["base"])

    def _open(self, head: str, base: str) -> PullRequest | None:
        return next(
            (p for p in self.pulls if (p.head, p.base, p.state) == (head, base, "open")), None
        )

    def web_url(self, pull: PullRequest) -> str:
        if self.answered_url is not None:
            return self.answered_url
        kind = (
            "-/merge_requests"
            if self.kind == "gitlab"
            else "pull"
            if self.kind == "github"
            else "pulls"
        )
        return f"{self.url}/{self.project}/{kind}/{pull.number}"

    def document_of(self, pull: PullRequest, *, listed: bool = False) -> dict[str, Any]:
        """The forge's own shape of a request: GitHub's from its description's example."""
        if self.kind == "github":
            examples = self.checker.document["components"]["examples"]
            name = "pull-request-simple-items" if listed else "pull-request"
            value = examples[name]["value"]
            document: dict[str, Any] = copy.deepcopy(value[0] if listed else value)
            document.update(
                number=pull.number,
                html_url=self.web_url(pull),
                title=pull.title,
                body=pull.body,
                state=pull.state,
            )
            document["head"]["ref"], document["base"]["ref"] = pull.head, pull.base
            return document
        if self.kind == "gitea":
            return {
                "number": pull.number,
                "html_url": self.web_url(pull),
                "title": pull.title,
                "body": pull.body,
                "state": pull.state,
                "head": {"ref": pull.head, "label": pull.head},
                "base": {"ref": pull.base, "label": pull.base},
            }
        return {
            "iid": pull.number,
            "web_url": self.web_url(pull),
            "title": pull.title,
            "description": pull.body,
            "state": "opened",
            "source_branch": pull.head,
            "target_branch": pull.base,
            "references": {
                "short": f"!{pull.number}",
                "relative": f"!{pull.number}",
                "full": f"{self.project}!{pull.number}",
            },
        }


class _Handler(BaseHTTPRequestHandler):
    server: _ForgeHttpServer

    def log_message(self, format: str, *args: Any) -> None:
        return None

    def do_GET(self) -> None:
        self._serve("GET")

    def do_POST(self) -> None:
        self._serve("POST")

    def _serve(self, method: str) -> None:
        forge = self.server.forge
        checker = forge.checker
        parts = urlsplit(self.path)
        root = BASE_PATHS[forge.kind]
        path = parts.path.removeprefix(root) if parts.path.startswith(root) else "\0"
        query = dict(parse_qsl(parts.query, keep_blank_values=True))
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        headers = {k.lower(): v for k, v in self.headers.items()}
        try:
            body = json.loads(raw) if raw else None
        except ValueError:
            body = raw.decode("utf-8", "replace")
        forge.requests.append((method, path, query, body, headers))
        try:
            template, operation, path_params = checker.operation(method, path)
        except LookupError as unknown:
            self._refuse(str(unknown))
            return
        problems = checker.request_errors(template, operation, path_params, query, body)
        if body is not None and headers.get("content-type") != "application/json":
            problems.append("a JSON body is sent as application/json")
        if problems:
            self._refuse(f"{method} {template}: " + "; ".join(problems))
            return
        status, answer = self._answer(method, path_params, query, body, headers)
        problems = checker.response_errors(operation, status, answer)
        if problems:
            self._refuse(
                f"the fake's answer {status} to {method} {template}: " + "; ".join(problems)
            )
            return
        self._send(status, answer)

    def _answer(
        self,
        method: str,
        path_params: dict[str, str],
        query: dict[str, str],
        body: Any,
        headers: dict[str, str],
    ) -> tuple[int, Any]:
        forge = self.server.forge
        if not forge.authorised(headers):
            # GitHub's body (basic-error); the others describe their 401 without one.
            return 401, {"message": "Bad credentials"} if forge.kind == "github" else None
        return forge.answer(method, path_params, query, body)

    def _refuse(self, problem: str) -> None:
        self.server.forge.violations.append(problem)
        self._send(400, {"message": problem})

    def _send(self, status: int, answer: Any) -> None:
        data = b"" if answer is None else json.dumps(answer).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


class _ForgeHttpServer(ThreadingHTTPServer):
    forge: FakeForge


@contextmanager
def forge_server(kind: str, *, token: str, project: str) -> Iterator[FakeForge]:
    """A fake `kind` forge on a loopback port for the block's length."""
    forge = FakeForge(kind, token, project, Checker(kind, description(kind)))
    server = _ForgeHttpServer(("127.0.0.1", 0), _Handler)
    server.forge = forge
    forge.url = f"http://127.0.0.1:{server.server_address[1]}"
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield forge
    finally:
        server.shutdown()
        server.server_close()
        thread.join()
