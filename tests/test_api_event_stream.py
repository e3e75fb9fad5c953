"""`GET /v1/events/stream` through real HTTP (the server `serve` runs, on a loopback port, httpx
streaming): each sealed event is one server-sent event as the task events route gives it; a
stream resumes after its `Last-Event-ID` with no event lost or repeated, on both engines, with
writers committing beside it; `?task_id=` filters; refusals come as problem documents before
the stream starts; a token revoked while it streams ends it; `serve` shuts down promptly with a
stream open; and `events --follow --api` rides out a dropped connection."""

from __future__ import annotations

import codecs
import concurrent.futures
import contextlib
import json
import secrets
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from aios_ledger.core.api.event_stream import StreamedEvent, StreamParser
from aios_ledger.shell import Database, TaskLedger
from aios_ledger.shell.db.connection import fetch_all
from api_server import ApiServer, Scenario, ServeProcess, cli
from conftest import both_engines
from signal_support import interruptible

pytest_generate_tests = both_engines

STREAM = "/v1/events/stream"
CLI = (sys.executable, "-m", "aios_ledger.shell.cli")
# An idle stream's comment comes this often on the servers here (the default is 15 s), so that
# "the stream went on" is counted in comments, never measured in seconds.
KEEPALIVE = "0.2"
# After a revocation, the stream must end before this many more comments: a bound, not a
# speed (the comments written while the revoking command started up are read after it).
COMMENTS_BOUND = 1000


SERVE_FLAGS = ("--stream-keepalive-seconds", KEEPALIVE, "--stream-poll-seconds", "0.05")


@pytest.fixture
def server(ledger_target: str | Path) -> Iterator[ApiServer]:
    with ApiServer(ledger_target, *SERVE_FLAGS, role_tokens=True) as running:
        yield running


class Stream:
    """An open stream: its messages as the client's parser reads them, and its comments."""

    def __init__(self, response: httpx.Response) -> None:
        self.response = response
        self.parser = StreamParser()
        self.comments = 0
        self.ended = False
        self._chunks = response.iter_bytes()
        self._text = codecs.getincrementaldecoder("utf-8")()
        self._ready: list[StreamedEvent] = []

    def _pull(self) -> None:
        """One more chunk (a dropped connection raises; a clean end sets `ended`)."""
        chunk = next(self._chunks, None)
        if chunk is None:
            self.ended = True
            return
        text = self._text.decode(chunk)
        self.comments += sum(1 for line in text.splitlines() if line.startswith(":"))
        self._ready.extend(self.parser.feed_text(text))

    def events(self, count: int) -> list[dict[str, Any]]:
        taken: list[dict[str, Any]] = []
        bound = self.comments + COMMENTS_BOUND
        while len(taken) < count:
            if not self._ready:
                assert not self.ended, "the stream ended early"
                assert self.comments < bound, f"the stream went quiet after {len(taken)} events"
                self._pull()
                continue
            message = self._ready.pop(0)
            document = message.document()
            assert isinstance(document, dict)
            assert (message.event_id(), message.event) == (
                document["event_id"],
                document["event_type"],
            )
            taken.append(document)
        return taken

    def until(self, event_id: int) -> list[dict[str, Any]]:
        """The events up to and with `event_id`."""
        taken: list[dict[str, Any]] = []
        while not taken or taken[-1]["event_id"] != event_id:
            taken.extend(self.events(1))
        return taken

    def idle_for(self, comments: int) -> None:
        """Read on until `comments` more comments came, and no event."""
        target = self.comments + comments
        while self.comments < target:
            assert not self.ended, "the stream ended"
            self._pull()
        assert self._ready == [], "an event on an idle ledger"

    def end(self, *, within: int) -> list[StreamedEvent]:
        """Read on until the stream ends cleanly, before `within` more comments; the messages
        that came meanwhile."""
        bound = self.comments + within
        while not self.ended:
            assert self.comments < bound, "the stream went on"
            self._pull()
        return self._ready


@contextlib.contextmanager
def open_stream(client: httpx.Client, **options: Any) -> Iterator[Stream]:
    headers = options.pop("headers", {})
    with client.stream("GET", STREAM, params=options, headers=headers) as response:
        assert response.status_code == 200, response.read()
        yield Stream(response)


def refused(client: httpx.Client, status: int, code: str, **options: Any) -> None:
    headers = options.pop("headers", {})
    with client.stream("GET", STREAM, params=options, headers=headers) as response:
        response.read()
        assert response.status_code == status, response.text
        assert response.headers["content-type"].startswith("application/problem+json")
        assert response.json()["code"] == code


def task_events(server: ApiServer, task_id: str) -> list[dict[str, Any]]:
    answer = server.client("auditor").get(f"/v1/tasks/{task_id}/events")
    assert answer.status_code == 200, answer.text
    return list(answer.json())


def last_event_id(server: ApiServer) -> int:
    return int(server.client("auditor").get("/v1/log/head").json()["last_event_id"])


def test_each_event_is_one_message_as_the_task_events_route_gives_it(server: ApiServer) -> None:
    scene = Scenario(server)
    with open_stream(server.client("auditor"), after=0) as stream:
        assert stream.response.headers["content-type"].startswith("text/event-stream")
        assert stream.response.headers["cache-control"] == "no-store"
        task_id, _ = scene.claimed()
        wanted = task_events(server, task_id)
        got = stream.until(wanted[-1]["event_id"])
        assert [event for event in got if event["task_id"] == task_id] == wanted
        assert stream.parser.retry == 1000
        stream.idle_for(2)  # idle now: the stream stays open, a comment at a time


def test_a_stream_without_a_start_begins_at_the_head(server: ApiServer) -> None:
    scene = Scenario(server)
    before = scene.queued()
    with open_stream(server.client("agent")) as stream:
        stream.idle_for(1)
        # The opening message says where it stands: a client that drops now resumes there.
        assert stream.parser.last_id == str(last_event_id(server))
        after = scene.queued()
        (created,) = stream.events(1)
        assert (created["task_id"], created["event_type"]) == (after, "TASK_CREATED")
        assert before != after


def test_a_stream_of_one_task(server: ApiServer) -> None:
    scene = Scenario(server)
    mine, other = scene.queued(), scene.queued()
    with open_stream(server.client("reviewer"), after=0, task_id=mine) as stream:
        first = stream.events(1)
        scene.owner.post(
            f"/v1/tasks/{other}/cancel", json={"reason": "r", "idempotency_key": scene.key()}
        )
        scene.owner.post(
            f"/v1/tasks/{mine}/cancel", json={"reason": "r", "idempotency_key": scene.key()}
        )
        second = stream.events(1)
        assert [e["task_id"] for e in first + second] == [mine, mine]
        assert first + second == task_events(server, mine)


def test_refusals_are_problems_before_the_stream_starts(server: ApiServer) -> None:
    refused(server.client(), 401, "UNAUTHENTICATED")
    refused(server.client(token="not-a-token-" + secrets.token_hex(8)), 401, "UNAUTHENTICATED")
    refused(server.client("witness"), 403, "FORBIDDEN")
    auditor = server.client("auditor")
    refused(auditor, 404, "EVENT_NOT_FOUND", after=last_event_id(server) + 1000)
    refused(auditor, 404, "EVENT_NOT_FOUND", headers={"Last-Event-ID": "999999"})
    refused(auditor, 422, "FIELDS_INVALID", headers={"Last-Event-ID": "seven"})
    refused(auditor, 422, "FIELDS_INVALID", after="-1")
    refused(auditor, 404, "TASK_NOT_FOUND", task_id="no-such-task")


def test_a_stream_resumes_after_its_last_event_id_none_lost_or_repeated(
    server: ApiServer,
) -> None:
    """Writers commit beside the stream (on PostgreSQL, event ids then become visible out of
    order); the client drops mid-way, more is written, and it comes back with its
    Last-Event-ID (and a stale `?after=0`, which the header outranks): every event once."""
    scene = Scenario(server)
    start = last_event_id(server)

    def write(count: int) -> list[str]:
        with concurrent.futures.ThreadPoolExecutor(4) as pool:
            return list(pool.map(lambda _: scene.queued(), range(count)))

    received: list[dict[str, Any]] = []
    with open_stream(server.client("auditor"), after=start) as stream:
        tasks = write(12)
        received += stream.events(5)
        # The last event taken (the parser may have read on into the chunk's next ones).
        resume = str(received[-1]["event_id"])
    tasks += write(12)
    wanted = {event["event_id"] for task in tasks for event in task_events(server, task)}
    with open_stream(server.client("auditor"), after=0, headers={"Last-Event-ID": resume}) as again:
        received += again.events(len(wanted) - len(received))
        again.idle_for(1)
    ids = [event["event_id"] for event in received]
    assert len(ids) == len(set(ids)), "an event was sent twice"
    assert set(ids) == wanted, "an event was lost"


def test_a_token_revoked_while_streaming_ends_the_stream(server: ApiServer) -> None:
    name = "watcher-" + secrets.token_hex(4)
    target = str(server.target)
    issued = json.loads(cli("--db", target, "token", "issue", name, "--role", "auditor"))
    client = server.client(token=issued["token"])
    with open_stream(client) as stream:
        stream.idle_for(1)
        cli("--db", target, "token", "revoke", name)
        # At most the revocation itself (committed between a check and a read) reaches it.
        late = stream.end(within=COMMENTS_BOUND)
        assert [m.event for m in late] in ([], ["API_TOKEN_REVOKED"])
    refused(client, 401, "UNAUTHENTICATED")


def test_serve_ends_open_streams_when_it_shuts_down(
    ledger_target: str | Path, tmp_path: Path
) -> None:
    """SIGTERM: the stream ends cleanly at once (uvicorn would otherwise wait out its grace
    period for it, then cut the connection mid-answer)."""
    with ServeProcess(
        ledger_target, *SERVE_FLAGS, role_tokens=True, log=tmp_path / "serve.log"
    ) as server:
        assert server.process is not None
        with open_stream(server.client("auditor")) as stream:
            stream.idle_for(1)
            server.process.terminate()
            stream.end(within=COMMENTS_BOUND)  # a dropped connection would raise here
        # After its graceful shutdown uvicorn raises again the signal it handled.
        assert server.process.wait(timeout=60) == -signal.SIGTERM
        assert "graceful shutdown exceeded" not in server.log()


def test_events_follow_over_the_api_resumes_after_a_dropped_connection(tmp_path: Path) -> None:
    """The follower's connection dies with its server (SIGKILL), events are written while it
    is down, the server comes back: every event of the ledger printed once, in order."""
    with ServeProcess(tmp_path / "ledger.db", "--stream-keepalive-seconds", KEEPALIVE) as server:
        token = server.token_file(tmp_path, "follower", "auditor")
        owner = server.issue("owner-x", "owner")
        api = ("--api", server.url, "--token-file", str(token))
        follower = subprocess.Popen(  # interrupted at the end, as Ctrl-C would
            interruptible([*CLI, "events", "--follow", "--after", "0", *api]),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        assert follower.stdout is not None
        printed: list[dict[str, Any]] = []

        def read_until(task_id: str) -> None:
            while not printed or printed[-1]["task_id"] != task_id:
                line = follower.stdout.readline()  # type: ignore[union-attr]
                assert line, follower.stderr.read()  # type: ignore[union-attr]
                printed.append(json.loads(line))

        def create(task_id: str) -> None:
            answer = server.client(token=owner).post(
                "/v1/tasks",
                json={
                    "idempotency_key": task_id,
                    "task": {"task_id": task_id, "goal": "g", "instructions": "i"},
                },
            )
            assert answer.status_code == 201, answer.text

        try:
            create("before-drop")
            read_until("before-drop")
            server.kill()
            with Database(server.db) as db:
                TaskLedger(database=db).create_task(
                    {"task_id": "while-down", "goal": "g", "instructions": "i"},
                    idempotency_key="while-down",
                )
            server.start()
            create("after-drop")
            read_until("after-drop")
        finally:
            follower.send_signal(signal.SIGINT)
            _, err = follower.communicate(timeout=60)
        assert follower.returncode == 130, err
        with Database(server.db) as db:
            every = db.read(
                lambda conn: fetch_all(conn, "events_after", {"after": 0, "limit": 10_000})
            )
        assert [event["event_id"] for event in printed] == [row["event_id"] for row in every]


def test_an_untyped_stream_sends_every_event_as_a_plain_message(server: ApiServer) -> None:
    """`?typed=false`: no `event:` field, so a browser's EventSource dispatches every event,
    of any type, to `onmessage`; the data (with its type), the ids, the resume by
    `Last-Event-ID` and the role check are the typed stream's."""
    scene = Scenario(server)
    auditor = server.client("auditor")
    refused(server.client("witness"), 403, "FORBIDDEN", typed="false")
    refused(auditor, 422, "FIELDS_INVALID", typed="no")
    start = last_event_id(server)
    task_id, _ = scene.claimed()
    wanted = task_events(server, task_id)

    def untyped(count: int, **options: Any) -> list[StreamedEvent]:
        with open_stream(auditor, typed="false", task_id=task_id, **options) as stream:
            while len(stream._ready) < count:
                assert not stream.ended
                stream._pull()
            return stream._ready

    messages = untyped(len(wanted), after=start)
    assert [(m.event, m.event_id(), m.document()) for m in messages] == [
        ("message", event["event_id"], event) for event in wanted
    ]
    resumed = untyped(len(wanted) - 1, headers={"Last-Event-ID": str(wanted[0]["event_id"])})
    assert [(m.event, m.document()) for m in resumed] == [("message", e) for e in wanted[1:]]
