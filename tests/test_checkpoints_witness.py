"""Signed checkpoints and a witness, end to end: `key generate`, `checkpoint`, the server
`serve` runs publishing and signing checkpoints, and `aios-ledger witness` cosigning them,
refusing a rewritten history that the ledger's own key re-signed."""

from __future__ import annotations

import json
import os
import shutil
import stat
import time
from pathlib import Path

import httpx
import pytest
from aios_ledger.core import LedgerError, Timestamp
from aios_ledger.core.proofs import (
    Checkpoint,
    VerifierKey,
    checkpoint_message,
    cosignature,
    cosignature_message,
    open_checkpoint,
    parse_note,
    signed_checkpoint,
    verified_cosignatures,
)
from aios_ledger.shell import Database, issue_token
from aios_ledger.shell.db.merkle import current_tree_head, integrate
from aios_ledger.shell.proofs.checkpoints import (
    add_cosignatures,
    latest_checkpoint,
    sign_checkpoint,
)
from aios_ledger.shell.proofs.keys import check_ed25519, parse_signer
from api_server import ApiServer, Scenario, cli
from cli_runner import CliResult, run_cli
from conftest import both_engines
from test_proofs_notes import ENOCH_VKEY, PETER_SKEY, WIT1_SKEY

pytest_generate_tests = both_engines

PATIENCE = 60.0  # seconds: a bound on waiting for the periodic signer, never a speed assertion


def run(*args: str, env: dict[str, str] | None = None) -> CliResult:
    return run_cli(*args, env=env)


def generate(tmp_path: Path, name: str) -> tuple[Path, VerifierKey]:
    path = tmp_path / f"{name.replace('/', '_')}.key"
    printed = json.loads(cli("key", "generate", "--name", name, "--out", str(path)))
    return path, VerifierKey.parse(printed["verifier_key"])


def test_key_generate_writes_a_private_file_and_never_overwrites_it(tmp_path: Path) -> None:
    path, verifier = generate(tmp_path, "ledger.example/main")
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert path.read_text().startswith("PRIVATE+KEY+ledger.example/main+")
    assert verifier.name == "ledger.example/main"
    again = run("key", "generate", "--name", "other", "--out", str(path))
    assert again.returncode != 0 and again.stderr.startswith("KEY_FILE_EXISTS")
    refused = run("key", "generate", "--name", "has space", "--out", str(tmp_path / "x"))
    assert refused.stderr.startswith("NOTE_KEY_INVALID") and not (tmp_path / "x").exists()


def test_checkpoint_signs_the_tree_head_and_stores_it(tmp_path: Path) -> None:
    db = tmp_path / "ledger.db"
    cli("--db", str(db), "init")
    key, verifier = generate(tmp_path, "ledger.example/main")
    note = cli("--db", str(db), "checkpoint", "--key", str(key))
    opened = open_checkpoint(note, verifier, check_ed25519)
    with Database(db) as opened_db:
        head = current_tree_head(opened_db)
    assert opened.checkpoint == Checkpoint("ledger.example/main", head.size, head.root)
    # The same head is not signed twice: the stored checkpoint is printed again.
    first = json.loads(cli("--db", str(db), "checkpoint", "--key", str(key), "--json"))
    assert first["note"] == note and first["checkpoint_id"] == 1
    # Without a key file, the systemd credential named in [checkpoint] credential.
    credentials = tmp_path / "credentials"
    credentials.mkdir()
    shutil.copy(key, credentials / "aios-ledger-checkpoint-key")
    env = {**os.environ, "CREDENTIALS_DIRECTORY": str(credentials)}
    assert run("--db", str(db), "checkpoint", env=env).stdout == note
    missing = run("--db", str(db), "checkpoint", env={**os.environ, "CREDENTIALS_DIRECTORY": ""})
    assert missing.returncode != 0 and missing.stderr.startswith("CHECKPOINT_KEY_MISSING")
    # Offline, with the public key alone: the size and the root a proof is checked against.
    saved = tmp_path / "checkpoint.txt"
    saved.write_text(note)
    checked = json.loads(cli("verify-checkpoint", str(saved), "--log-key", verifier.text()))
    assert (checked["size"], checked["root"]) == (head.size, head.root.hex())
    assert checked["cosigned_by"] == []
    _, witness = generate(tmp_path, "witness.example/w1")
    absent = run(
        "verify-checkpoint",
        str(saved),
        "--log-key",
        verifier.text(),
        "--witness-key",
        witness.text(),
    )
    assert absent.stderr.startswith("COSIGNATURE_MISSING")
    saved.write_text(note.replace(f"\n{head.size}\n", f"\n{head.size + 1}\n"))
    forged = run("verify-checkpoint", str(saved), "--log-key", verifier.text())
    assert forged.returncode != 0 and forged.stderr.startswith("NOTE_SIGNATURE_INVALID")


def _served(server: ApiServer, token: str) -> tuple[str, Checkpoint]:
    answer = httpx.get(f"{server.url}/v1/checkpoint", headers={"Authorization": f"Bearer {token}"})
    assert answer.status_code == 200, answer.text
    assert answer.headers["content-type"].startswith("text/plain")
    return answer.text, Checkpoint.parse(parse_note(answer.text).text)


def _wait_for_size(server: ApiServer, token: str, at_least: int) -> tuple[str, Checkpoint]:
    deadline = time.monotonic() + PATIENCE
    while True:
        note, checkpoint = _served(server, token)
        if checkpoint.size >= at_least:
            return note, checkpoint
        assert time.monotonic() < deadline, f"no checkpoint of {at_least}: {server.log()}"
        time.sleep(0.1)


def _witness(
    server: ApiServer, log_key: VerifierKey, key: Path, state: Path, token: str
) -> CliResult:
    return run(
        "witness",
        "--log",
        server.url,
        "--log-key",
        log_key.text(),
        "--key",
        str(key),
        "--state",
        str(state),
        "--once",
        env={**os.environ, "AIOS_LEDGER_TOKEN": token},  # a token never on a command line
    )


def test_a_witness_cosigns_a_growing_log_and_refuses_a_rewritten_one(tmp_path: Path) -> None:
    db = tmp_path / "ledger.db"
    log_key_file, log_key = generate(tmp_path, "ledger.example/main")
    witness_key_file, witness_key = generate(tmp_path, "witness.example/w1")
    state = tmp_path / "witness-state"
    flags = (
        "--checkpoint-key",
        str(log_key_file),
        "--checkpoint-every-events",
        "1",
        "--witness-key",
        witness_key.text(),
    )
    with ApiServer(db, *flags, role_tokens=True) as server:
        token = server.issue("w1", "witness")
        scenario = Scenario(server)
        scenario.queued()
        _, first = _wait_for_size(server, token, 1)
        done = _witness(server, log_key, witness_key_file, state, token)
        assert done.returncode == 0, done.stderr
        first_size = json.loads(done.stdout)["size"]
        assert first_size >= first.size
        # The log grows; the next round proves the new checkpoint extends the one cosigned.
        for _ in range(3):
            scenario.queued()
        _, grown = _wait_for_size(server, token, first.size + 3)
        done = _witness(server, log_key, witness_key_file, state, token)
        assert done.returncode == 0, done.stderr
        answer = json.loads(done.stdout)
        assert answer["previous_size"] == first_size and answer["size"] >= grown.size
        served, now = _served(server, token)
        cosigned = parse_note(served)
        assert open_checkpoint(served, log_key, check_ed25519).checkpoint == now
        assert len(verified_cosignatures(cosigned, [witness_key], check_ed25519)) == 1
        assert served.endswith(answer["cosignature"])
        kept = json.loads(next(state.iterdir()).read_text())
        assert kept["size"] == now.size
        saved = tmp_path / "cosigned.txt"
        saved.write_text(served)
        checked = json.loads(
            cli(
                "verify-checkpoint",
                str(saved),
                "--log-key",
                log_key.text(),
                "--witness-key",
                witness_key.text(),
            )
        )
        assert [signer["name"] for signer in checked["cosigned_by"]] == ["witness.example/w1"]
        # A witness token reads checkpoints and nothing of the ledger's own.
        tasks = httpx.get(f"{server.url}/v1/tasks", headers={"Authorization": f"Bearer {token}"})
        assert tasks.status_code == 403
        # A cosignature no configured witness made is refused, and nothing is stored.
        stranger_file, _ = generate(tmp_path, "stranger.example/w")
        stranger_state = tmp_path / "stranger-state"
        refused = _witness(server, log_key, stranger_file, stranger_state, token)
        assert refused.returncode != 0 and refused.stderr.startswith("WITNESS_UNKNOWN")
        assert _served(server, token)[0] == served
        cosigned_size = now.size

    # The operator rewrites history: the ledger as it was before the witness's first
    # cosignature is gone, another history of more events takes its place, and the ledger's own
    # key signs it. Every signature on it verifies; only the witness can tell.
    rewritten = tmp_path / "rewritten.db"
    cli("--db", str(rewritten), "init")
    with ApiServer(rewritten, *flags, port=server.port, role_tokens=True) as forged:
        forged_token = forged.issue("w1", "witness")
        other = Scenario(forged)
        while _served(forged, forged_token)[1].size <= cosigned_size:
            other.queued()
        forged_note, forged_checkpoint = _wait_for_size(forged, forged_token, cosigned_size + 1)
        assert open_checkpoint(forged_note, log_key, check_ed25519).checkpoint == forged_checkpoint
        refused = _witness(forged, log_key, witness_key_file, state, forged_token)
        assert refused.returncode != 0
        assert refused.stderr.startswith("CHECKPOINT_INCONSISTENT"), refused.stderr
        # It cosigned nothing, and still holds the checkpoint of the history it saw.
        assert _served(forged, forged_token)[0].count("\u2014 ") == 1
        assert json.loads(next(state.iterdir()).read_text())["size"] == cosigned_size


def test_a_rollback_is_refused(tmp_path: Path) -> None:
    """A ledger that serves a smaller tree than one the witness cosigned (a restored backup)."""
    db = tmp_path / "ledger.db"
    log_key_file, log_key = generate(tmp_path, "ledger.example/main")
    witness_key_file, witness_key = generate(tmp_path, "witness.example/w1")
    state = tmp_path / "state"
    flags = (
        *("--checkpoint-key", str(log_key_file), "--checkpoint-every-events", "1"),
        *("--witness-key", witness_key.text()),
    )
    cli("--db", str(db), "init")
    backup = tmp_path / "backup.db"
    with ApiServer(db, *flags, role_tokens=True) as server:
        token = server.issue("w1", "witness")
        server.stop()  # a backup of the ledger at rest, as a backup tool takes it
        for suffix in ("", "-wal"):
            if Path(str(db) + suffix).exists():
                shutil.copy(str(db) + suffix, str(backup) + suffix)
        server.start()
        with Database(backup) as backed_up:
            backup_size = current_tree_head(backed_up).size
        Scenario(server).queued()
        _wait_for_size(server, token, backup_size + 1)
        assert _witness(server, log_key, witness_key_file, state, token).returncode == 0
    with ApiServer(backup, *flags, port=server.port) as restored:
        # The backup holds the witness's token already: issuing one would grow the log.
        refused = _witness(restored, log_key, witness_key_file, state, token)
        assert refused.stderr.startswith("CHECKPOINT_ROLLBACK"), refused.stderr


@pytest.mark.parametrize("body", [{"note": "not a note"}, {"note": "a\n\n\u2014 x AAAAAAA=\n"}])
def test_a_malformed_cosignature_is_refused_with_its_code(tmp_path: Path, body: object) -> None:
    log_key_file, _ = generate(tmp_path, "ledger.example/main")
    _, witness_key = generate(tmp_path, "witness.example/w1")
    flags = ("--checkpoint-key", str(log_key_file), "--checkpoint-every-events", "1")
    with ApiServer(tmp_path / "l.db", *flags, "--witness-key", witness_key.text()) as server:
        token = server.issue("w1", "witness")
        answer = server.client(token=token).post("/v1/checkpoint/cosignatures", json=body)
        assert answer.status_code == 422, answer.text
        assert answer.json()["code"] in {"NOTE_INVALID", "CHECKPOINT_INVALID"}


def test_checkpoints_and_cosignatures_are_stored_on_both_engines(
    ledger_target: str | Path, tmp_path: Path
) -> None:
    """The store itself, on SQLite and PostgreSQL: sign, serve the latest (and one of a size),
    take a cosignature (one line per witness key, the later replacing the earlier), refuse
    what no stored checkpoint or no known witness signed, and leave the rows as they were."""
    log = parse_signer(PETER_SKEY)
    witness = parse_signer(WIT1_SKEY)
    with Database(ledger_target) as db:
        first = sign_checkpoint(db, log, Timestamp.parse("2026-12-01T00:00:00.000Z"))
        assert sign_checkpoint(db, log, Timestamp.parse("2026-12-01T00:00:01.000Z")) == first
        issue_token(db, "someone", ["agent"])  # an event: the tree grows once integrated
        integrate(db)
        second = sign_checkpoint(db, log, Timestamp.parse("2026-12-01T00:00:02.000Z"))
        assert second.row.tree_size == first.row.tree_size + 1
        assert latest_checkpoint(db) == second
        assert latest_checkpoint(db, first.row.tree_size) == first
        body = parse_note(first.note).text
        cosigned = []
        for at in (10, 11):
            line = cosignature(witness.verifier, at, witness.sign(cosignature_message(body, at)))
            cosigned.append(line)
            note = parse_note(first.note).with_signature(line).encode()
            now = Timestamp.parse("2026-12-01T00:00:03.000Z")
            stored = add_cosignatures(db, note, [witness.verifier], now)
        assert stored.note == first.note + cosigned[1].line()
        assert latest_checkpoint(db, first.row.tree_size).note == stored.note
        with pytest.raises(LedgerError, match="WITNESS_UNKNOWN"):
            add_cosignatures(db, stored.note, [VerifierKey.parse(ENOCH_VKEY)], now)
        forged = Checkpoint(log.verifier.name, 999, bytes(32))
        forged_note = signed_checkpoint(forged, log.verifier, log.sign(checkpoint_message(forged)))
        line = cosignature(
            witness.verifier, 12, witness.sign(cosignature_message(forged.body(), 12))
        )
        with pytest.raises(LedgerError, match="CHECKPOINT_NOT_FOUND"):
            add_cosignatures(db, forged_note.with_signature(line).encode(), [witness.verifier], now)
        assert latest_checkpoint(db) == second
    with Database(tmp_path / "empty.db") as empty, pytest.raises(LedgerError, match="NOT_FOUND"):
        latest_checkpoint(empty)


def test_serve_signs_every_n_seconds_and_needs_a_key_to(tmp_path: Path) -> None:
    db = tmp_path / "ledger.db"
    key, verifier = generate(tmp_path, "ledger.example/main")
    flags = ("--checkpoint-key", str(key), "--checkpoint-every-seconds", "0.2")
    with ApiServer(db, *flags, role_tokens=True) as server:
        token = server.issue("w1", "witness")
        _, started = _wait_for_size(server, token, 0)
        Scenario(server).queued()
        note, later = _wait_for_size(server, token, started.size + 1)
        assert open_checkpoint(note, verifier, check_ed25519).checkpoint == later
    no_key = run(
        "--db",
        str(db),
        "serve",
        "--checkpoint-every-events",
        "5",
        env={**os.environ, "CREDENTIALS_DIRECTORY": ""},
    )
    assert no_key.returncode != 0 and "CHECKPOINT_KEY_MISSING" in no_key.stderr
