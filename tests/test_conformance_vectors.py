"""Conformance vectors: what another implementation must compute the same way, byte for byte.

`test_vectors_are_golden` writes every vector (inputs and outputs) from this project's own
functions into `snapshots/test_conformance_vectors/`; docs/conformance.md documents the file.
`test_the_documented_rules_reproduce_every_vector` then recomputes every output from the
committed file's inputs with nothing but the standard library and the rules as documented: if
it passes, the page and the file are enough to build a compatible implementation.
"""

from __future__ import annotations

import base64
import hashlib
import json
from pathlib import Path
from typing import Any

import conformance_support as page
from aios_ledger.core.actors import Actor
from aios_ledger.core.digests import canonical_json, digest_bytes, sha256_hex
from aios_ledger.core.envelopes import (
    GovernedExecutionBinding,
    project_execution_envelope,
)
from aios_ledger.core.jsonvalue import JsonObject
from aios_ledger.core.log.legacy_seals import SEAL_VERSION_1, SEAL_VERSION_2, legacy_seal_of
from aios_ledger.core.log.plan import request_digest
from aios_ledger.core.log.records import EventRow
from aios_ledger.core.log.rows import RowWrite, row_image
from aios_ledger.core.log.seals import GENESIS_SEAL, chain_of
from aios_ledger.core.log.tail import EventAppend, LogTail
from aios_ledger.core.log.verification import EMPTY_HEAD_DIGEST, roll_head
from aios_ledger.core.tasks.requests import (
    CancelRequest,
    ClaimRequest,
    SubmitRequest,
    TaskCreateRequest,
    VerifyRequest,
    lease_token_sha256,
)
from syrupy.assertion import SnapshotAssertion

VECTORS = Path(__file__).resolve().parents[1] / "snapshots" / "test_conformance_vectors"
VECTOR_FILE = VECTORS / "test_vectors_are_golden.json"

CANONICAL_VALUES: list[Any] = [
    None,
    True,
    0,
    -17,
    2**63,
    2.5,
    0.1,
    1e-07,
    "",
    "plain",
    'quote " backslash \\ tab \t newline \n',
    "é ünïcödé \u2028 \U0001f600",
    [],
    {},
    [1, "two", None, [3.0]],
    {"b": 1, "a": {"d": [], "c": {}}, "A": "upper sorts first", "é": "non-ASCII key"},
]

LEASE_TOKEN = "tok-0123456789abcdefABCDEF_-.~"


def _canonical() -> list[dict[str, Any]]:
    return [
        {"value": value, "canonical": canonical_json(value), "sha256_hex": sha256_hex(value)}
        for value in CANONICAL_VALUES
    ]


def _digests() -> list[dict[str, Any]]:
    cases = [
        ("evidence", b""),
        ("evidence", b"x"),
        ("spec", b"x"),
        ("output", b'{"ok":true}'),
        ("aios.execution_envelope.v1", bytes(range(256))),
    ]
    return [
        {"domain": domain, "data_hex": data.hex(), "digest": digest_bytes(domain, data)}
        for domain, data in cases
    ]


def _envelopes() -> list[dict[str, Any]]:
    binding = {
        "task_id": "task-vector-1",
        "job_id": "job-vector-1",
        "repository": "acme/widgets",
        "base_oid": "a" * 40,
        "expected_branch_oid": "a" * 40,
        "target_branch": "agent/task-vector-1",
        "branch_mode": "CREATE_NEW",
        "generation": 1,
        "idempotency_key": "binding-vector-1",
    }
    actions: list[dict[str, Any]] = [
        {
            "action": "agent_runtime",
            "adapter": "openclaw",
            "capability_scope": ["agent.runtime.openclaw"],
            "runtime_input": {"goal": "Fix the flaky test", "trace_id": "task-vector-1"},
        },
        {
            "action": "source_capture",
            "adapter": "source_capture",
            "capability_scope": ["git.read"],
            "runtime_input": None,
        },
    ]
    bound = GovernedExecutionBinding.from_mapping(binding)
    return [
        {
            "binding": binding,
            "action": action,
            "envelope": project_execution_envelope(bound, action),
        }
        for action in actions
    ]


_EVENTS = [
    ("task-vector-1", None, "TASK_CREATED", {"priority": 0}, "2026-08-20T00:00:00Z"),
    ("task-vector-1", "agent-7", "TASK_CLAIMED", {"attempt": 1}, "2026-08-20T00:00:01Z"),
    (None, None, "RUN_CREATED", {"run_id": "r-1", "session_id": "s-1"}, "2026-08-20T00:00:02Z"),
    ("task-vector-1", "agent-7", "TASK_HEARTBEAT", {"attempt": 1}, "2026-08-20T00:00:03Z"),
]
# Events sealed v2: each with the state rows its transition wrote, every column of each.
_TASK_ROW = {
    "task_id": "task-vector-1",
    "status": "SUBMITTED",
    "attempt": 1,
    "claimed_by": None,
    "result_json": '{"ok":true}',
    "revision": 4,
    # A whole second digests in its whole-second spelling; a fraction is digested as written;
    # `seq` is not digested.
    "updated_at": "2026-08-20T00:00:04.000Z",
    "created_at": "2026-08-20T00:00:01.250Z",
    "seq": 1,
}
_V2_EVENTS = [
    (
        ("task-vector-1", "agent-7", "RESULT_SUBMITTED", {"attempt": 1}, "2026-08-20T00:00:04Z"),
        [("tasks", "task-vector-1", _TASK_ROW)],
    ),
    ((None, None, "GOVERNED_BINDING_REGISTERED", {"job_id": "j"}, "2026-08-20T00:00:05Z"), []),
]


def _seals() -> dict[str, Any]:
    tips: dict[str, tuple[int, str]] = {}
    head = EMPTY_HEAD_DIGEST
    events = []
    sealed: list[tuple[Any, list[tuple[str, str, dict[str, Any]]] | None]] = [
        *((event, None) for event in _EVENTS),
        *_V2_EVENTS,
    ]
    for event_id, (content, written) in enumerate(sealed, 1):
        task_id, agent_id, event_type, payload, created_at = content
        row = EventRow(event_id, task_id, agent_id, event_type, canonical_json(payload), created_at)
        chain = chain_of(task_id)
        chain_seq, prev_seal = tips.get(chain, (0, GENESIS_SEAL))
        images = None if written is None else [row_image(*state) for state in written]
        version = SEAL_VERSION_1 if written is None else SEAL_VERSION_2
        seal = legacy_seal_of(row, chain_seq + 1, prev_seal, images or (), version)
        tips[chain] = (chain_seq + 1, seal)
        head = roll_head(head, event_id, seal)
        rows = None
        if written is not None and images is not None:
            rows = [
                {"table": table, "key": key, "columns": columns, "digest": image.digest}
                for (table, key, columns), image in zip(written, images, strict=True)
            ]
        events.append(
            {
                "seal_version": 1 if written is None else 2,
                "rows": rows,
                "event_id": event_id,
                "task_id": task_id,
                "agent_id": agent_id,
                "event_type": event_type,
                "payload_json": row.payload_json,
                "created_at": created_at,
                "chain": chain,
                "chain_seq": chain_seq + 1,
                "prev_seal": prev_seal,
                "seal": seal,
                "head_after": head,
            }
        )
    return {"genesis_seal": GENESIS_SEAL, "empty_head": EMPTY_HEAD_DIGEST, "events": events}


_V5_TASK = "task-vector-5"
_V5_COLUMNS = ("task_id", "status", "attempt", "claimed_by", "revision", "updated_at")
_V5_CREATED = (_V5_TASK, "QUEUED", 0, None, 1, "2026-08-20T00:00:00.000Z")
_V5_CLAIMED = (_V5_TASK, "CLAIMED", 1, "agent-7", 2, "2026-08-20T00:00:01.250Z")
_V5_BINDING = {"task_id": _V5_TASK, "job_id": "j", "created_at": "2026-08-20T00:00:02.000Z"}


def _v5_seals() -> dict[str, Any]:
    """The seals 1.0 writes, as a decision appends them: a task's insert (its row's every
    column), a move of it (what changed), a ledger event writing another row (an image), and
    an event of the task that wrote no task row (the chained digest carried on)."""
    actor = Actor("agent-7", "library")
    task = (_V5_TASK, "agent-7")
    events = [
        EventAppend(
            _V5_TASK,
            None,
            "TASK_CREATED",
            {"priority": 0},
            _V5_CREATED[-1],
            written=RowWrite("tasks", _V5_TASK, _V5_COLUMNS, None, _V5_CREATED),
            actor=actor,
        ),
        EventAppend(
            *task,
            "TASK_CLAIMED",
            {"attempt": 1},
            _V5_CLAIMED[-1],
            written=RowWrite("tasks", _V5_TASK, _V5_COLUMNS, _V5_CREATED, _V5_CLAIMED),
            actor=actor,
        ),
        EventAppend(
            None,
            None,
            "GOVERNED_BINDING_REGISTERED",
            {"job_id": "j"},
            "2026-08-20T00:00:02.000Z",
            rows=(row_image("governed_bindings", f"{_V5_TASK} j", _V5_BINDING),),
            actor=actor,
        ),
        EventAppend(*task, "TASK_HEARTBEAT", {"attempt": 1}, "2026-08-20T00:00:03Z", actor=actor),
    ]
    tail = LogTail.read(1, {chain_of(event.task_id) for event in events}, [])
    appended, _ = tail.append(events)
    head = EMPTY_HEAD_DIGEST
    lines = []
    for placed in appended:
        event, seal = placed.event, placed.seal
        head = roll_head(head, event.event_id, seal.seal)
        rows = [
            {**image.public(), "columns": _V5_BINDING}
            for image in (row.image() for row in placed.rows)
        ]
        lines.append({**event.public(), **seal.public(), "rows": rows, "head_after": head})
    return {"events": lines}


def _requests() -> list[dict[str, Any]]:
    create = TaskCreateRequest.from_mapping(
        {"task_id": "task-vector-1", "goal": "Fix it", "instructions": "Keep it small."}
    )
    claim = ClaimRequest.from_mapping(
        {"agent_id": "agent-7", "capabilities": ["python"], "lease_seconds": 60}
    )
    submit = SubmitRequest.from_mapping(
        {
            "task_id": "task-vector-1",
            "lease_token": LEASE_TOKEN,
            "result": {"status": "SUCCEEDED", "summary": "done"},
            "idempotency_key": "submit-1",
        }
    )
    verify = VerifyRequest.from_mapping(
        {
            "task_id": "task-vector-1",
            "decision": "SUCCEEDED",
            "reason": "green",
            "idempotency_key": "verify-1",
        }
    )
    cancel = CancelRequest.from_mapping(
        {"task_id": "task-vector-1", "reason": "not needed", "idempotency_key": "cancel-1"}
    )
    cases: list[tuple[str, str | None, Any]] = [
        ("create", None, create.public()),
        ("claim", None, claim.public(LEASE_TOKEN)),
        ("submit", "task-vector-1", submit.public()),
        ("verify", "task-vector-1", verify.public()),
        ("cancel", "task-vector-1", cancel.public()),
    ]
    return [
        {
            "operation": operation,
            "subject": subject,
            "request": public,
            "digest": request_digest(operation, subject, public),
        }
        for operation, subject, public in cases
    ]


# Go's sumdb/note test key (the log) and transparency-dev/formats' witness test key.
LOG_SIGNER_KEY = "PRIVATE+KEY+PeterNeumann+c74f20a3+AYEKFALVFGyNhPJEMzD1QIDr+Y7hfZx09iUvxdXHKDFz"
WITNESS_SIGNER_KEY = "PRIVATE+KEY+Wit1+55ee4561+AeadRiG7XM4XiieCHzD8lxysXMwcViy5nYsoXURWGrlE"


def _checkpoints() -> dict[str, Any]:
    from aios_ledger.core.log.merkle import Frontier, leaf_hash
    from aios_ledger.core.proofs import (
        COSIGNATURE_V1,
        Checkpoint,
        checkpoint_message,
        cosignature,
        cosignature_message,
        signed_checkpoint,
    )
    from aios_ledger.shell.proofs.keys import parse_signer

    log, witness = parse_signer(LOG_SIGNER_KEY), parse_signer(WITNESS_SIGNER_KEY)
    head = Frontier(0).append(leaf_hash(bytes([i])) for i in range(3))[0].head()
    checkpoint = Checkpoint(log.verifier.name, head.size, head.root)
    note = signed_checkpoint(checkpoint, log.verifier, log.sign(checkpoint_message(checkpoint)))
    timestamp = 1700000000
    message = cosignature_message(checkpoint.body(), timestamp)
    line = cosignature(witness.verifier, timestamp, witness.sign(message))
    return {
        "log": {
            "signer_key": LOG_SIGNER_KEY,
            "public_key_hex": log.verifier.public_key.hex(),
            "verifier_key": log.verifier.text(),
            "key_id_hex": log.verifier.key_id.hex(),
        },
        "witness": {
            "signer_key": WITNESS_SIGNER_KEY,
            "public_key_hex": witness.verifier.public_key.hex(),
            "verifier_key": witness.verifier.text(),
            "cosignature_key_id_hex": witness.verifier.as_type(COSIGNATURE_V1).key_id.hex(),
        },
        "tree_size": head.size,
        "root_hex": head.root.hex(),
        "body": checkpoint.body(),
        "signed_note": note.encode(),
        "timestamp": timestamp,
        "cosigned_message": message.decode(),
        "cosigned_note": note.with_signature(line).encode(),
    }


MERKLE_LEAVES = 7


def _merkle() -> dict[str, Any]:
    """Event leaves (each event's seal text) and the RFC 6962/9162 tree over them: each leaf's
    hash, the root of every prefix, and inclusion and consistency proofs, as `prove` writes."""
    from aios_ledger.core.log.merkle import (
        Frontier,
        consistency_proof,
        event_leaf_hash,
        inclusion_proof,
        leaf_hash,
    )

    seals = [
        "sha256:" + hashlib.sha256(f"event {n}".encode()).hexdigest()
        for n in range(1, MERKLE_LEAVES + 1)
    ]
    frontier, nodes = Frontier(0), {}
    roots = [{"size": 0, "root_hex": frontier.head().root.hex()}]
    for seal in seals:
        frontier, written = frontier.append([event_leaf_hash(seal)])
        nodes.update({item.node: item.hash for item in written})
        roots.append({"size": frontier.size, "root_hex": frontier.head().root.hex()})
    return {
        "empty_leaf_hash_hex": leaf_hash(b"").hex(),
        "leaves": [{"seal": seal, "leaf_hash_hex": event_leaf_hash(seal).hex()} for seal in seals],
        "roots": roots,
        "inclusion": [
            {
                "leaf_index": index,
                "tree_size": size,
                "path_hex": [h.hex() for h in inclusion_proof(index, size, nodes)],
            }
            for index, size in ((0, 1), (0, 7), (3, 7), (6, 7), (4, 6))
        ],
        "consistency": [
            {
                "old_size": old,
                "new_size": new,
                "path_hex": [h.hex() for h in consistency_proof(old, new, nodes)],
            }
            for old, new in ((1, 7), (3, 7), (4, 7), (6, 7), (7, 7), (2, 5))
        ],
    }


def _dsse() -> dict[str, Any]:
    """An in-toto Statement v1 as a DSSE envelope signed with the log's (deterministic) key:
    the payload bytes, the PAE the signature covers and the envelope."""
    from aios_ledger.core.attest.dsse import (
        IN_TOTO_PAYLOAD_TYPE,
        note_key_id,
        pae,
        sign_envelope,
        statement_bytes,
    )
    from aios_ledger.shell.proofs.keys import parse_signer

    signer = parse_signer(LOG_SIGNER_KEY)
    statement: JsonObject = {
        "_type": "https://in-toto.io/Statement/v1",
        "subject": [{"name": "agent/t-1", "digest": {"gitCommit": "1" * 40}}],
        "predicateType": "https://slsa.dev/provenance/v1",
        "predicate": {"buildDefinition": {"buildType": "urn:example"}, "runDetails": {}},
    }
    keyid = note_key_id(signer.verifier.name, signer.verifier.public_key)
    return {
        "statement": statement,
        "payload_type": IN_TOTO_PAYLOAD_TYPE,
        "payload": statement_bytes(statement).decode("ascii"),
        "pae_hex": pae(IN_TOTO_PAYLOAD_TYPE, statement_bytes(statement)).hex(),
        "keyid": keyid,
        "envelope": sign_envelope(statement, signer.sign, keyid),
    }


def vectors() -> dict[str, Any]:
    return {
        "canonical_json": _canonical(),
        "digest_bytes": _digests(),
        "execution_envelopes": _envelopes(),
        "event_seals": _seals(),
        "event_seals_v5": _v5_seals(),
        "request_digests": _requests(),
        "lease_tokens": [{"token": LEASE_TOKEN, "sha256": lease_token_sha256(LEASE_TOKEN)}],
        "checkpoints": _checkpoints(),
        "merkle": _merkle(),
        "dsse": _dsse(),
    }


def test_vectors_are_golden(golden: SnapshotAssertion) -> None:
    assert golden == vectors()


# ---------------------------------------------------------------------------------------------
# An independent implementation of docs/conformance.md: the standard library only.


def test_the_documented_rules_reproduce_every_vector() -> None:
    document = json.loads(VECTOR_FILE.read_text(encoding="utf-8"))
    for case in document["canonical_json"]:
        assert page.canonical(case["value"]) == case["canonical"]
        assert hashlib.sha256(case["canonical"].encode("ascii")).hexdigest() == case["sha256_hex"]
    for case in document["digest_bytes"]:
        assert page.domain_digest(case["domain"], bytes.fromhex(case["data_hex"])) == case["digest"]
    for case in document["execution_envelopes"]:
        envelope = dict(case["envelope"])
        digest = envelope.pop("execution_digest")
        assert envelope["binding"] == case["binding"]
        assert digest == page.domain_digest(
            envelope["schema"], page.canonical(envelope).encode("ascii")
        )
    seals = document["event_seals"]
    head = page.EMPTY_HEAD
    assert head == seals["empty_head"]
    assert seals["genesis_seal"] == page.GENESIS_SEAL
    tips: dict[str, tuple[int, str]] = {}
    for event in seals["events"]:
        chain = page.chain_of(event["task_id"])
        chain_seq, prev_seal = tips.get(chain, (0, page.GENESIS_SEAL))
        rows = None
        if event["seal_version"] == 2:
            rows = []
            for written in event["rows"]:
                digest = page.row_digest(written["table"], written["key"], written["columns"])
                assert digest == written["digest"]
                rows.append({"table": written["table"], "key": written["key"], "digest": digest})
        seal = page.event_seal(event, chain_seq + 1, prev_seal, event["seal_version"], rows)
        assert (event["chain"], event["chain_seq"], event["prev_seal"], event["seal"]) == (
            chain,
            chain_seq + 1,
            prev_seal,
            seal,
        )
        tips[chain] = (chain_seq + 1, seal)
        head = page.roll_head(head, event["event_id"], seal)
        assert head == event["head_after"]
    _reproduce_v5_seals(document["event_seals_v5"])
    for case in document["request_digests"]:
        bound = {"operation": case["operation"], "subject": case["subject"]}
        bound["request"] = case["request"]
        expected = hashlib.sha256(page.canonical(bound).encode("ascii")).hexdigest()
        assert expected == case["digest"]
    for case in document["lease_tokens"]:
        assert hashlib.sha256(case["token"].encode("utf-8")).hexdigest() == case["sha256"]
    _check_checkpoint_vectors(document["checkpoints"])
    _check_merkle_vectors(document["merkle"])
    _check_dsse_vectors(document["dsse"], document["checkpoints"]["log"])


def _mth(leaves: list[bytes]) -> bytes:
    """RFC 6962 §2.1: MTH over the leaf hashes."""
    if not leaves:
        return hashlib.sha256(b"").digest()
    if len(leaves) == 1:
        return leaves[0]
    k = 1 << ((len(leaves) - 1).bit_length() - 1)
    return hashlib.sha256(b"\x01" + _mth(leaves[:k]) + _mth(leaves[k:])).digest()


def _path(m: int, leaves: list[bytes]) -> list[bytes]:
    """RFC 6962 §2.1.1: PATH(m, D[n])."""
    if len(leaves) <= 1:
        return []
    k = 1 << ((len(leaves) - 1).bit_length() - 1)
    if m < k:
        return [*_path(m, leaves[:k]), _mth(leaves[k:])]
    return [*_path(m - k, leaves[k:]), _mth(leaves[:k])]


def _subproof(m: int, leaves: list[bytes], whole: bool) -> list[bytes]:
    """RFC 6962 §2.1.2: SUBPROOF(m, D[n], b)."""
    n = len(leaves)
    if m == n:
        return [] if whole else [_mth(leaves)]
    k = 1 << ((n - 1).bit_length() - 1)
    if m <= k:
        return [*_subproof(m, leaves[:k], whole), _mth(leaves[k:])]
    return [*_subproof(m - k, leaves[k:], False), _mth(leaves[:k])]


def _check_merkle_vectors(vector: dict[str, Any]) -> None:
    """Leaf hashes (0x00 || the seal's ASCII text), node hashes (0x01 || left || right), the
    roots, and the proofs, all from RFC 6962's recursive definitions."""
    assert hashlib.sha256(b"\x00").hexdigest() == vector["empty_leaf_hash_hex"]
    leaves = []
    for leaf in vector["leaves"]:
        hashed = hashlib.sha256(b"\x00" + leaf["seal"].encode("ascii")).digest()
        assert hashed.hex() == leaf["leaf_hash_hex"]
        leaves.append(hashed)
    for root in vector["roots"]:
        assert _mth(leaves[: root["size"]]).hex() == root["root_hex"]
    for case in vector["inclusion"]:
        path = _path(case["leaf_index"], leaves[: case["tree_size"]])
        assert [h.hex() for h in path] == case["path_hex"]
    for case in vector["consistency"]:
        old, new = case["old_size"], case["new_size"]
        path = [] if old == new else _subproof(old, leaves[:new], True)
        assert [h.hex() for h in path] == case["path_hex"]


def _check_dsse_vectors(vector: dict[str, Any], log: dict[str, Any]) -> None:
    """The payload is the Statement's canonical JSON; the signature covers DSSE's PAE of it;
    the keyid is the log key's signed-note key ID (everything but Ed25519 itself)."""
    payload = page.canonical(vector["statement"]).encode("ascii")
    assert payload.decode("ascii") == vector["payload"]
    kind = vector["payload_type"].encode()
    pae = b"DSSEv1 %d %s %d %s" % (len(kind), kind, len(payload), payload)
    assert pae.hex() == vector["pae_hex"]
    assert vector["keyid"] == log["key_id_hex"]
    envelope = vector["envelope"]
    assert set(envelope) == {"payload", "payloadType", "signatures"}
    assert base64.b64decode(envelope["payload"]) == payload
    assert envelope["payloadType"] == vector["payload_type"] == "application/vnd.in-toto+json"
    (signature,) = envelope["signatures"]
    assert signature["keyid"] == vector["keyid"] and len(base64.b64decode(signature["sig"])) == 64


def _key_id(name: str, key_type: int, public_key: bytes) -> bytes:
    return hashlib.sha256(name.encode() + b"\n" + bytes([key_type]) + public_key).digest()[:4]


def _check_checkpoint_vectors(vector: dict[str, Any]) -> None:
    """Everything but Ed25519 itself (not in the standard library): key IDs and key texts, the
    checkpoint body, the cosigned message, and how each signature line is laid out."""
    log_public = bytes.fromhex(vector["log"]["public_key_hex"])
    witness_public = bytes.fromhex(vector["witness"]["public_key_hex"])
    log_id = _key_id("PeterNeumann", 1, log_public)
    assert log_id.hex() == vector["log"]["key_id_hex"]
    encoded = base64.b64encode(b"\x01" + log_public).decode()
    assert vector["log"]["verifier_key"] == f"PeterNeumann+{log_id.hex()}+{encoded}"
    assert _key_id("Wit1", 4, witness_public).hex() == vector["witness"]["cosignature_key_id_hex"]
    root = base64.b64encode(bytes.fromhex(vector["root_hex"])).decode()
    body = f"PeterNeumann\n{vector['tree_size']}\n{root}\n"
    assert body == vector["body"]
    message = f"cosignature/v1\ntime {vector['timestamp']}\n{body}"
    assert message == vector["cosigned_message"]
    text, _, lines = vector["cosigned_note"].partition("\n\n")
    assert text + "\n" == body and vector["signed_note"].startswith(body + "\n")
    log_line, witness_line = lines.splitlines()
    assert vector["signed_note"] == body + "\n" + log_line + "\n"
    name, raw = log_line.removeprefix("\u2014 ").split(" ")
    signature = base64.b64decode(raw)
    assert (name, signature[:4], len(signature)) == ("PeterNeumann", log_id, 4 + 64)
    name, raw = witness_line.removeprefix("\u2014 ").split(" ")
    signature = base64.b64decode(raw)
    assert name == "Wit1" and signature[:4].hex() == vector["witness"]["cosignature_key_id_hex"]
    assert int.from_bytes(signature[4:12], "big") == vector["timestamp"] and len(signature) == 76


def _reproduce_v5_seals(vectors: dict[str, Any]) -> None:
    """Each v5 seal from its event, its rows and the chained task row, by the page's rules."""
    tips: dict[str, tuple[int, str, str | None]] = {}
    head = page.EMPTY_HEAD
    for event in vectors["events"]:
        assert event["seal_version"] == 5 and event["sealed_at_adoption"] is False
        chain = page.chain_of(event["task_id"])
        chain_seq, prev_seal, chained = tips.get(chain, (0, page.GENESIS_SEAL, None))
        for written in event["rows"]:
            digest = page.row_digest(written["table"], written["key"], written["columns"])
            assert digest == written["digest"]
        changes = event["row_changes"]
        if changes is not None:
            chained = page.chained_row_digest(chained, event["task_id"], changes)
        assert event["chained_row_digest"] == chained
        seal = page.event_seal(
            event, chain_seq + 1, prev_seal, 5, event["rows"], (changes, chained)
        )
        assert (event["chain"], event["chain_seq"], event["prev_seal"], event["seal"]) == (
            chain,
            chain_seq + 1,
            prev_seal,
            seal,
        )
        tips[chain] = (chain_seq + 1, seal, chained)
        head = page.roll_head(head, event["event_id"], seal)
        assert head == event["head_after"]
