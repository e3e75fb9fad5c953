"""The witness as a C2SP tlog-witness server (`witness --listen`, https://c2sp.org/tlog-witness)
on a real uvicorn: the spec's own example request, each of its statuses (403, 404, 400, 409
with the size as `text/x.tlog.size`, 422), and `serve --witness-url` pushing each checkpoint
it signs and storing the cosignature the witness answers."""

from __future__ import annotations

import base64
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from aios_ledger.core import LedgerError, Timestamp
from aios_ledger.core.log.merkle import Frontier, NodeId, consistency_proof, event_leaf_hash
from aios_ledger.core.proofs import (
    Checkpoint,
    VerifierKey,
    WitnessState,
    checkpoint_message,
    parse_note,
    signed_checkpoint,
    verified_cosignatures,
)
from aios_ledger.core.proofs.add_checkpoint import AddCheckpointRequest, decide_add_checkpoint
from aios_ledger.shell import Database
from aios_ledger.shell.proofs.checkpoints import sign_checkpoint
from aios_ledger.shell.proofs.keys import Signer, check_ed25519, read_key_file
from aios_ledger.shell.proofs.push import WitnessPush
from api_server import ApiServer, Scenario, free_port
from test_checkpoints_witness import PATIENCE, generate, run
from test_log_support import ROUND_ROBIN, build_log, tamper
from test_proofs_notes import SOFA_BODY, SOFA_LOG_LINE

# c2sp.org/tlog-witness, "add-checkpoint": the example request body, verbatim.
SPEC_PROOF = (
    "PlRNCrwHpqhGrupue0L7gxbjbMiKA9temvuZZDDpkaw=",
    "jrJZDmY8Y7SyJE0MWLpLozkIVMSMZcD5kvuKxPC3swk=",
    "5+pKlUdi2LeF/BcMHBn+Ku6yhPGNCswZZD1X/6QgPd8=",
    "/6WVhPs2CwSsb5rYBH5cjHV/wSmA79abXAwhXw3Kj/0=",
)
SPEC_SECOND_LINE = (
    "\u2014 example.com/behind-the-sofa opLqBQsREYCgu6xQkYQwJr9fo45a62DN9EdmHXnZdXNqlcVGlCum2Wks"
    "+49/V6267UEjw6QUXTS5Rovnzv++qbSzm9Q=\n"
)
SPEC_BODY = (
    "old 20852014\n"
    + "".join(line + "\n" for line in SPEC_PROOF)
    + "\n"
    + SOFA_BODY
    + "\n"
    + SOFA_LOG_LINE
    + SPEC_SECOND_LINE
).encode()
NOW = Timestamp.parse("2026-12-01T18:00:00.000Z")


def test_the_specs_example_body_parses_and_encodes_back() -> None:
    request = AddCheckpointRequest.parse(SPEC_BODY)
    assert request.old_size == 20852014
    assert [base64.b64encode(h).decode() for h in request.proof] == list(SPEC_PROOF)
    assert request.checkpoint.body() == SOFA_BODY and len(request.note.signatures) == 2
    assert request.body() == SPEC_BODY
    for broken in (
        SPEC_BODY.replace(b"old 20852014", b"old 020852014"),
        SPEC_BODY.replace(b"old 20852014\n", b""),
        SPEC_BODY.replace(SPEC_PROOF[0].encode(), b"not base64"),
        SPEC_BODY.replace(b"\n\nexample", b"\nexample"),
        b"old 0\n"
        + b"".join(SPEC_PROOF[0].encode() + b"\n" for _ in range(64))
        + b"\n"
        + (SOFA_BODY + "\n" + SOFA_LOG_LINE).encode(),
        b"\xff",
    ):
        with pytest.raises(LedgerError, match=r"^WITNESS_REQUEST_INVALID"):
            AddCheckpointRequest.parse(broken)


def _tree(count: int) -> tuple[Frontier, dict[NodeId, bytes]]:
    """A tree of `count` made-up leaves: its edge, and every node it stores."""
    frontier, nodes = Frontier(0), {}
    for number in range(count):
        frontier, stored = frontier.append([event_leaf_hash("sha256:" + f"{number:064x}")])
        nodes.update({item.node: item.hash for item in stored})
    return frontier, nodes


def test_the_witness_decides_as_the_spec_orders() -> None:
    small, _ = _tree(5)
    large, nodes = _tree(9)
    old = Checkpoint("log.example/a", 5, small.head().root)
    new = Checkpoint("log.example/a", 9, large.head().root)
    state = WitnessState(old.origin, old.size, old.root)
    proof = consistency_proof(5, 9, nodes)

    def request(
        old_size: int, hashes: tuple[bytes, ...], checkpoint: Checkpoint
    ) -> AddCheckpointRequest:
        note = parse_note(checkpoint.body() + "\n" + SOFA_LOG_LINE)
        return AddCheckpointRequest(old_size, hashes, note, checkpoint)

    plan = decide_add_checkpoint(state, request(5, proof, new), now=NOW)
    assert plan.state == WitnessState(new.origin, 9, new.root)
    assert decide_add_checkpoint(None, request(0, (), new), now=NOW).state.size == 9
    refusals = [
        (state, request(10, (), new), "WITNESS_REQUEST_INVALID"),  # old above the size
        (None, request(0, proof, new), "WITNESS_REQUEST_INVALID"),  # a proof from 0
        (state, request(0, (), new), "WITNESS_CONFLICT"),  # not the size cosigned
        (None, request(5, proof, new), "WITNESS_CONFLICT"),
        (state, request(5, proof[1:], new), "WITNESS_PROOF_INVALID"),
        (state, request(5, (), Checkpoint(old.origin, 5, b"\1" * 32)), "WITNESS_CONFLICT"),
    ]
    for last, asked, code in refusals:
        with pytest.raises(LedgerError, match=rf"^{code}"):
            decide_add_checkpoint(last, asked, now=NOW)


class WitnessServer:
    """`aios-ledger witness --listen` in a process of its own."""

    def __init__(self, root: Path, key_file: Path, *log_keys: VerifierKey) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.state = root / "witness-state"
        self.log_path = root / "witness.log"
        flags = [part for key in log_keys for part in ("--log-key", key.text())]
        with self.log_path.open("ab") as log:
            self.process = subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    "aios_ledger.shell.cli",
                    "witness",
                    "--listen",
                    f"127.0.0.1:{self.port}",
                    "--key",
                    str(key_file),
                    "--state",
                    str(self.state),
                    *flags,
                ],
                stdout=log,
                stderr=log,
                start_new_session=True,
            )
        deadline = time.monotonic() + PATIENCE
        while True:
            assert self.process.poll() is None, self.log_path.read_text()
            try:
                httpx.get(self.url + "/add-checkpoint", timeout=1.0)
                return
            except httpx.TransportError:
                assert time.monotonic() < deadline, self.log_path.read_text()
                time.sleep(0.05)

    def add(self, body: bytes) -> httpx.Response:
        return httpx.post(self.url + "/add-checkpoint", content=body, timeout=30)

    def stop(self) -> None:
        if self.process.poll() is None:
            os.kill(self.process.pid, signal.SIGTERM)
            self.process.wait(timeout=20)


@pytest.fixture
def witness_key(tmp_path: Path) -> tuple[Path, VerifierKey]:
    return generate(tmp_path, "witness.example/w1")


def _signed(signer: Signer, checkpoint: Checkpoint) -> str:
    signature = signer.sign(checkpoint_message(checkpoint))
    return signed_checkpoint(checkpoint, signer.verifier, signature).encode()


def _body(old: int, proof: tuple[bytes, ...], note: str) -> bytes:
    parsed = parse_note(note)
    return AddCheckpointRequest(old, proof, parsed, Checkpoint.parse(parsed.text)).body()


def test_the_witness_server_answers_the_specs_statuses(
    tmp_path: Path, witness_key: tuple[Path, VerifierKey]
) -> None:
    key_file, witness = witness_key
    _, sofa = generate(tmp_path, "example.com/behind-the-sofa")
    log_file, log = generate(tmp_path, "log.example/a")
    server = WitnessServer(tmp_path, key_file, sofa, log)
    try:
        # The spec's example: its origin is witnessed here, but under another key (the spec
        # publishes none), so no signature on it is one this witness trusts.
        refused = server.add(SPEC_BODY)
        assert refused.status_code == 403, refused.text
        unknown = server.add(SPEC_BODY.replace(b"behind-the-sofa\n2", b"under-the-bed\n2"))
        assert unknown.status_code == 404, unknown.text
        signer = read_key_file(log_file)
        small, _ = _tree(5)
        large, nodes = _tree(9)
        first = _signed(signer, Checkpoint(log.name, 5, small.head().root))
        grown = _signed(signer, Checkpoint(log.name, 9, large.head().root))
        # First sight: old 0, no proof; the answer is a cosignature line on the checkpoint.
        answer = server.add(_body(0, (), first))
        assert answer.status_code == 200, answer.text
        assert answer.text.startswith("\u2014 witness.example/w1 ") and answer.text.endswith("\n")
        cosigned = parse_note(first + answer.text)
        assert len(verified_cosignatures(cosigned, [witness], check_ed25519)) == 1
        # A client that does not know the witness's size learns it from a 409.
        conflict = server.add(_body(0, (), grown))
        assert conflict.status_code == 409
        assert conflict.headers["content-type"].startswith("text/x.tlog.size")
        assert conflict.text == "5\n"
        bad_proof = consistency_proof(5, 9, nodes)[1:]
        assert server.add(_body(5, bad_proof, grown)).status_code == 422
        assert server.add(_body(10, (), grown)).status_code == 400
        assert server.add(b"old 5\n").status_code == 400
        extended = server.add(_body(5, consistency_proof(5, 9, nodes), grown))
        assert extended.status_code == 200, extended.text
        # The rollback the spec warns of is refused: the witness is at 9 now.
        assert server.add(_body(5, consistency_proof(5, 9, nodes), grown)).text == "9\n"
        forked = _signed(signer, Checkpoint(log.name, 9, b"\2" * 32))
        assert server.add(_body(9, (), forked)).status_code == 409
    finally:
        server.stop()


@pytest.fixture
def pushing(
    tmp_path: Path, witness_key: tuple[Path, VerifierKey]
) -> Iterator[tuple[ApiServer, WitnessServer, VerifierKey, VerifierKey]]:
    key_file, witness = witness_key
    log_file, log = generate(tmp_path, "ledger.example/main")
    server_witness = WitnessServer(tmp_path, key_file, log)
    flags = (
        "--checkpoint-key",
        str(log_file),
        "--checkpoint-every-events",
        "1",
        "--witness-key",
        witness.text(),
        "--witness-url",
        server_witness.url,
    )
    try:
        with ApiServer(tmp_path / "ledger.db", *flags, role_tokens=True) as server:
            yield server, server_witness, log, witness
    finally:
        server_witness.stop()


def test_serve_pushes_each_checkpoint_and_stores_the_cosignature(
    pushing: tuple[ApiServer, WitnessServer, VerifierKey, VerifierKey],
) -> None:
    server, witness_server, log, witness = pushing
    scenario = Scenario(server)
    token = server.tokens["owner"]
    # Each round's task grows the log, so each round needs a checkpoint larger than the last
    # one cosigned: one checkpoint cosigned three times over would not do.
    cosigned_sizes: list[int] = [0]
    for _round in range(3):
        scenario.queued()
        deadline = time.monotonic() + PATIENCE
        while True:
            served = httpx.get(
                f"{server.url}/v1/checkpoint", headers={"Authorization": f"Bearer {token}"}
            ).text
            note = parse_note(served)
            size = Checkpoint.parse(note.text).size
            if size > cosigned_sizes[-1] and verified_cosignatures(note, [witness], check_ed25519):
                cosigned_sizes.append(size)
                break
            assert time.monotonic() < deadline, (server.log(), witness_server.log_path.read_text())
            time.sleep(0.1)
    # The witness kept the log's state: the size it cosigned last is the served checkpoint's.
    (kept,) = witness_server.state.glob("log-*.json")
    assert f'"size": {size}' in kept.read_text()
    assert Checkpoint.parse(note.text).origin == log.name
    # The server holds its stored checkpoints to its tree and to the key it signs with, and
    # the cosignatures it stored to the keys of the witnesses it accepts.
    audit = {"Authorization": f"Bearer {server.tokens['auditor']}"}
    report = httpx.get(f"{server.url}/v1/log/verify", headers=audit, timeout=60).json()
    assert report["intact"], report["findings"]
    assert report["checkpoint_signatures_checked"] == report["checkpoints_checked"] >= 3
    assert report["cosignatures_checked"] >= 3


def test_a_restarted_push_resumes_from_the_stored_cosignatures(
    tmp_path: Path, witness_key: tuple[Path, VerifierKey]
) -> None:
    """A server restarted (a new push, knowing nothing) sends, as its first old size, the size
    of the last checkpoint the ledger stored the witness's cosignature on: no 409 round trip.
    With no stored cosignature to resume from, the witness's 409 still tells it."""
    key_file, witness = witness_key
    log_file, log = generate(tmp_path, "ledger.example/main")
    signer = read_key_file(log_file)
    path = tmp_path / "ledger.db"
    witness_server = WitnessServer(tmp_path, key_file, log)
    try:
        build_log(path, ROUND_ROBIN[:5])
        with Database(path) as db:
            first = WitnessPush([witness_server.url], [witness])
            assert first.push(db, sign_checkpoint(db, signer, NOW), NOW) == 1
            assert first.conflicts == 0  # the witness had cosigned nothing: old 0 was right
        build_log(path, ROUND_ROBIN[5:8], start=5)
        with Database(path) as db:
            restarted = WitnessPush([witness_server.url], [witness])
            assert restarted.push(db, sign_checkpoint(db, signer, NOW), NOW) == 1
            assert (restarted.conflicts, restarted.cosigned[witness_server.url]) == (0, 8)
        build_log(path, ROUND_ROBIN[8:10], start=8)
        tamper(path, ("DELETE FROM checkpoint_cosignatures", ()))
        with Database(path) as db:
            blind = WitnessPush([witness_server.url], [witness])
            assert blind.push(db, sign_checkpoint(db, signer, NOW), NOW) == 1
            assert (blind.conflicts, blind.cosigned[witness_server.url]) == (1, 10)
    finally:
        witness_server.stop()


def test_the_witness_pulls_or_serves_never_both(tmp_path: Path) -> None:
    key_file, witness = generate(tmp_path, "witness.example/w1")
    common = ["--log-key", witness.text(), "--key", str(key_file), "--state", str(tmp_path)]
    for mode in ([], ["--log", "http://127.0.0.1:1", "--listen", "127.0.0.1:0"]):
        refused = run("witness", *mode, *common)
        assert refused.returncode == 2 and refused.stderr.startswith("USAGE_INVALID"), refused
    two_keys = run("witness", "--log", "http://127.0.0.1:1", *common, "--log-key", witness.text())
    assert two_keys.stderr.startswith("USAGE_INVALID")
