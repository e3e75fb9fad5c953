"""The Merkle log on both engines: appended with each event, proofs that check against the
tree head, a log older than the tree given its leaves, and tampering found (inclusion fails
against a head taken before; verify reports an edited node)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from aios_ledger.core import LedgerError, Timestamp
from aios_ledger.core.log.merkle import TreeHead
from aios_ledger.shell import Database, verify_log
from aios_ledger.shell.db.merkle import (
    Integrator,
    current_tree_head,
    integrate,
    prove_consistency,
    prove_inclusion,
    tree_head_at,
)
from aios_ledger.shell.proofs.checkpoints import sign_checkpoint
from aios_ledger.shell.proofs.keys import parse_signer
from cli_runner import run_cli
from conftest import both_engines, is_postgres
from test_log_support import ROUND_ROBIN, build_log, codes_at, raw_rows, tamper
from test_proofs_notes import ENOCH_VKEY, PETER_SKEY, PETER_VKEY

pytest_generate_tests = both_engines
NOW = Timestamp.parse("2026-08-20T00:00:00.000Z")
MERKLE_TRIGGERS = (
    "merkle_leaves_refuse_update",
    "merkle_leaves_refuse_delete",
)


@pytest.fixture
def log(ledger_target: Path) -> Path:
    build_log(ledger_target, ROUND_ROBIN)
    return ledger_target


def _tamper_tree(path: Path, statement: str, params: tuple[object, ...]) -> None:
    if not is_postgres(path):
        import sqlite3

        con = sqlite3.connect(path)
        for trigger in MERKLE_TRIGGERS:
            con.execute(f"DROP TRIGGER IF EXISTS {trigger}")
        con.commit()
        con.close()
    tamper(path, (statement, params))


def test_every_event_is_a_leaf_in_commit_order_and_proves(log: Path) -> None:
    leaves = raw_rows(log, "SELECT leaf_index, event_id FROM merkle_leaves ORDER BY leaf_index")
    assert leaves == [(index, index + 1) for index in range(len(ROUND_ROBIN))]
    with Database(log) as db:
        head = current_tree_head(db)
        assert head.size == len(ROUND_ROBIN)
        for event_id in range(1, len(ROUND_ROBIN) + 1):
            prove_inclusion(db, event_id).check(head.root)
        old = tree_head_at(db, 5)
        prove_inclusion(db, 3, 5).check(old.root)
        prove_consistency(db, 5).check(head.root, old.root)
        build_log(log, ["t-a", None, "t-z"], start=100)
        grown = current_tree_head(db)
        prove_consistency(db, head.size, grown.size).check(grown.root, head.root)
        assert verify_log(db).intact
        with pytest.raises(LedgerError, match=r"^TREE_SIZE_INVALID"):
            prove_inclusion(db, 3, 2)
        with pytest.raises(LedgerError, match=r"^EVENT_NOT_FOUND"):
            prove_inclusion(db, 999)
        with pytest.raises(LedgerError, match=r"^TREE_SIZE_INVALID"):
            prove_consistency(db, 5, grown.size + 1)


def test_an_event_changed_after_a_tree_head_fails_its_inclusion(log: Path) -> None:
    with Database(log) as db:
        head = current_tree_head(db)
    # Re-sealed by whoever changed it: the proof now carries the new seal.
    _tamper_tree(log, "UPDATE event_seals SET seal = ? WHERE event_id = 4", ("sha256:" + "3" * 64,))
    with Database(log) as db:
        proof = prove_inclusion(db, 4, head.size)
        with pytest.raises(LedgerError, match=r"^PROOF_REJECTED"):
            proof.check(head.root)
        prove_inclusion(db, 5, head.size).check(head.root)  # the others still prove
        report = verify_log(db).public()
    assert ("MERKLE_MISMATCH", 4) in codes_at(report)


def test_a_tree_rebuilt_over_a_changed_seal_has_another_root(log: Path) -> None:
    with Database(log) as db:
        head = current_tree_head(db)
    _tamper_tree(log, "UPDATE event_seals SET seal = ? WHERE event_id = 4", ("sha256:" + "3" * 64,))
    _tamper_tree(log, "DELETE FROM merkle_leaves", ())
    _tamper_tree(log, "UPDATE merkle_tree SET size = NULL, frontier = ?", (b"",))
    build_log(log, ["t-q"], start=200)  # the next append builds the whole tree again
    with Database(log) as db:
        rebuilt = tree_head_at(db, head.size)
        assert rebuilt.root != head.root
        with pytest.raises(LedgerError, match=r"^PROOF_REJECTED"):
            prove_inclusion(db, 4, head.size).check(head.root)


def test_an_edited_node_is_reported_by_verify(log: Path) -> None:
    # The subtree 2/1 (leaves 4-7) is the second hash in the row of leaf 7, which completes it.
    [(nodes,)] = raw_rows(log, "SELECT nodes FROM merkle_leaves WHERE leaf_index = 7")
    edited = bytes(nodes)[:32] + b"\x07" * 32 + bytes(nodes)[64:]
    _tamper_tree(log, "UPDATE merkle_leaves SET nodes = ? WHERE leaf_index = 7", (edited,))
    with Database(log) as db:
        report = verify_log(db).public()
    found = [f for f in report["findings"] if f["code"] == "MERKLE_MISMATCH"]
    assert [(f["table"], f["key"]) for f in found] == [("merkle_leaves", "7")], found
    assert "2/1" in found[0]["detail"]
    assert report["intact"] is False


def test_a_subtree_missing_from_its_leaf_row_is_reported_by_verify(log: Path) -> None:
    _tamper_tree(log, "UPDATE merkle_leaves SET nodes = ? WHERE leaf_index = 3", (b"",))
    with Database(log) as db:
        report = verify_log(db).public()
        with pytest.raises(LedgerError, match=r"^MERKLE_NODE_MISSING"):
            tree_head_at(db, 4)
    found = [f for f in report["findings"] if f["code"] == "MERKLE_MISMATCH"]
    assert [(f["table"], f["key"]) for f in found] == [("merkle_leaves", "3")], found


def test_an_edited_head_row_is_reported_by_verify(log: Path) -> None:
    _tamper_tree(log, "UPDATE merkle_tree SET size = size - 1", ())
    with Database(log) as db:
        report = verify_log(db).public()
    assert [f["table"] for f in report["findings"]] == ["merkle_tree"]


def test_a_log_from_before_the_tree_gets_its_leaves_in_id_order(log: Path) -> None:
    with Database(log) as db:
        head = current_tree_head(db)
    _tamper_tree(log, "DELETE FROM merkle_leaves", ())
    _tamper_tree(log, "UPDATE merkle_tree SET size = NULL, frontier = ?", (b"",))
    with Database(log) as db:
        with pytest.raises(LedgerError, match=r"^MERKLE_TREE_NOT_BUILT"):
            current_tree_head(db)
        from aios_ledger.shell.db.merkle import build_tree

        assert db.write(build_tree) == len(ROUND_ROBIN)
        assert current_tree_head(db) == head
        assert verify_log(db).intact


def test_prove_and_verify_proof_on_the_command_line(log: Path, tmp_path: Path) -> None:
    proved = run_cli("--db", str(log), "prove", "7")
    assert proved.returncode == 0, proved.stderr
    proof = json.loads(proved.stdout)
    with Database(log) as db:
        head: TreeHead = current_tree_head(db)
    assert proof["root"] == head.root.hex() and proof["tree_size"] == head.size
    path = tmp_path / "proof.json"
    path.write_text(proved.stdout)
    checked = run_cli("verify-proof", str(path), "--root", head.root.hex())  # no --db
    assert checked.returncode == 0, checked.stderr
    assert json.loads(checked.stdout)["verified"] is True
    refused = run_cli("verify-proof", str(path), "--root", "0" * 64)
    assert refused.returncode != 0 and "PROOF_REJECTED" in refused.stderr
    consistency = run_cli("--db", str(log), "prove", "--consistency", "3", str(head.size))
    assert consistency.returncode == 0, consistency.stderr
    path.write_text(consistency.stdout)
    old_root = json.loads(consistency.stdout)["old_root"]
    args = ("verify-proof", str(path), "--root", head.root.hex(), "--old-root", old_root)
    assert run_cli(*args).returncode == 0


def test_verify_proof_trusts_a_signed_checkpoint_and_the_public_key_alone(
    ledger_target: Path, tmp_path: Path
) -> None:
    """`verify-proof --checkpoint NOTE --log-key VKEY`: the root is the one the ledger's key
    signed for the proof's size, so a third party needs the note and the public key only; an
    event re-sealed after the checkpoint no longer proves against it."""

    def prove(*args: str) -> Path:
        proved = run_cli("--db", str(ledger_target), "prove", *args)
        assert proved.returncode == 0, proved.stderr
        path = tmp_path / f"proof-{'-'.join(args)}.json"
        path.write_text(proved.stdout)
        return path

    def checkpoint(name: str) -> str:
        with Database(ledger_target) as db:
            served = sign_checkpoint(db, parse_signer(PETER_SKEY), NOW)
        (tmp_path / name).write_text(served.note)
        return str(tmp_path / name)

    build_log(ledger_target, ROUND_ROBIN[:5])
    old = checkpoint("old.txt")
    build_log(ledger_target, ROUND_ROBIN[5:], start=5)
    new = checkpoint("new.txt")
    key = ("--log-key", PETER_VKEY)

    checked = run_cli("verify-proof", str(prove("3", "--size", "5")), "--checkpoint", old, *key)
    assert checked.returncode == 0, checked.stderr
    assert json.loads(checked.stdout)["verified"] is True
    consistency = prove("--consistency", "5", str(len(ROUND_ROBIN)))
    both = ("--old-checkpoint", old, "--checkpoint", new, *key)
    assert run_cli("verify-proof", str(consistency), *both).returncode == 0
    # A proof of another tree than the checkpoint's, or a checkpoint the key did not sign.
    other_size = run_cli("verify-proof", str(prove("7")), "--checkpoint", old, *key)
    assert other_size.returncode != 0 and "PROOF_REJECTED" in other_size.stderr
    other_key = run_cli(
        "verify-proof", str(prove("7")), "--checkpoint", new, "--log-key", ENOCH_VKEY
    )
    assert other_key.returncode != 0 and "NOTE_UNVERIFIED" in other_key.stderr
    unkeyed = run_cli("verify-proof", str(prove("7")), "--checkpoint", new)
    assert unkeyed.returncode != 0 and "USAGE_INVALID" in unkeyed.stderr
    inclusion = str(prove("3", "--size", "5"))
    misused = run_cli("verify-proof", inclusion, "--checkpoint", old, "--old-checkpoint", old, *key)
    assert misused.returncode != 0 and "--old-checkpoint" in misused.stderr

    # Re-sealed after the checkpoint: the proof carries the new seal, the signed root refuses it.
    _tamper_tree(
        ledger_target, "UPDATE event_seals SET seal = ? WHERE event_id = 4", ("sha256:" + "3" * 64,)
    )
    changed = prove("4", "--size", str(len(ROUND_ROBIN)))
    refused = run_cli("verify-proof", str(changed), "--checkpoint", new, *key)
    assert refused.returncode != 0 and "PROOF_REJECTED" in refused.stderr


def test_concurrent_writers_and_integrators_leave_every_committed_head_a_prefix(
    ledger_target: Path,
) -> None:
    """PostgreSQL's writers beside each other (row-locked transitions, ids from a sequence)
    while two integrators run passes: every tree head seen is a prefix of the final tree (a
    consistency proof to it verifies), no event has two leaves, and once integrated every
    committed event is a leaf and the tree is intact."""
    if not is_postgres(ledger_target):
        pytest.skip("SQLite has one writer")
    import concurrent.futures
    import threading

    from aios_ledger.shell import TaskLedger

    seen: list[TreeHead] = []
    done = threading.Event()
    with TaskLedger(ledger_target) as ledger:

        def write(n: int) -> None:
            task = {"task_id": f"c-{n}", "goal": "g", "instructions": "i"}
            ledger.create_task(task, idempotency_key=f"k-{n}")

        def integrate_and_watch() -> None:
            with Database(ledger_target) as db:
                integrator = Integrator(db, batch=7)
                while not done.is_set():
                    integrator.run_pass()
                    seen.append(current_tree_head(db))

        integrators = [threading.Thread(target=integrate_and_watch) for _ in range(2)]
        for thread in integrators:
            thread.start()
        with concurrent.futures.ThreadPoolExecutor(max_workers=4) as pool:
            list(pool.map(write, range(60)))
        done.set()
        for thread in integrators:
            thread.join()
    with Database(ledger_target) as db:
        integrate(db)
        final = current_tree_head(db)
        assert final.size == 60
        assert len(seen) > 1
        for head in seen:
            assert tree_head_at(db, head.size) == head
            prove_consistency(db, head.size).check(final.root, head.root)
        assert verify_log(db).intact
