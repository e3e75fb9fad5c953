"""`LedgerClient`: the ledger over its HTTP API (`aios-ledger serve`), with TaskLedger's answers
and `LedgerError` codes, so a worker runs unchanged against a local file or a remote server.

A call that lost its answer is sent again only where a repeat cannot do the work twice (keyed
writes, claims, which always carry a key, heartbeats, releases, reads); other writes only when
the connection was never made. The token never appears in an error or a log line.
"""

from __future__ import annotations

import base64
import codecs
import contextlib
import json
import os
import random
import secrets
import time
import urllib.parse
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from typing import Any, Literal, TypeVar, cast

import httpx
from aios_ledger.core import (
    ClaimAnswer,
    ClaimBatchRequest,
    ClaimRequest,
    EventView,
    HistoryEntry,
    LedgerError,
    RetryLaterError,
    TaskCreateCommand,
    TaskView,
)
from aios_ledger.core.api.event_stream import StreamParser
from aios_ledger.core.git import ProposalAnswer
from aios_ledger.core.jsonvalue import dumps_canonical
from aios_ledger.core.runs import RunEventRow, RunRow
from aios_ledger.core.structuring import check_built, wire_form
from aios_ledger.core.tasks.answers import TaskDetail
from aios_ledger.core.tasks.operations import operation_of
from aios_ledger.core.tasks.requests import TaskRequest
from aios_ledger.core.work import IdleReason
from aios_ledger.shell.actors import VIA_HEADER
from aios_ledger.shell.git.workspace import LEASE_TOKEN_HEADER, MAX_WORKSPACE_BYTES
from aios_ledger.shell.remote.tracing import traced_transport
from aios_ledger.shell.tasks.surface import TaskSurface, listed, new_lease_token, offered

T = TypeVar("T")
A = TypeVar("A")
Retry = Literal["always", "connect"]

DEFAULT_RETRIES = 5
DEFAULT_TIMEOUT = 30.0
MAX_WAIT_SECONDS = 60
# The long poll holds the answer up to `wait_seconds`: the read timeout must outlast it.
LONG_POLL_MARGIN = 15.0
EVENT_STREAM_TYPE = "text/event-stream"
_RETRIED_STATUS = frozenset({502, 503, 504})


def new_run_id() -> str:
    return "run-" + secrets.token_hex(16)


def api_path(*parts: object) -> str:
    """`/v1/` and the parts, each quoted whole so that an id holding `/` stays one segment."""
    for part in parts:
        if not isinstance(part, str) or not part:
            raise LedgerError("FIELDS_INVALID", f"an id must be non-empty text, not {part!r}"[:200])
    return "/v1/" + "/".join(urllib.parse.quote(str(part), safe="") for part in parts)


def _encoded(body: object) -> bytes:
    """The request body as JSON; a value JSON cannot hold is refused as TaskLedger refuses it."""
    try:
        return json.dumps(body, allow_nan=False, ensure_ascii=False).encode("utf-8")
    except (TypeError, ValueError, UnicodeEncodeError) as exc:
        raise LedgerError("FIELDS_INVALID", f"not a JSON value: {exc}") from None


# Refusals the server says when to try again: a budget spent (429), the database away (503).
_RETRY_LATER_STATUSES = frozenset({429, 503})


def problem_error(response: httpx.Response) -> LedgerError:
    """A problem+json answer as the LedgerError it carries."""
    try:
        problem = response.json()
    except ValueError:
        problem = None
    code = problem.get("code") if isinstance(problem, dict) else None
    if not isinstance(code, str):
        return LedgerError(
            "API_PROTOCOL_ERROR", f"HTTP {response.status_code} without a problem document"
        )
    detail = problem.get("detail")
    retry_after = response.headers.get("Retry-After", "")
    try:
        text = detail if isinstance(detail, str) else ""
        error = (
            RetryLaterError(code, text, retry_after=int(retry_after))
            if response.status_code in _RETRY_LATER_STATUSES and retry_after.isdigit()
            else LedgerError(code, text)
        )
    except ValueError:
        return LedgerError("API_PROTOCOL_ERROR", f"HTTP {response.status_code}: bad code")
    field = problem.get("field")
    if isinstance(field, str):
        error.field = field  # type: ignore[attr-defined]
    return error


class LedgerClient(TaskSurface):
    def __init__(
        self,
        url: str,
        token: str,
        *,
        agent_name: str | None = None,
        via: str | None = None,
        retries: int = DEFAULT_RETRIES,
        backoff: float = 0.05,
        backoff_max: float = 2.0,
        timeout: float = DEFAULT_TIMEOUT,
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        if not isinstance(token, str) or not token or token != token.strip():
            raise LedgerError("TOKEN_INVALID", "the token is empty or has surrounding space")
        parsed = urllib.parse.urlsplit(url)
        if parsed.scheme not in ("http", "https") or not parsed.netloc:
            raise LedgerError("API_URL_INVALID", f"{url[:200]!r} is not an http(s) URL")
        self.url = url.rstrip("/")
        self.agent_name = agent_name
        self._retries = retries
        self._backoff = backoff
        self._backoff_max = backoff_max
        self._timeout = timeout
        self._http = httpx.Client(
            base_url=self.url,
            headers={
                "Authorization": f"Bearer {token}",
                "Accept": "application/json",
                # How the call came, when another entry point relays it (`via`: the MCP adapter).
                **({} if via is None else {VIA_HEADER: via}),
            },
            timeout=timeout,
            transport=traced_transport(transport),
        )

    def close(self) -> None:
        self._http.close()

    def __enter__(self) -> LedgerClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:  # never the token
        return f"LedgerClient({self.url!r})"

    # -- the wire -------------------------------------------------------------------------

    def _call(
        self,
        method: str,
        path: str,
        *,
        body: object = None,
        params: Mapping[str, object] | None = None,
        retry: Retry = "always",
        timeout: float | None = None,
        expect: Iterable[int] = (200,),
        headers: Mapping[str, str] | None = None,
    ) -> httpx.Response:
        content = None if body is None else _encoded(body)
        sent = dict(headers or {})
        if content is not None:
            sent["Content-Type"] = "application/json"
        query = {k: v for k, v in (params or {}).items() if v is not None}
        expected = frozenset(expect)
        last = "no attempt"
        for attempt in range(self._retries + 1):
            if attempt:
                time.sleep(self._delay(attempt))
            try:
                response = self._http.request(
                    method,
                    path,
                    content=content,
                    headers=sent,
                    params=cast(Any, query),
                    timeout=self._timeout if timeout is None else timeout,
                )
            except (httpx.ConnectError, httpx.ConnectTimeout, httpx.PoolTimeout) as exc:
                last = f"{type(exc).__name__}: {exc}"
                continue  # never reached the server: always safe to send again
            except httpx.TransportError as exc:
                last = f"{type(exc).__name__}: {exc}"
                if retry == "always":
                    continue
                raise LedgerError(
                    "API_UNAVAILABLE", f"{method} {path}: the answer was lost ({last})"
                ) from None
            if response.status_code in expected:
                return response
            if response.status_code in _RETRIED_STATUS and retry == "always":
                last = str(problem_error(response))
                continue
            raise self._refusal(response)
        raise LedgerError(
            "API_UNAVAILABLE", f"{method} {path}: no answer after {self._retries + 1} tries: {last}"
        )

    def _refusal(self, response: httpx.Response) -> LedgerError:
        """The answer's problem; a 401 saying what to do (the token itself is never shown)."""
        refused = problem_error(response)
        if response.status_code != 401:
            return refused
        return LedgerError(
            refused.code,
            f"{refused.detail}: {self.url} refused this token (mistyped, revoked, or issued "
            "by another ledger); the ledger's owner issues a new one with "
            "`aios-ledger token issue NAME --role ROLE`",
        )

    def _delay(self, attempt: int) -> float:
        delay = min(self._backoff_max, self._backoff * 2.0 ** (attempt - 1))
        return delay * random.uniform(0.5, 1.0)

    def _json(self, method: str, path: str, **kwargs: Any) -> Any:
        return _answer(self._call(method, path, **kwargs))

    def whoami(self) -> dict[str, Any]:
        """The token's name and roles (`GET /v1/whoami`): an answer proves the token good."""
        answer = self._json("GET", api_path("whoami"))
        if not isinstance(answer, dict) or not isinstance(answer.get("name"), str):
            raise LedgerError("API_PROTOCOL_ERROR", "whoami: expected {name, roles}")
        return answer

    def idle_reason(self, capabilities: Sequence[str]) -> IdleReason:
        offered = ",".join(str(name) for name in capabilities)
        answer = self._json("GET", api_path("claims", "idle"), params={"capabilities": offered})
        if not isinstance(answer, dict):
            raise LedgerError("API_PROTOCOL_ERROR", "idle reason: expected an object")
        return _record(IdleReason.from_public, answer)

    # -- TaskSurface ----------------------------------------------------------------------

    def _apply(self, request: TaskRequest[A]) -> A:
        """The request's wire form on its operation's route, less the task (the path names it)
        and the acting agent (the server takes the token's)."""
        row = operation_of(request)
        if isinstance(request, ClaimRequest):
            return cast(A, self._claim(request))
        if isinstance(request, ClaimBatchRequest):
            return cast(A, self._claim_batch(request))
        if isinstance(request, TaskCreateCommand):
            body = wire_form(request)
            return cast(A, self._json("POST", api_path("tasks"), body=body, expect=(201,)))
        if row.route is None:
            raise LedgerError("FIELDS_INVALID", f"{row.name} has no route in the HTTP API")
        task_id = cast(str, cast(Any, request).task_id)  # every request on one task names it
        body = wire_form(request, without=("task_id", "agent_id"))
        return cast(A, self._json("POST", api_path("tasks", task_id, row.route), body=body))

    def apply_all(self, requests: Iterable[TaskRequest[A]]) -> list[A]:
        """TaskLedger.apply_all of creates, the API's one batch write."""
        commands = cast(Iterable[object], listed(requests))
        return self._apply_all([self._command(command) for command in commands])

    def _apply_all(self, requests: Sequence[TaskRequest[A]]) -> list[A]:
        body = [wire_form(command) for command in requests]
        return cast(list[A], self._json("POST", api_path("tasks"), body=body, expect=(201,)))

    @staticmethod
    def _command(command: object) -> TaskRequest[Any]:
        if not isinstance(command, TaskCreateCommand):
            raise LedgerError("FIELDS_INVALID", "a batch over the API holds creates only")
        check_built(command, what="create")
        return command

    def claim(
        self,
        *,
        agent_id: str,
        capabilities: Sequence[str],
        lease_seconds: int,
        task_id: str | None = None,
        idempotency_key: str | None = None,
        lease_token: str | None = None,
        wait_seconds: int = 0,
    ) -> ClaimAnswer | None:
        """Take the next eligible task (or `task_id`) under a lease, passed leases taken over
        first so that a fleet needs no sweeper; None: nothing to take. As this client's agent,
        long-polling up to `wait_seconds`; always keyed, so that a retry after a lost answer
        gets the same claim."""
        if idempotency_key is not None and lease_token is None:
            lease_token = new_lease_token()  # `_claim` draws both when there is no key
        held = {"task_id": task_id, "idempotency_key": idempotency_key, "lease_token": lease_token}
        request = offered(ClaimRequest, agent_id, capabilities, lease_seconds, **held)
        self._check_agent(request.agent_id)
        return self._claim(request, wait_seconds)

    def claim_many(
        self,
        *,
        agent_id: str,
        capabilities: Sequence[str],
        lease_seconds: int,
        limit: int,
        wait_seconds: int = 0,
    ) -> list[ClaimAnswer]:
        """Take up to `limit` eligible tasks in one transaction, each under its own lease. Not
        idempotent: a repeat after a lost answer takes other tasks, and the lost leases lapse.
        As this client's agent, long-polling up to `wait_seconds`; with no key, a batch is sent
        again only if never sent, and a batch of one is claimed as `claim` claims."""
        request = offered(ClaimBatchRequest, agent_id, capabilities, lease_seconds, limit=limit)
        self._check_agent(request.agent_id)
        return self._claim_batch(request, wait_seconds)

    def _claim(self, request: ClaimRequest, wait_seconds: int = 0) -> ClaimAnswer | None:
        if request.idempotency_key is None:
            request = ClaimRequest.from_mapping(
                {
                    **wire_form(request),
                    "idempotency_key": "claim:" + secrets.token_urlsafe(18),
                    "lease_token": request.lease_token or new_lease_token(),
                }
            )
        body = wire_form(request, without=("agent_id",))
        if request.task_id is None:
            del body["task_id"]
        return cast(ClaimAnswer | None, self._post_claims(body, wait_seconds, "always"))

    def _post_claims(self, body: dict[str, Any], wait_seconds: int, retry: Retry) -> Any:
        """`POST /v1/claims`, long-polling up to `wait_seconds`; None when no task came (204)."""
        if wait_seconds:
            body["wait_seconds"] = wait_seconds
        timeout = self._timeout
        if isinstance(wait_seconds, int) and not isinstance(wait_seconds, bool):
            timeout = max(timeout, min(wait_seconds, MAX_WAIT_SECONDS) + LONG_POLL_MARGIN)
        response = self._call(
            "POST", api_path("claims"), body=body, expect=(200, 204), retry=retry, timeout=timeout
        )
        return None if response.status_code == 204 else _answer(response)

    def _claim_batch(self, batch: ClaimBatchRequest, wait_seconds: int = 0) -> list[ClaimAnswer]:
        if batch.limit == 1:
            one = self._claim(batch.claim(), wait_seconds)
            return [] if one is None else [one]
        body = wire_form(batch, without=("agent_id",))
        answer = self._post_claims(body, wait_seconds, "connect")
        return [] if answer is None else cast(list[ClaimAnswer], answer)

    def get(self, task_id: str) -> TaskDetail:
        return cast(TaskDetail, self._json("GET", api_path("tasks", task_id)))

    def events(self, task_id: str) -> list[EventView]:
        return cast(list[EventView], self._json("GET", api_path("tasks", task_id, "events")))

    def follow_events(
        self,
        *,
        after: int | None = None,
        task_id: str | None = None,
        reconnects: int | None = None,
    ) -> Iterator[EventView]:
        """The ledger's events as they are sealed, after event `after` (None: from now on),
        until the caller stops. A dropped or ended stream is opened again with `Last-Event-ID`,
        no event lost or given twice; `reconnects` failures in a row are `API_UNAVAILABLE`."""
        parser = StreamParser(last_id="" if after is None else str(after))
        params = {} if task_id is None else {"task_id": task_id}
        limit = self._retries if reconnects is None else reconnects
        failures, last = 0, "no attempt"
        while True:
            headers = {"Accept": EVENT_STREAM_TYPE}
            if parser.last_id:
                headers["Last-Event-ID"] = parser.last_id
            try:
                with self._http.stream(
                    "GET", api_path("events", "stream"), params=params, headers=headers
                ) as response:
                    if response.status_code == 200:
                        failures = 0
                        parser.reconnected()
                        text = codecs.getincrementaldecoder("utf-8")(errors="replace")
                        for chunk in response.iter_bytes():
                            for message in parser.feed_text(text.decode(chunk)):
                                yield cast(EventView, message.document())
                        last = "the server ended the stream"
                    else:
                        response.read()
                        if response.status_code not in _RETRIED_STATUS:
                            raise self._refusal(response)
                        last = str(problem_error(response))
                        failures += 1
            except httpx.TransportError as exc:
                last = f"{type(exc).__name__}: {exc}"
                failures += 1
            if failures > limit:
                raise LedgerError(
                    "API_UNAVAILABLE", f"the event stream: no answer after {failures} tries: {last}"
                )
            asked = (parser.retry or 0) / 1000
            time.sleep(asked if failures == 0 else max(asked, self._delay(failures)))

    def history(self, task_id: str) -> list[HistoryEntry]:
        answer = self._json("GET", api_path("tasks", task_id, "history"))
        return cast(list[HistoryEntry], answer)

    def list_tasks(
        self, status: str | None = None, *, limit: int = 100, agent: str | None = None
    ) -> list[TaskView]:
        """The first page of `GET /v1/tasks`: newest first."""
        params = {
            "status": _query(status, "status"),
            "limit": _query(limit, "limit"),
            "agent": _query(agent, "agent"),
        }
        page = self._json("GET", api_path("tasks"), params=params)
        return cast(list[TaskView], page["tasks"])

    # -- runs (RunStore) ------------------------------------------------------------------

    def create_run(self, session_id: str, prompt: str, run_id: str | None = None) -> RunRow:
        """RunStore.create_run; idempotent by run id (drawn here when not given)."""
        body = {
            "session_id": session_id,
            "prompt": prompt,
            "run_id": new_run_id() if run_id is None else run_id,
        }
        answer = self._json("POST", api_path("runs"), body=body, expect=(200, 201))
        return _record(RunRow.from_row, answer)

    def append_event(
        self, run_id: str, kind: str, payload: Any = None, *, lease_token: str | None = None
    ) -> RunEventRow:
        """RunStore.append_event (no key: sent again only when never sent)."""
        body: dict[str, Any] = {"kind": kind, "payload": payload}
        if lease_token is not None:  # an attempt's evidence run: under the claim's lease
            body["lease_token"] = lease_token
        answer = self._json(
            "POST",
            api_path("runs", run_id, "events"),
            body=body,
            expect=(200, 201),
            retry="connect",
        )
        return _run_event(run_id, answer)

    def get_run(self, run_id: str) -> RunRow:
        return _record(RunRow.from_row, self._json("GET", api_path("runs", run_id)))

    def run_events(
        self, run_id: str, *, limit: int | None = None, after: int = 0
    ) -> tuple[RunEventRow, ...]:
        params = {
            "limit": None if limit is None else _query(limit, "limit"),
            "after": None if after == 0 else _query(after, "after"),
        }
        answer = self._json("GET", api_path("runs", run_id, "events"), params=params)
        if not isinstance(answer, list):
            raise LedgerError("API_PROTOCOL_ERROR", "run events: not a list")
        return tuple(_run_event(run_id, event) for event in answer)

    # -- governed repositories ------------------------------------------------------------

    def download_workspace(
        self,
        task_id: str,
        *,
        lease_token: str,
        out: str | os.PathLike[str],
        max_bytes: int = MAX_WORKSPACE_BYTES,
    ) -> int:
        """Write to `out` the git bundle of the held task's base, and answer its size; more than
        `max_bytes` is `WORKSPACE_TOO_LARGE`."""
        path = api_path("tasks", task_id, "workspace")
        headers = {LEASE_TOKEN_HEADER: lease_token, "Accept": "application/octet-stream"}
        last = "no attempt"
        for attempt in range(self._retries + 1):
            if attempt:
                time.sleep(self._delay(attempt))
            try:
                with self._http.stream("GET", path, headers=headers) as response:
                    if response.status_code != 200:
                        response.read()
                        if response.status_code in _RETRIED_STATUS:
                            last = str(problem_error(response))
                            continue
                        raise problem_error(response)
                    return _save(response, out, max_bytes)
            except httpx.TransportError as exc:
                last = f"{type(exc).__name__}: {exc}"
        raise LedgerError(
            "API_UNAVAILABLE", f"GET {path}: no answer after {self._retries + 1} tries: {last}"
        )

    def upload_proposal(self, task_id: str, *, lease_token: str, bundle: bytes) -> ProposalAnswer:
        """Record `bundle` as the held attempt's proposal; the lease goes in a header, which the
        server checks before it reads the body."""
        answer = self._json(
            "POST",
            api_path("tasks", task_id, "proposal"),
            body={"bundle_base64": base64.b64encode(bundle).decode()},
            headers={LEASE_TOKEN_HEADER: lease_token},
            expect=(200, 201),
        )
        return cast(ProposalAnswer, answer)

    # -- other reads ----------------------------------------------------------------------

    def get_json(self, path: str, params: Mapping[str, object] | None = None) -> Any:
        """Any read of the API (`/v1/status`, `/v1/log/head`, ...) as its JSON answer."""
        return self.call_json("GET", path, params=params)

    def call_json(
        self,
        method: str,
        path: str,
        *,
        body: object = None,
        params: Mapping[str, object] | None = None,
        retry: Retry = "always",
        expect: Iterable[int] = (200,),
    ) -> Any:
        """Any route under `/v1/` with a JSON answer; `retry="connect"` for a call that must not
        reach the server twice."""
        if not path.startswith("/v1/"):
            raise LedgerError("API_PATH_INVALID", "a path of the API starts with /v1/")
        return self._json(method, path, body=body, params=params, retry=retry, expect=expect)

    def _check_agent(self, agent_id: str) -> None:
        if self.agent_name is not None and agent_id != self.agent_name:
            raise LedgerError(
                "AGENT_MISMATCH",
                f"this client acts as {self.agent_name!r} (its token's name), not {agent_id!r}",
            )


def _save(response: httpx.Response, out: str | os.PathLike[str], max_bytes: int) -> int:
    """The answer's body written to `out`, at most `max_bytes` of it."""
    size = 0
    try:
        with open(out, "wb") as target:
            for chunk in response.iter_bytes():
                size += len(chunk)
                if size > max_bytes:
                    raise LedgerError(
                        "WORKSPACE_TOO_LARGE", f"the bundle is over {max_bytes} bytes"
                    )
                target.write(chunk)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(out)
        raise
    return size


def _answer(response: httpx.Response) -> Any:
    try:
        return response.json()
    except ValueError:
        raise LedgerError(
            "API_PROTOCOL_ERROR", f"HTTP {response.status_code}: the answer is not JSON"
        ) from None


def _query(value: object, name: str) -> object:
    if value is None or isinstance(value, str):
        return value
    if isinstance(value, int) and not isinstance(value, bool):
        return str(value)
    raise LedgerError("FIELDS_INVALID", f"{name} must be text or an integer")


def _record(build: Callable[[Mapping[str, Any]], T], answer: object) -> T:
    if not isinstance(answer, dict):
        raise LedgerError("API_PROTOCOL_ERROR", "expected a JSON object")
    try:
        return build(answer)
    except (LedgerError, TypeError, KeyError, ValueError) as exc:
        raise LedgerError("API_PROTOCOL_ERROR", f"unexpected answer: {exc}") from None


def _run_event(run_id: str, answer: object) -> RunEventRow:
    if not isinstance(answer, dict):
        raise LedgerError("API_PROTOCOL_ERROR", "expected a run event object")
    row = {
        "run_id": answer.get("run_id", run_id),
        "seq": answer.get("seq"),
        "kind": answer.get("kind"),
        "payload_json": answer.get("payload_json", dumps_canonical(answer.get("payload"))),
        "created_at": answer.get("created_at"),
    }
    return _record(RunEventRow.from_row, row)
