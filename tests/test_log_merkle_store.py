"""The Merkle log on both engines: appended with each event, proofs that check against the
tree head, a log older than the tree given its leaves, and tampering found (inclusion fails
against a head taken before; verify reports an edited node)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from aios_ledger.core import LedgerError
from aios_ledger.core.log.merkle import TreeHead
from aios_ledger.shell import Database, verify_log
from aios_ledger.shell.log.merkle import (
    current_tree_head,
    prove_consistency,
    prove_inclusion,
    tree_head_at,
)
from conftest import both_engines, is_postgres
from test_log_support import ROUND_ROBIN, build_log, codes_at, raw_rows, tamper

pytest_generate_tests = both_engines
MERKLE_TRIGGERS = (
    "merkle_leaves_refuse_update",
    "merkle_leaves_refuse_delete",
    "merkle_nodes_refuse_update",
    "merkle_nodes_refuse_delete",
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
    _tamper_tree(log, "DELETE FROM merkle_nodes", ())
    _tamper_tree(log, "DELETE FROM merkle_leaves", ())
    _tamper_tree(log, "UPDATE merkle_tree SET size = NULL, frontier = ?", (b"",))
    build_log(log, ["t-q"], start=200)  # the next append builds the whole tree again
    with Database(log) as db:
        rebuilt = tree_head_at(db, head.size)
        assert rebuilt.root != head.root
        with pytest.raises(LedgerError, match=r"^PROOF_REJECTED"):
            prove_inclusion(db, 4, head.size).check(head.root)


def test_an_edited_node_is_reported_by_verify(log: Path) -> None:
    _tamper_tree(
        log, "UPDATE merkle_nodes SET hash = ? WHERE level = 2 AND node_index = 1", (b"\x07" * 32,)
    )
    with Database(log) as db:
        report = verify_log(db).public()
    found = [f for f in report["findings"] if f["code"] == "MERKLE_MISMATCH"]
    assert [f["key"] for f in found] == ["2/1"], found
    assert report["intact"] is False


def test_an_edited_head_row_is_reported_by_verify(log: Path) -> None:
    _tamper_tree(log, "UPDATE merkle_tree SET size = size - 1", ())
    with Database(log) as db:
        report = verify_log(db).public()
    assert [f["table"] for f in report["findings"]] == ["merkle_tree"]


def test_a_log_from_before_the_tree_gets_its_leaves_in_id_order(log: Path) -> None:
    with Database(log) as db:
        head = current_tree_head(db)
    _tamper_tree(log, "DELETE FROM merkle_nodes", ())
    _tamper_tree(log, "DELETE FROM merkle_leaves", ())
    _tamper_tree(log, "UPDATE merkle_tree SET size = NULL, frontier = ?", (b"",))
    with Database(log) as db:
        with pytest.raises(LedgerError, match=r"^MERKLE_TREE_NOT_BUILT"):
            current_tree_head(db)
        from aios_ledger.shell.log.merkle import build_tree

        assert db.write(build_tree) == len(ROUND_ROBIN)
        assert current_tree_head(db) == head
        assert verify_log(db).intact


def test_prove_and_verify_proof_on_the_command_line(log: Path, tmp_path: Path) -> None:
    def cli(*args: str) -> subprocess.CompletedProcess[str]:
        command = [sys.executable, "-m", "aios_ledger.shell.cli", *args]
        return subprocess.run(command, capture_output=True, text=True, check=False)

    proved = cli("--db", str(log), "prove", "7")
    assert proved.returncode == 0, proved.stderr
    proof = json.loads(proved.stdout)
    with Database(log) as db:
        head: TreeHead = current_tree_head(db)
    assert proof["root"] == head.root.hex() and proof["tree_size"] == head.size
    path = tmp_path / "proof.json"
    path.write_text(proved.stdout)
    checked = cli("verify-proof", str(path), "--root", head.root.hex())  # no --db
    assert checked.returncode == 0, checked.stderr
    assert json.loads(checked.stdout)["verified"] is True
    refused = cli("verify-proof", str(path), "--root", "0" * 64)
    assert refused.returncode != 0 and "PROOF_REJECTED" in refused.stderr
    consistency = cli("--db", str(log), "prove", "--consistency", "3", str(head.size))
    assert consistency.returncode == 0, consistency.stderr
    path.write_text(consistency.stdout)
    old_root = json.loads(consistency.stdout)["old_root"]
    args = ("verify-proof", str(path), "--root", head.root.hex(), "--old-root", old_root)
    assert cli(*args).returncode == 0


def test_concurrent_writers_leave_every_committed_head_a_prefix(ledger_target: Path) -> None:
    """PostgreSQL's writers beside each other (row-locked transitions, ids from a sequence):
    every tree head a reader saw while they ran is a prefix of the final tree (a consistency
    proof to it verifies), and the tree is intact: leaves go in commit order."""
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

        def watch() -> None:
            with Database(ledger_target) as db:
                while not done.is_set():
                    seen.append(current_tree_head(db))

        watcher = threading.Thread(target=watch)
        watcher.start()
        with concurrent.futures.ThreadPoolExecutor(max_workers=4) as pool:
            list(pool.map(write, range(60)))
        done.set()
        watcher.join()
    with Database(ledger_target) as db:
        final = current_tree_head(db)
        assert final.size == 60
        assert len(seen) > 1
        for head in seen:
            assert tree_head_at(db, head.size) == head
            prove_consistency(db, head.size).check(final.root, head.root)
        assert verify_log(db).intact
