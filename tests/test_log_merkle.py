"""The Merkle log's pure core (core/log/merkle.py) against RFC 6962's published test vectors and
against a second implementation written here straight from RFC 9162's recursive definitions.

The vectors are the 8-leaf tree that certificate-transparency, Go's sumdb/tlog and
transparency-dev/merkle test with (`testonly/constants.go`, `proof/verify_test.go` there): its
leaf inputs, the node hash of every complete subtree, the roots of sizes 0..8, and their
inclusion and consistency proofs (their inclusion vectors number leaves from 1; here from 0).
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence

import pytest
from aios_ledger.core import LedgerError, SqlWrite, Statement
from aios_ledger.core.log.merkle import (
    EMPTY_ROOT,
    HASH_SIZE,
    ConsistencyProof,
    Frontier,
    InclusionProof,
    MerkleTreeRow,
    NodeId,
    StoredNode,
    append_writes,
    consistency_proof,
    consistency_proof_nodes,
    event_leaf_data,
    event_leaf_hash,
    inclusion_proof,
    inclusion_proof_nodes,
    leaf_hash,
    node_hash,
    parse_proof,
    root_nodes,
    tree_head,
    verify_consistency,
    verify_inclusion,
)
from hypothesis import given
from hypothesis import strategies as st
from syrupy.assertion import SnapshotAssertion

LEAF_INPUTS = [
    bytes.fromhex(text)
    for text in (
        "",
        "00",
        "10",
        "2021",
        "3031",
        "40414243",
        "5051525354555657",
        "606162636465666768696a6b6c6d6e6f",
    )
]
# NodeHashes(): level, then index within the level.
NODE_HASHES = [
    [
        "6e340b9cffb37a989ca544e6bb780a2c78901d3fb33738768511a30617afa01d",
        "96a296d224f285c67bee93c30f8a309157f0daa35dc5b87e410b78630a09cfc7",
        "0298d122906dcfc10892cb53a73992fc5b9f493ea4c9badb27b791b4127a7fe7",
        "07506a85fd9dd2f120eb694f86011e5bb4662e5c415a62917033d4a9624487e7",
        "bc1a0643b12e4d2d7c77918f44e0f4f79a838b6cf9ec5b5c283e1f4d88599e6b",
        "4271a26be0d8a84f0bd54c8c302e7cb3a3b5d1fa6780a40bcce2873477dab658",
        "b08693ec2e721597130641e8211e7eedccb4c26413963eee6c1e2ed16ffb1a5f",
        "46f6ffadd3d06a09ff3c5860d2755c8b9819db7df44251788c7d8e3180de8eb1",
    ],
    [
        "fac54203e7cc696cf0dfcb42c92a1d9dbaf70ad9e621f4bd8d98662f00e3c125",
        "5f083f0a1a33ca076a95279832580db3e0ef4584bdff1f54c8a360f50de3031e",
        "0ebc5d3437fbe2db158b9f126a1d118e308181031d0a949f8dededebc558ef6a",
        "ca854ea128ed050b41b35ffc1b87b8eb2bde461e9e3b5596ece6b9d5975a0ae0",
    ],
    [
        "d37ee418976dd95753c1c73862b9398fa2a2cf9b4ff0fdfe8b30cd95209614b7",
        "6b47aaf29ee3c2af9af889bc1fb9254dabd31177f16232dd6aab035ca39bf6e4",
    ],
    ["5dc9da79a70659a9ad559cb701ded9a2ab9d823aad2f4960cfe370eff4604328"],
]
ROOTS = [
    "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
    "6e340b9cffb37a989ca544e6bb780a2c78901d3fb33738768511a30617afa01d",
    "fac54203e7cc696cf0dfcb42c92a1d9dbaf70ad9e621f4bd8d98662f00e3c125",
    "aeb6bcfe274b70a14fb067a5e5578264db0fa9b51af5e0ba159158f329e06e77",
    "d37ee418976dd95753c1c73862b9398fa2a2cf9b4ff0fdfe8b30cd95209614b7",
    "4e3bbb1f7b478dcfe71fb631631519a3bca12c9aefca1612bfce4c13a86264d4",
    "76e67dadbcdf1e10e1b74ddc608abd2f98dfb16fbce75277b5232a127f2087ef",
    "ddb89be403809e325750d3d263cd78929c2942b7942a34b77e122c9594a74c8c",
    "5dc9da79a70659a9ad559cb701ded9a2ab9d823aad2f4960cfe370eff4604328",
]
# (leaf index from 0, tree size, path)
INCLUSION_VECTORS = [
    (0, 1, []),
    (
        0,
        8,
        [
            "96a296d224f285c67bee93c30f8a309157f0daa35dc5b87e410b78630a09cfc7",
            "5f083f0a1a33ca076a95279832580db3e0ef4584bdff1f54c8a360f50de3031e",
            "6b47aaf29ee3c2af9af889bc1fb9254dabd31177f16232dd6aab035ca39bf6e4",
        ],
    ),
    (
        5,
        8,
        [
            "bc1a0643b12e4d2d7c77918f44e0f4f79a838b6cf9ec5b5c283e1f4d88599e6b",
            "ca854ea128ed050b41b35ffc1b87b8eb2bde461e9e3b5596ece6b9d5975a0ae0",
            "d37ee418976dd95753c1c73862b9398fa2a2cf9b4ff0fdfe8b30cd95209614b7",
        ],
    ),
    (2, 3, ["fac54203e7cc696cf0dfcb42c92a1d9dbaf70ad9e621f4bd8d98662f00e3c125"]),
    (
        1,
        5,
        [
            "6e340b9cffb37a989ca544e6bb780a2c78901d3fb33738768511a30617afa01d",
            "5f083f0a1a33ca076a95279832580db3e0ef4584bdff1f54c8a360f50de3031e",
            "bc1a0643b12e4d2d7c77918f44e0f4f79a838b6cf9ec5b5c283e1f4d88599e6b",
        ],
    ),
]
# (old size, new size, path)
CONSISTENCY_VECTORS = [
    (1, 1, []),
    (
        1,
        8,
        [
            "96a296d224f285c67bee93c30f8a309157f0daa35dc5b87e410b78630a09cfc7",
            "5f083f0a1a33ca076a95279832580db3e0ef4584bdff1f54c8a360f50de3031e",
            "6b47aaf29ee3c2af9af889bc1fb9254dabd31177f16232dd6aab035ca39bf6e4",
        ],
    ),
    (
        6,
        8,
        [
            "0ebc5d3437fbe2db158b9f126a1d118e308181031d0a949f8dededebc558ef6a",
            "ca854ea128ed050b41b35ffc1b87b8eb2bde461e9e3b5596ece6b9d5975a0ae0",
            "d37ee418976dd95753c1c73862b9398fa2a2cf9b4ff0fdfe8b30cd95209614b7",
        ],
    ),
    (
        2,
        5,
        [
            "5f083f0a1a33ca076a95279832580db3e0ef4584bdff1f54c8a360f50de3031e",
            "bc1a0643b12e4d2d7c77918f44e0f4f79a838b6cf9ec5b5c283e1f4d88599e6b",
        ],
    ),
    (
        6,
        7,
        [
            "0ebc5d3437fbe2db158b9f126a1d118e308181031d0a949f8dededebc558ef6a",
            "b08693ec2e721597130641e8211e7eedccb4c26413963eee6c1e2ed16ffb1a5f",
            "d37ee418976dd95753c1c73862b9398fa2a2cf9b4ff0fdfe8b30cd95209614b7",
        ],
    ),
]


def _hexes(path: Sequence[bytes]) -> list[str]:
    return [hashed.hex() for hashed in path]


def _stored(leaves: Sequence[bytes]) -> dict[NodeId, bytes]:
    """Every node the ledger would store for `leaves`, built by appending them one by one."""
    frontier, nodes = Frontier(0), {}
    for data in leaves:
        frontier, written = frontier.append([leaf_hash(data)])
        nodes.update({item.node: item.hash for item in written})
    return nodes


# -- a second implementation, written from RFC 9162 §2.1.1, §2.1.3.1 and §2.1.4.1 ------------------


def _k(n: int) -> int:
    """The largest power of two smaller than n."""
    k = 1
    while k * 2 < n:
        k *= 2
    return k


def naive_mth(leaves: Sequence[bytes]) -> bytes:
    n = len(leaves)
    if n == 0:
        return hashlib.sha256(b"").digest()
    if n == 1:
        return hashlib.sha256(b"\x00" + leaves[0]).digest()
    k = _k(n)
    return hashlib.sha256(b"\x01" + naive_mth(leaves[:k]) + naive_mth(leaves[k:])).digest()


def naive_path(m: int, leaves: Sequence[bytes]) -> list[bytes]:
    n = len(leaves)
    if n == 1:
        return []
    k = _k(n)
    if m < k:
        return [*naive_path(m, leaves[:k]), naive_mth(leaves[k:])]
    return [*naive_path(m - k, leaves[k:]), naive_mth(leaves[:k])]


def naive_subproof(m: int, leaves: Sequence[bytes], whole: bool) -> list[bytes]:
    n = len(leaves)
    if m == n:
        return [] if whole else [naive_mth(leaves)]
    k = _k(n)
    if m <= k:
        return [*naive_subproof(m, leaves[:k], whole), naive_mth(leaves[k:])]
    return [*naive_subproof(m - k, leaves[k:], False), naive_mth(leaves[:k])]


def naive_proof(m: int, leaves: Sequence[bytes]) -> list[bytes]:
    return [] if m == 0 else naive_subproof(m, leaves, True)


# -- the vectors ---------------------------------------------------------------------------------


def test_every_stored_node_is_the_vectors_node_hash() -> None:
    nodes = _stored(LEAF_INPUTS)
    expected = {
        NodeId(level, index): bytes.fromhex(hashed)
        for level, row in enumerate(NODE_HASHES)
        for index, hashed in enumerate(row)
    }
    assert nodes == expected


@pytest.mark.parametrize("size", range(9))
def test_roots_of_sizes_0_to_8(size: int) -> None:
    nodes = _stored(LEAF_INPUTS)
    assert tree_head(size, nodes).root.hex() == ROOTS[size]
    frontier, _ = Frontier(0).append(leaf_hash(data) for data in LEAF_INPUTS[:size])
    assert frontier.head().root.hex() == ROOTS[size]
    assert set(root_nodes(size)) <= set(nodes)


def test_the_empty_tree_is_the_hash_of_nothing() -> None:
    assert EMPTY_ROOT.hex() == ROOTS[0]
    assert Frontier(0).head().root == EMPTY_ROOT


@pytest.mark.parametrize(("index", "size", "path"), INCLUSION_VECTORS)
def test_inclusion_vectors(index: int, size: int, path: list[str]) -> None:
    nodes = _stored(LEAF_INPUTS)
    proof = inclusion_proof(index, size, nodes)
    assert _hexes(proof) == path
    leaf = leaf_hash(LEAF_INPUTS[index])
    root = bytes.fromhex(ROOTS[size])
    assert verify_inclusion(index, size, leaf, proof, root)


@pytest.mark.parametrize(("old", "new", "path"), CONSISTENCY_VECTORS)
def test_consistency_vectors(old: int, new: int, path: list[str]) -> None:
    nodes = _stored(LEAF_INPUTS)
    proof = consistency_proof(old, new, nodes)
    assert _hexes(proof) == path
    assert verify_consistency(old, new, bytes.fromhex(ROOTS[old]), bytes.fromhex(ROOTS[new]), proof)


def _inclusion_probes(
    index: int, size: int, leaf: bytes, proof: list[bytes], root: bytes
) -> list[tuple[int, int, bytes, list[bytes], bytes]]:
    """The corruptions transparency-dev's verifier must refuse (`corruptInclusionProof`)."""
    some = bytes.fromhex("abacaba000000000000000000000000000000000000000000060061e00123456")
    probes = [
        (index - 1, size, leaf, proof, root),
        (index + 1, size, leaf, proof, root),
        (index ^ 2, size, leaf, proof, root),
        (index, size * 2, leaf, proof, root),
        (index, size // 2, leaf, proof, root),
        (index, size, b"WrongLeaf", proof, root),
        (index, size, leaf, proof, EMPTY_ROOT),
        (index, size, leaf, proof, some),
        (index, size, leaf, [*proof, b""], root),
        (index, size, leaf, [*proof, root], root),
        (index, size, leaf, [b"", *proof], root),
        (index, size, leaf, [root, *proof], root),
    ]
    for at in range(len(proof)):
        flipped = list(proof)
        flipped[at] = bytes([flipped[at][0] ^ 8]) + flipped[at][1:]
        probes.append((index, size, leaf, flipped, root))
    if proof:
        probes.append((index, size, leaf, proof[:-1], root))
    if len(proof) > 1:
        probes.append((index, size, leaf, [proof[0], some, *proof[1:]], root))
    return probes


@pytest.mark.parametrize(("index", "size", "path"), INCLUSION_VECTORS[1:])
def test_corrupted_inclusion_proofs_are_refused(index: int, size: int, path: list[str]) -> None:
    proof = [bytes.fromhex(hashed) for hashed in path]
    leaf, root = leaf_hash(LEAF_INPUTS[index]), bytes.fromhex(ROOTS[size])
    for probe in _inclusion_probes(index, size, leaf, proof, root):
        if probe[:2] == (index, size) and probe[2:] == (leaf, proof, root):
            continue
        assert not verify_inclusion(*probe), probe[:2]


@pytest.mark.parametrize(("old", "new", "path"), CONSISTENCY_VECTORS[1:])
def test_corrupted_consistency_proofs_are_refused(old: int, new: int, path: list[str]) -> None:
    proof = [bytes.fromhex(hashed) for hashed in path]
    r1, r2 = bytes.fromhex(ROOTS[old]), bytes.fromhex(ROOTS[new])
    probes = [
        (old - 1, new, r1, r2, proof),
        (old + 1, new, r1, r2, proof),
        (old ^ 2, new, r1, r2, proof),
        (old, new * 2, r1, r2, proof),
        (old, new // 2, r1, r2, proof),
        (old, new, b"WrongRoot", r2, proof),
        (old, new, r1, b"WrongRoot", proof),
        (old, new, r2, r1, proof),
        (old, new, r1, r2, []),
        (old, new, r1, r2, [*proof, b""]),
        (old, new, r1, r2, [*proof, r1]),
        (old, new, r1, r2, [*proof, r2]),
        (old, new, r1, r2, [b"", *proof]),
        (old, new, r1, r2, [r1, *proof]),
        (old, new, r1, r2, [r2, *proof]),
        (old, new, r1, r2, [proof[0], *proof]),
        (old, new, r1, r2, proof[:-1]),
    ]
    for at in range(len(proof)):
        flipped = list(proof)
        flipped[at] = bytes([flipped[at][0] ^ 16]) + flipped[at][1:]
        probes.append((old, new, r1, r2, flipped))
    for probe in probes:
        assert not verify_consistency(*probe), probe[:2]


def test_edge_cases_of_consistency() -> None:
    some, other = b"\x01" * 32, b"\x02" * 32
    assert verify_consistency(0, 0, some, some, [])
    assert verify_consistency(0, 1, some, other, [])
    assert not verify_consistency(0, 0, some, other, [])
    assert not verify_consistency(1, 0, some, other, [])
    assert not verify_consistency(1, 2, some, other, [])
    assert not verify_consistency(1, 1, some, some, [EMPTY_ROOT])
    assert not verify_inclusion(0, 0, some, [], some)
    assert verify_inclusion(0, 1, some, [], some)


# -- the second implementation, on random trees ---------------------------------------------------

_LEAVES = st.lists(st.binary(max_size=8), min_size=1, max_size=70)


@given(_LEAVES, st.data())
def test_inclusion_agrees_with_the_rfc_recursion(leaves: list[bytes], data: st.DataObject) -> None:
    size = data.draw(st.integers(1, len(leaves)), label="size")
    index = data.draw(st.integers(0, size - 1), label="index")
    nodes = _stored(leaves)
    needed = inclusion_proof_nodes(index, size)
    assert len(needed) <= 2 * size.bit_length()
    proof = inclusion_proof(index, size, {node: nodes[node] for node in needed})
    assert list(proof) == naive_path(index, leaves[:size])
    root = naive_mth(leaves[:size])
    assert tree_head(size, nodes).root == root
    assert verify_inclusion(index, size, leaf_hash(leaves[index]), proof, root)
    assert not verify_inclusion(index, size, leaf_hash(leaves[index] + b"x"), proof, root)


@given(_LEAVES, st.data())
def test_consistency_agrees_with_the_rfc_recursion(
    leaves: list[bytes], data: st.DataObject
) -> None:
    new = data.draw(st.integers(1, len(leaves)), label="new")
    old = data.draw(st.integers(0, new), label="old")
    nodes = _stored(leaves)
    needed = consistency_proof_nodes(old, new)
    assert len(needed) <= 2 * new.bit_length()
    proof = consistency_proof(old, new, {node: nodes[node] for node in needed})
    assert list(proof) == naive_proof(old, leaves[:new])
    old_root, new_root = naive_mth(leaves[:old]), naive_mth(leaves[:new])
    assert verify_consistency(old, new, old_root, new_root, proof)
    if 0 < old < new:
        changed = [*leaves[: old - 1], leaves[old - 1] + b"x"]
        assert not verify_consistency(old, new, naive_mth(changed), new_root, proof)


@given(_LEAVES, st.integers(0, 70))
def test_appending_in_batches_is_appending_one_by_one(leaves: list[bytes], cut: int) -> None:
    cut = min(cut, len(leaves))
    hashes = [leaf_hash(data) for data in leaves]
    first, written = Frontier(0).append(hashes[:cut])
    second, more = Frontier.decode(first.size, first.encode()).append(hashes[cut:])
    assert {item.node: item.hash for item in (*written, *more)} == _stored(leaves)
    assert second.head().root == naive_mth(leaves)


# -- events' leaves and proof documents ------------------------------------------------------------

SEAL = "sha256:" + "ab" * 32


def test_an_events_leaf_is_its_seal_text(golden: SnapshotAssertion) -> None:
    assert event_leaf_data(SEAL) == SEAL.encode("ascii")
    assert len(event_leaf_data(SEAL)) == 71
    assert event_leaf_hash(SEAL) == hashlib.sha256(b"\x00" + SEAL.encode()).digest()
    frontier, _ = Frontier(0).append(event_leaf_hash(f"sha256:{i:064x}") for i in range(5))
    assert golden == {
        "leaf_hash": event_leaf_hash(SEAL).hex(),
        "node_hash": node_hash(b"\x00" * 32, b"\xff" * 32).hex(),
        "head_of_five_seals": frontier.head().public(),
        "frontier_of_five_seals": frontier.encode().hex(),
    }
    for bad in ("sha256:AB" + "0" * 62, "sha256:" + "0" * 63, "x" * 71, 7):
        with pytest.raises(LedgerError, match=r"^SEAL_INVALID"):
            event_leaf_data(bad)  # type: ignore[arg-type]


def _proof_of(index: int, seals: list[str]) -> InclusionProof:
    frontier, written = Frontier(0).append(event_leaf_hash(seal) for seal in seals)
    nodes = {item.node: item.hash for item in written}
    size = len(seals)
    path = inclusion_proof(index, size, nodes)
    return InclusionProof(100 + index, seals[index], index, size, frontier.head().root, path)


def test_proof_documents_round_trip_and_check(golden: SnapshotAssertion) -> None:
    seals = [f"sha256:{i:064x}" for i in range(7)]
    proof = _proof_of(3, seals)
    document = proof.public()
    assert parse_proof(document) == proof
    proof.check(proof.root)
    frontier, written = Frontier(0).append(event_leaf_hash(seal) for seal in seals)
    nodes = {item.node: item.hash for item in written}
    old = tree_head(4, nodes)
    consistency = ConsistencyProof(
        4, 7, old.root, frontier.head().root, consistency_proof(4, 7, nodes)
    )
    assert parse_proof(consistency.public()) == consistency
    consistency.check(frontier.head().root, old.root)
    assert golden == {"inclusion": document, "consistency": consistency.public()}


def test_a_proof_of_another_seal_or_root_is_rejected() -> None:
    seals = [f"sha256:{i:064x}" for i in range(7)]
    proof = _proof_of(3, seals)
    with pytest.raises(LedgerError, match=r"^PROOF_REJECTED"):
        proof.check(b"\x00" * 32)
    forged = InclusionProof(103, seals[2], 3, 7, proof.root, proof.hashes)
    with pytest.raises(LedgerError, match=r"^PROOF_REJECTED"):
        forged.check(proof.root)
    document = proof.public()
    with pytest.raises(LedgerError, match=r"^PROOF_INVALID"):
        parse_proof({**document, "seal": seals[2]})  # its leaf_hash is the other seal's
    broken_documents: list[object] = [
        {**document, "extra": 1},
        {key: value for key, value in document.items() if key != "hashes"},
        {**document, "tree_size": "7"},
        {**document, "hashes": ["zz"]},
        {**document, "schema": "other"},
        [],
    ]
    for broken in broken_documents:
        with pytest.raises(LedgerError, match=r"^PROOF_INVALID"):
            parse_proof(broken)


def _completed_of(write: SqlWrite) -> tuple[StoredNode, ...]:
    """The subtrees, level 1 upwards, whose concatenated hashes a leaf's row holds in `nodes`."""
    leaf_index, nodes = write.params["leaf_index"], write.params["nodes"]
    assert isinstance(leaf_index, int) and isinstance(nodes, bytes)
    return tuple(
        StoredNode(NodeId(level, (leaf_index + 1 >> level) - 1), nodes[at : at + HASH_SIZE])
        for level, at in enumerate(range(0, len(nodes) - len(nodes) % HASH_SIZE, HASH_SIZE), 1)
    )


def _completing_leaf(node: NodeId) -> int:
    """The leaf whose append completes `node` (its last leaf), in whose row it is stored."""
    return ((node.index + 1) << node.level) - 1


@given(st.integers(0, 40), st.integers(0, 40))
def test_the_write_paths_append_stores_what_the_frontier_stores(first: int, more: int) -> None:
    """`append_writes` (the write path's, over the stored edge) and `Frontier.append` agree on
    every node, on the edge after, and on the head row's compare-and-swap."""
    seals = [f"sha256:{i:064x}" for i in range(first + more)]
    hashes = [event_leaf_hash(seal) for seal in seals]
    start, _ = Frontier(0).append(hashes[:first])
    tree = MerkleTreeRow(first, start.encode(), 7)
    writes, after = append_writes(tree, [(100 + i, seals[i]) for i in range(first, first + more)])
    expected, stored = start.append(hashes[first:])
    assert (after.size, after.frontier, after.revision) == (expected.size, expected.encode(), 8)
    assert all(w.statement is Statement.MERKLE_LEAF_INSERT for w in writes[:-1])
    nodes = [
        (level, index, hashed)
        for w in writes[:-1]
        for level, index, hashed in [
            (0, w.params["leaf_index"], w.params["leaf_hash"]),
            *((item.node.level, item.node.index, item.hash) for item in _completed_of(w)),
        ]
    ]
    assert nodes == [(item.node.level, item.node.index, item.hash) for item in stored]
    # Each subtree is in the row of the leaf that completes it, and nowhere else.
    assert all(
        _completing_leaf(item.node) == w.params["leaf_index"]
        for w in writes[:-1]
        for item in _completed_of(w)
    )
    leaf_events = [w.params["event_id"] for w in writes if "event_id" in w.params]
    assert leaf_events == [100 + i for i in range(first, first + more)]
    assert writes[-1].statement is Statement.MERKLE_TREE_CAS_UPDATE
    assert writes[-1].params["expected_revision"] == 7
