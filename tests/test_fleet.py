"""A fleet: two real `serve` processes on one PostgreSQL ledger. Both sign checkpoints on a
short schedule while tasks are created through each, and signers take turns, so no tree size
ever has two different checkpoints; a long poll and an event stream on one server are woken by
creates through the other (the LISTEN/NOTIFY tests/test_notify.py checks within one process).
And, on both engines, a signer that starts while another signs waits for the other's turn.
"""

from __future__ import annotations

import codecs
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import attrs
import httpx
import pytest
from aios_ledger.core import Timestamp
from aios_ledger.core.api.event_stream import StreamParser
from aios_ledger.core.proofs.checkpoints import CheckpointRow
from aios_ledger.shell import issue_token
from aios_ledger.shell.db.connection import Database
from aios_ledger.shell.db.merkle import current_tree_head, integrate
from aios_ledger.shell.proofs.checkpoints import (
    ServedCheckpoint,
    latest_checkpoint,
    sign_checkpoint,
)
from aios_ledger.shell.proofs.keys import Signer, parse_signer
from api_server import Scenario, ServeProcess
from conftest import both_engines, ledger_schema_url
from test_checkpoints_witness import generate
from test_proofs_notes import PETER_SKEY

pytest_generate_tests = both_engines

PATIENCE = 60.0  # seconds; a bound on waiting for the servers, never a speed assertion
CREATES_PER_SERVER = 12
# How long a second signer is watched while the first is mid-signature: it must wait for the
# first signer's turn, so it never finishes within it.
WAITING = 0.5
NOW = Timestamp.parse("2026-12-01T00:00:00.000Z")


@attrs.frozen(repr=False)
class InterleavedSigner(Signer):
    """A signer that runs `meanwhile` as it signs, where another signer may overtake it."""

    meanwhile: Callable[[], None]

    def sign(self, message: bytes) -> bytes:
        self.meanwhile()
        return super().sign(message)


def _stored_checkpoints_of(db: Database) -> list[CheckpointRow]:
    return db.read(
        lambda conn: list(conn.stream_records("verify_checkpoints", None, CheckpointRow))
    )


def _stored_checkpoints(url: str) -> list[CheckpointRow]:
    with Database(url) as db:
        return _stored_checkpoints_of(db)


def _fleet(url: str, tmp_path: Path, key: Path) -> tuple[ServeProcess, ServeProcess]:
    # A schedule far shorter than a create, so that both servers sign the same sizes at once;
    # a waiting claim never re-checks on its own, nor an event stream reads the log's head or
    # sends a keep-alive (which reads on too), so only a notification wakes them.
    flags = (
        *("--checkpoint-key", str(key), "--checkpoint-every-seconds", "0.05"),
        *("--recheck-seconds", "600"),
        *("--stream-poll-seconds", "3600", "--stream-keepalive-seconds", "3600"),
    )
    first = ServeProcess(url, *flags, role_tokens=True, log=tmp_path / "first.log")
    try:
        second = ServeProcess(url, *flags, log=tmp_path / "second.log")
    except BaseException:
        first.stop()
        raise
    second.tokens = dict(first.tokens)
    return first, second


def _streamed_task_ids(response: httpx.Response) -> Iterator[str]:
    """The task of each event an open event stream sends, as it comes."""
    parser = StreamParser()
    text = codecs.getincrementaldecoder("utf-8")()
    for chunk in response.iter_bytes():
        for message in parser.feed_text(text.decode(chunk)):
            document = message.document()
            assert isinstance(document, dict)
            yield str(document.get("task_id"))


def _assert_stream_woken_across(watched: ServeProcess, other: ServeProcess) -> None:
    """Tasks created through `other` come on an event stream of `watched`, one after another:
    each create is sent only once the previous task's event came, when the stream waits for
    its server's next announcement."""
    creator = Scenario(other)
    stream = watched.client("auditor")
    with stream.stream("GET", "/v1/events/stream", timeout=PATIENCE) as response:
        assert response.status_code == 200, response.read()
        arriving = _streamed_task_ids(response)
        for _ in range(2):
            task_id = creator.queued()
            assert next(task for task in arriving if task == task_id)


def test_two_servers_never_sign_two_checkpoints_of_one_size_and_wake_each_others_polls(
    postgres_database: str | None, tmp_path: Path
) -> None:
    url = ledger_schema_url(postgres_database)
    key, _verifier = generate(tmp_path, "fleet.example/log")
    first, second = _fleet(url, tmp_path, key)
    try:
        creators = [Scenario(first), Scenario(second)]
        for _round in range(CREATES_PER_SERVER):
            for scenario in creators:
                scenario.queued()
        with Database(url) as db:
            size = current_tree_head(db).size
        deadline = time.monotonic() + PATIENCE
        while not any(row.tree_size == size for row in _stored_checkpoints(url)):
            assert time.monotonic() < deadline, "no checkpoint of the final tree was signed"
            time.sleep(0.05)
        stored = _stored_checkpoints(url)
        notes_by_size: dict[int, set[str]] = {}
        for row in stored:
            notes_by_size.setdefault(row.tree_size, set()).add(row.note)
        assert all(len(notes) == 1 for notes in notes_by_size.values()), notes_by_size
        assert len(stored) == len(notes_by_size)  # nor the same one stored twice
        in_signing_order = sorted(stored, key=lambda row: row.checkpoint_id)
        sizes = [row.tree_size for row in in_signing_order]
        assert sizes == sorted(sizes)  # a stale head is never signed after a larger one

        poller, creator = Scenario(second), Scenario(first)
        creator.cap = poller.cap
        answers: list[httpx.Response] = []
        body = {"capabilities": [poller.cap], "lease_seconds": 60, "wait_seconds": 30}
        waiter = threading.Thread(
            target=lambda: answers.append(poller.agent.post("/v1/claims", json=body))
        )
        waiter.start()
        auditor = second.client("auditor")
        while "aios_ledger_waiting_claims 1.0" not in auditor.get("/metrics").text:
            assert waiter.is_alive()
        task_id = creator.queued()
        waiter.join(timeout=PATIENCE)
        (answer,) = answers
        assert answer.status_code == 200, answer.text
        assert answer.json()["task_id"] == task_id

        _assert_stream_woken_across(first, second)
    finally:
        second.stop()
        first.stop()


@pytest.mark.parametrize("grows", [True, False], ids=["log-grown", "same-head"])
def test_a_second_signer_waits_for_the_first_signers_turn(
    ledger_target: str | Path, grows: bool
) -> None:
    """While one signer signs, another (after growing the log, or not) signs too: it waits for
    the first's turn, so the larger head is stored after the smaller, and the same head is
    stored once."""
    plain = parse_signer(PETER_SKEY)
    with Database(ledger_target) as first_db, Database(ledger_target) as second_db:
        second_signed: list[ServedCheckpoint] = []
        waited: list[bool] = []

        def overtake() -> None:
            if grows:
                issue_token(second_db, "someone", ["agent"])  # an event: the tree grows
                integrate(second_db)  # once integrated (PostgreSQL's writes leave it to one)
            second_signed.append(sign_checkpoint(second_db, plain, NOW))

        overtaking = threading.Thread(target=overtake)

        def meanwhile() -> None:
            if overtaking.ident is None:  # the first signature only, not a retry's
                overtaking.start()
                overtaking.join(WAITING)
                waited.append(overtaking.is_alive())

        signer = InterleavedSigner(plain.verifier, plain._private, meanwhile)
        first = sign_checkpoint(first_db, signer, NOW)
        overtaking.join(PATIENCE)
        assert not overtaking.is_alive()
        assert waited == [True]
        (second,) = second_signed
        stored = sorted(_stored_checkpoints_of(first_db), key=lambda row: row.checkpoint_id)
        if grows:
            assert second.row.tree_size == first.row.tree_size + 1
            assert [row.checkpoint_id for row in stored] == [
                first.row.checkpoint_id,
                second.row.checkpoint_id,
            ]
        else:
            assert second == first
            assert [row.checkpoint_id for row in stored] == [first.row.checkpoint_id]
        assert latest_checkpoint(first_db) == second
