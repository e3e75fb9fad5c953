"""`verify` holds the checkpoints the ledger stored to its own tree, on both engines: each
one's root is the root of the stored leaves at its size, its note says what its row says, and
it verifies under the ledger's key when the verifier knows it. A root edited, a tree rewritten
or cut short under a signed checkpoint, and a note the ledger's key did not sign are findings
by checkpoint id."""

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import Any

import pytest
from aios_ledger.core import Timestamp
from aios_ledger.core.proofs import (
    Checkpoint,
    SignerKey,
    VerifierKey,
    checkpoint_message,
    cosignature,
    cosignature_message,
    cosigned_note,
    parse_note,
    signed_checkpoint,
)
from aios_ledger.shell.db.connection import Database
from aios_ledger.shell.db.merkle import current_tree_head
from aios_ledger.shell.log.verification import verify_log
from aios_ledger.shell.proofs.checkpoints import add_cosignatures, sign_checkpoint
from aios_ledger.shell.proofs.keys import (
    Signer,
    generate_signer_key,
    parse_signer,
    signer_from_key,
)
from cli_runner import CliResult, run_cli
from conftest import both_engines, is_postgres
from test_log_support import ROUND_ROBIN, build_log, raw_rows, tamper
from test_proofs_notes import PETER_SKEY, PETER_VKEY

pytest_generate_tests = both_engines

NOW = Timestamp.parse("2026-08-20T00:00:00.000Z")
LEDGER_KEY = VerifierKey.parse(PETER_VKEY)
MERKLE_TRIGGERS = (
    "merkle_leaves_refuse_update",
    "merkle_leaves_refuse_delete",
)


def _signer() -> Signer:
    return parse_signer(PETER_SKEY)


def _sign_three(path: Path) -> Path:
    """A log with three checkpoints: the empty tree, 5 leaves, then every event's."""
    with Database(path) as db:
        sign_checkpoint(db, _signer(), NOW)
    build_log(path, ROUND_ROBIN[:5])
    with Database(path) as db:
        sign_checkpoint(db, _signer(), NOW)
    build_log(path, ROUND_ROBIN[5:], start=5)
    with Database(path) as db:
        sign_checkpoint(db, _signer(), NOW)
    return path


@pytest.fixture
def signed(ledger_target: Path) -> Path:
    return _sign_three(ledger_target)


def _ids(path: Path) -> list[str]:
    """The stored checkpoints' ids, oldest first (a reused PostgreSQL schema's do not start
    at 1), as findings name them."""
    return [
        str(row[0])
        for row in raw_rows(path, "SELECT checkpoint_id FROM checkpoints ORDER BY checkpoint_id")
    ]


def _report(path: Path, keys: tuple[VerifierKey, ...] = (LEDGER_KEY,)) -> dict[str, Any]:
    with Database(path) as db:
        return verify_log(db, checkpoint_keys=keys).public()


def _checkpoint_findings(report: dict[str, Any]) -> list[tuple[str, str]]:
    """The checkpoints' findings, in the checkpoints' order: their keys are ids, compared as
    numbers (a reused PostgreSQL schema's ids may run from 9 to 10, and "10" < "9")."""
    return sorted(
        (
            (finding["code"], finding["key"])
            for finding in report["findings"]
            if finding.get("table") == "checkpoints"
        ),
        key=lambda found: (found[0], int(found[1])),
    )


def _drop_merkle_triggers(path: Path) -> None:
    if not is_postgres(path):
        import sqlite3

        con = sqlite3.connect(path)
        for trigger in MERKLE_TRIGGERS:
            con.execute(f"DROP TRIGGER IF EXISTS {trigger}")
        con.commit()
        con.close()


def test_stored_checkpoints_hold_to_the_tree_and_verify(signed: Path) -> None:
    sizes = raw_rows(signed, "SELECT tree_size FROM checkpoints ORDER BY checkpoint_id")
    assert sizes == [(0,), (5,), (len(ROUND_ROBIN),)]
    report = _report(signed)
    assert report["intact"], report["findings"]
    assert (report["checkpoints_checked"], report["checkpoint_signatures_checked"]) == (3, 3)
    # Without the ledger's key the roots are still held to the tree; no signature is checked.
    unkeyed = _report(signed, ())
    assert unkeyed["intact"]
    assert (unkeyed["checkpoints_checked"], unkeyed["checkpoint_signatures_checked"]) == (3, 0)


WITNESS = generate_signer_key("witness.example/w1")
OTHER_WITNESS = generate_signer_key("witness.example/w2")
COSIGNED_AT = 1_787_000_000


def _cosign_all(path: Path, *witnesses: SignerKey) -> None:
    """Each stored checkpoint cosigned by each witness, stored as `POST
    /v1/checkpoint/cosignatures` stores them."""
    signers = [signer_from_key(key) for key in witnesses]
    verifiers = [signer.verifier for signer in signers]
    with Database(path) as db:
        for (note,) in raw_rows(path, "SELECT note FROM checkpoints ORDER BY checkpoint_id"):
            body = parse_note(note).text
            lines = [
                cosignature(
                    signer.verifier,
                    COSIGNED_AT,
                    signer.sign(cosignature_message(body, COSIGNED_AT)),
                )
                for signer in signers
            ]
            add_cosignatures(db, cosigned_note(note, lines), verifiers, NOW)


def _witness_report(path: Path, *witnesses: SignerKey) -> dict[str, Any]:
    with Database(path) as db:
        return verify_log(
            db,
            checkpoint_keys=(LEDGER_KEY,),
            witness_keys=tuple(signer_from_key(key).verifier for key in witnesses),
        ).public()


def _cosignature_findings(report: dict[str, Any]) -> list[tuple[str, str]]:
    return sorted(
        (finding["code"], finding["key"].split(" ")[0])
        for finding in report["findings"]
        if finding.get("table") == "checkpoint_cosignatures"
    )


def test_stored_cosignatures_verify_under_the_witnesses_keys(signed: Path) -> None:
    _cosign_all(signed, WITNESS, OTHER_WITNESS)
    report = _witness_report(signed, WITNESS)
    assert report["intact"], report["findings"]
    # One witness known: its three lines checked, the other's not counted.
    assert report["cosignatures_checked"] == 3
    assert _witness_report(signed, WITNESS, OTHER_WITNESS)["cosignatures_checked"] == 6
    assert _witness_report(signed)["cosignatures_checked"] == 0


@pytest.mark.parametrize("edit", ["moved", "forged", "retimed"])
def test_a_stored_cosignature_changed_is_reported_by_the_witness_key(
    signed: Path, edit: str
) -> None:
    """A witness's line moved to another checkpoint, its signature bytes changed, or its row's
    time edited: `COSIGNATURE_FORGED` by checkpoint, when `verify` knows the witness."""
    _cosign_all(signed, WITNESS)
    first, second, _ = _ids(signed)
    if edit == "moved":
        statement = (
            "UPDATE checkpoint_cosignatures SET line = (SELECT line FROM checkpoint_cosignatures"
            " WHERE checkpoint_id = ?) WHERE checkpoint_id = ?"
        )
        tamper(signed, (statement, (int(first), int(second))))
    elif edit == "forged":
        (line,) = raw_rows(
            signed, f"SELECT line FROM checkpoint_cosignatures WHERE checkpoint_id = {second}"
        )
        prefix, _, encoded = line[0].rstrip("\n").rpartition(" ")
        raw = bytearray(base64.b64decode(encoded))
        raw[-1] ^= 1
        forged = f"{prefix} {base64.b64encode(bytes(raw)).decode()}\n"
        statement = "UPDATE checkpoint_cosignatures SET line = ? WHERE checkpoint_id = ?"
        tamper(signed, (statement, (forged, int(second))))
    else:
        statement = "UPDATE checkpoint_cosignatures SET cosigned_at = ? WHERE checkpoint_id = ?"
        tamper(signed, (statement, (COSIGNED_AT + 1, int(second))))
    report = _witness_report(signed, WITNESS)
    assert report["intact"] is False
    assert _cosignature_findings(report) == [("COSIGNATURE_FORGED", second)]
    assert report["cosignatures_checked"] == 2
    # Without the witness's key nothing can tell: the line is no proof either way.
    assert _witness_report(signed)["intact"] is True


def test_a_root_edited_in_its_row_is_reported(signed: Path) -> None:
    second = _ids(signed)[1]
    tamper(
        signed,
        ("UPDATE checkpoints SET root_hash = ? WHERE checkpoint_id = ?", (b"\7" * 32, int(second))),
    )
    report = _report(signed)
    assert not report["intact"]
    # The tree makes another root at its size, and the note signs another than the row says.
    assert _checkpoint_findings(report) == [("CHECKPOINT_MISMATCH", second)] * 2
    assert set(report["finding_counts"]) == {"CHECKPOINT_MISMATCH"}


def test_a_note_rewritten_to_another_root_is_not_the_ledger_keys(signed: Path) -> None:
    second = _ids(signed)[1]
    (note,) = raw_rows(
        signed, "SELECT note FROM checkpoints WHERE checkpoint_id = ?", (int(second),)
    )[0]
    lines = note.split("\n")
    forged_root = b"\7" * 32
    lines[2] = base64.b64encode(forged_root).decode()  # the signature line kept
    tamper(
        signed,
        (
            "UPDATE checkpoints SET root_hash = ?, note = ? WHERE checkpoint_id = ?",
            (forged_root, "\n".join(lines), int(second)),
        ),
    )
    report = _report(signed)
    assert _checkpoint_findings(report) == [
        ("CHECKPOINT_FORGED", second),
        ("CHECKPOINT_MISMATCH", second),
    ]
    # The root still disagrees with the tree when nobody knows the key.
    assert _checkpoint_findings(_report(signed, ())) == [("CHECKPOINT_MISMATCH", second)]


def test_a_checkpoint_another_key_signed_under_the_ledgers_name_is_forged(signed: Path) -> None:
    # A well-formed note of the right tree, by a key of the ledger's name that is not its key.
    impostor = parse_signer(generate_signer_key(LEDGER_KEY.name).text())
    with Database(signed) as db:
        head = current_tree_head(db)
    _insert(signed, impostor, Checkpoint(LEDGER_KEY.name, head.size, head.root))
    report = _report(signed)
    assert _checkpoint_findings(report) == [("CHECKPOINT_FORGED", _ids(signed)[3])]
    assert _report(signed, ())["intact"]  # only the key tells it from the ledger's own


def test_a_tree_rewritten_under_a_signed_checkpoint_is_reported(signed: Path) -> None:
    # The operator rebuilds the whole tree over a changed seal: the tree is consistent with
    # itself and with the seals, but not with what the ledger signed.
    _drop_merkle_triggers(signed)
    tamper(
        signed,
        ("UPDATE event_seals SET seal = ? WHERE event_id = 4", ("sha256:" + "3" * 64,)),
        ("DELETE FROM merkle_leaves", ()),
        ("UPDATE merkle_tree SET size = NULL, frontier = ?", (b"",)),
    )
    build_log(signed, ["t-q"], start=200)  # the next append builds the tree again
    report = _report(signed)
    assert "MERKLE_MISMATCH" not in report["finding_counts"], report["findings"]
    # Checkpoints 2 and 3 cover leaf 3 (event 4); the empty tree's still holds.
    ids = _ids(signed)
    assert _checkpoint_findings(report) == [
        ("CHECKPOINT_MISMATCH", ids[1]),
        ("CHECKPOINT_MISMATCH", ids[2]),
    ]


def test_a_signed_checkpoint_of_more_leaves_than_the_tree_is_reported(signed: Path) -> None:
    # Signed by the ledger's key when the tree was larger: the leaves it signed are gone.
    with Database(signed) as db:
        size = current_tree_head(db).size
    _insert(signed, _signer(), Checkpoint(LEDGER_KEY.name, size + 3, b"\1" * 32))
    report = _report(signed)
    assert _checkpoint_findings(report) == [("CHECKPOINT_MISMATCH", _ids(signed)[3])]
    (finding,) = [f for f in report["findings"] if f["code"] == "CHECKPOINT_MISMATCH"]
    assert f"{size + 3} leaves" in finding["detail"] and f"has {size}" in finding["detail"]


def test_verify_takes_the_ledgers_key_from_the_command_line_or_the_config(tmp_path: Path) -> None:
    signed = _sign_three(tmp_path / "ledger.db")
    tamper(signed, ("UPDATE checkpoints SET note = replace(note, '\n0\n', '\n00\n')", ()))
    given = _verify_command(signed, "--log-key", PETER_VKEY)
    assert given.returncode == 3, given.stderr
    assert "CHECKPOINT_MISMATCH" in given.stderr
    config = tmp_path / "aios-ledger.toml"
    config.write_text(f'[checkpoint]\nlog_keys = ["{PETER_VKEY}"]\n')
    configured = _verify_command(signed, "--config", str(config))
    assert json.loads(configured.stdout)["checkpoint_signatures_checked"] == 2
    key_file = tmp_path / "ledger.key"
    key_file.write_text(PETER_SKEY + "\n")
    config.write_text(f'[checkpoint]\nkey = "{key_file}"\n')
    from_key = _verify_command(signed, "--config", str(config))
    assert json.loads(from_key.stdout)["checkpoint_signatures_checked"] == 2
    unkeyed = _verify_command(signed)
    assert json.loads(unkeyed.stdout)["checkpoint_signatures_checked"] == 0


def test_verify_takes_the_witnesses_keys_from_the_command_line_or_the_config(
    tmp_path: Path,
) -> None:
    signed = _sign_three(tmp_path / "ledger.db")
    _cosign_all(signed, WITNESS)
    witness = signer_from_key(WITNESS).verifier.text()
    given = _verify_command(signed, "--witness-key", witness)
    assert json.loads(given.stdout)["cosignatures_checked"] == 3, given.stderr
    config = tmp_path / "aios-ledger.toml"
    config.write_text(f'[checkpoint]\nwitnesses = ["{witness}"]\n')
    configured = _verify_command(signed, "--config", str(config))
    assert json.loads(configured.stdout)["cosignatures_checked"] == 3
    tamper(signed, ("UPDATE checkpoint_cosignatures SET cosigned_at = cosigned_at + 1", ()))
    changed = _verify_command(signed, "--config", str(config))
    assert changed.returncode == 3 and "COSIGNATURE_FORGED" in changed.stderr


def _verify_command(path: Path, *options: str) -> CliResult:
    global_options = [o for o in options if o == "--config" or o.endswith(".toml")]
    command_options = [o for o in options if o not in global_options]
    return run_cli(*global_options, "--db", path, "verify", *command_options)


def _insert(path: Path, signer: Signer, checkpoint: Checkpoint) -> None:
    note = signed_checkpoint(
        checkpoint, signer.verifier, signer.sign(checkpoint_message(checkpoint))
    ).encode()
    tamper(
        path,
        (
            "INSERT INTO checkpoints(origin, tree_size, root_hash, key_id, note, signed_at) "
            "VALUES (?, ?, ?, ?, ?, ?)",
            (
                checkpoint.origin,
                checkpoint.size,
                checkpoint.root,
                signer.verifier.key_id.hex(),
                note,
                NOW.text,
            ),
        ),
    )


def test_a_checkpoint_row_of_any_shape_is_a_finding_not_a_crash(tmp_path: Path) -> None:
    # SQLite keeps the text in an INTEGER column (and 'x' >= 0 passes its CHECK), as a
    # hand-edited row would hold it; PostgreSQL refuses it at the write.
    signed = _sign_three(tmp_path / "ledger.db")
    first, second, third = _ids(signed)
    tamper(
        signed,
        ("UPDATE checkpoints SET tree_size = 'x' WHERE checkpoint_id = ?", (int(first),)),
        ("UPDATE checkpoints SET root_hash = ? WHERE checkpoint_id = ?", ("t" * 32, int(second))),
        ("UPDATE checkpoints SET note = 7 WHERE checkpoint_id = ?", (int(third),)),
    )
    report = _report(signed)
    assert _checkpoint_findings(report) == sorted(
        [
            ("CHECKPOINT_MISMATCH", first),
            ("CHECKPOINT_MISMATCH", second),  # no root: not the tree's
            ("CHECKPOINT_MISMATCH", second),  # nor the note's
            ("CHECKPOINT_MISMATCH", third),
        ]
    )
