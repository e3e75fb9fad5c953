"""Signed notes, checkpoints and cosignatures/v1 against the published examples, byte for byte.

Sources (each vector below is copied from them, never computed by this project):
- C2SP signed-note.md (its "Example" verifier key and note; the quasimodo note),
- C2SP tlog-checkpoint.md and tlog-cosignature.md (their checkpoint and its cosignature line,
  and the cosigned message of `time 1679315147`),
- golang.org/x/mod/sumdb/note note_test.go (PeterNeumann's and EnochRoot's keys and the
  signatures note.Sign writes with them) and sumdb/tlog note_test.go (FormatTree),
- github.com/transparency-dev/formats log/note_test.go (a sum.golang.org checkpoint and its
  key), note/note_cosigv1_test.go (cosignature/v1 keys and a timestamp) and
  witness/witness_test.go (witness keys).
Ed25519 is deterministic (RFC 8032), so signing the same text with the same key must give the
published signature exactly.
"""

from __future__ import annotations

import base64
import hashlib
from collections.abc import Sequence

import pytest
from aios_ledger.core import LedgerError, Timestamp
from aios_ledger.core.log.merkle import Frontier, consistency_proof, leaf_hash
from aios_ledger.core.proofs import (
    COSIGNATURE_V1,
    ED25519,
    Checkpoint,
    CosignPlan,
    CosignRequest,
    NoteSignature,
    SignedNote,
    SignerKey,
    VerifierKey,
    WitnessState,
    checkpoint_message,
    consistency_proof_needed,
    cosignature,
    cosignature_message,
    cosignature_time,
    cosigned_note,
    decide_cosign,
    ed25519_signature,
    open_checkpoint,
    open_note,
    parse_note,
    signed_checkpoint,
    verified_cosignatures,
)
from aios_ledger.shell.proofs.keys import check_ed25519, parse_signer
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from syrupy.assertion import SnapshotAssertion

# golang.org/x/mod/sumdb/note, note_test.go
PETER_VKEY = "PeterNeumann+c74f20a3+ARpc2QcUPDhMQegwxbzhKqiBfsVkmqq/LDE4izWy10TW"
PETER_SKEY = "PRIVATE+KEY+PeterNeumann+c74f20a3+AYEKFALVFGyNhPJEMzD1QIDr+Y7hfZx09iUvxdXHKDFz"
ENOCH_VKEY = "EnochRoot+af0cfe78+ATtqJ7zOtqQtYqOo0CpvDXNlMhV3HeJDpjrASKGLWdop"
PETER_TEXT = (
    "If you think cryptography is the answer to your problem,\n"
    "then you don't know what your problem is.\n"
)
PETER_SIG = (
    "\u2014 PeterNeumann x08go/ZJkuBS9UG/SffcvIAQxVBtiFupLLr8pAcElZInNIuGUgYN1FFYC2pZSNXgKvqfqdng"
    "otpRZb6KE6RyyBwJnAM=\n"
)
ENOCH_SIG = (
    "\u2014 EnochRoot rwz+eBzmZa0SO3NbfRGzPCpDckykFXSdeX+MNtCOXm2/5n2tiOHp+vAF1aGrQ5ovTG01oOTGwnWL"
    "ox33WWd1RvMc+QQ=\n"
)
# C2SP signed-note.md, "Example"
FOO_VKEY = "example.com/foo+530d903a+AekyeRrm56hApGFkyQR4ZCbV54Id2LKaANYcrnKv3U2k"
FOO_NOTE = (
    "This is an example message.\n\n\u2014 example.com/foo Uw2QOkn8srV1yJGh2VYRlL1Tnagv1YEq6TfXpp"
    "zi2ONncAlTgK7Ztg1ERYNZXsYjOBH3mFXmRKuwHjG1Yu72IneyaQM=\n"
)
# C2SP tlog-checkpoint.md and tlog-cosignature.md
SOFA_BODY = "example.com/behind-the-sofa\n20852163\nCsUYapGGPo4dkMgIAUqom/Xajj7h2fB2MPA3j2jxq2I=\n"
SOFA_LOG_LINE = (
    "\u2014 example.com/behind-the-sofa Az3grlgtzPICa5OS8npVmf1Myq/5IZniMp+ZJurmRDeOoRDe4URYN7u5/"
    "Zhcyv2q1gGzGku9nTo+zyWE+xeMcTOAYQ8=\n"
)
SOFA_WITNESS_LINE = (
    "\u2014 witness.example.com/w1 jWbPPwAAAABkGFDLEZMHwSRaJNiIDoe9DYn/zXcrtPHeolMI5OWXEhZCB9dlrD"
    "JsX3b2oyin1nPZqhf5nNo0xUe+mbIUBkBIfZ+qnA==\n"
)
SOFA_COSIGNED_MESSAGE = (
    "cosignature/v1\ntime 1679315147\nexample.com/behind-the-sofa\n20852163\n"
    "CsUYapGGPo4dkMgIAUqom/Xajj7h2fB2MPA3j2jxq2I=\n"
)
# transparency-dev/formats log/note_test.go: a checkpoint sum.golang.org signed, and its key
SUMDB_VKEY = "sum.golang.org+033de0ae+Ac4zctda0e5eza+HJyk9SxEdh+s3Ux18htTTAD8OuAn8"
SUMDB_NOTE = (
    "go.sum database tree\n6476701\nmb8QLQIs0Z0yP5Cstq6guj87oXWeC9gEM8oVikmm9Wk=\n\n"
    "\u2014 sum.golang.org Az3grsLX85Gz+s1SiTbgkuqxgItqFq7gsMUEyVnrsa9LM7Us9S+1xbFIGu95949rj4nPRYf"
    "vimWEPWL+o3GeoWwOoAw=\n"
)
# transparency-dev/formats note/note_cosigv1_test.go and witness/witness_test.go
REMORA_COSIGNATURE_VKEY = "remora.n621.de+da77ade7+BOvN63jn/bLvkieywe8R6UYAtVtNbZpXh34x7onlmtw2"
TEST_ED25519_VKEY = "TEST+7997405c+AQcC+FTVKf0jlTdHDY3rbevmnKxxPjigCXlVtGe6RIr6"
TIMESTAMPED = (
    "ZGhGuQAAAABm/qTPeyKXD+R2rzyQsxPiP8mXum7qq/iF0u4vanlqJyocWODBt97w9uL+8qT7S5gxEHWWOworDcFiEBYJ"
    "XORmnFBOBA=="
)
WIT1_VKEY = "Wit1+55ee4561+AVhZSmQj9+SoL+p/nN0Hh76xXmF7QcHfytUrI1XfSClk"
WIT1_SKEY = "PRIVATE+KEY+Wit1+55ee4561+AeadRiG7XM4XiieCHzD8lxysXMwcViy5nYsoXURWGrlE"


def _ed25519_check_written_from_the_rfc(public: bytes, message: bytes, signature: bytes) -> bool:
    """The test's own Ed25519 check, through `cryptography` directly (not the shell's)."""
    from cryptography.exceptions import InvalidSignature
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

    try:
        Ed25519PublicKey.from_public_bytes(public).verify(signature, message)
    except InvalidSignature:
        return False
    return True


# -- keys ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "text", [PETER_VKEY, ENOCH_VKEY, FOO_VKEY, SUMDB_VKEY, WIT1_VKEY, TEST_ED25519_VKEY]
)
def test_published_verifier_keys_parse_and_write_back(text: str) -> None:
    key = VerifierKey.parse(text)
    assert key.key_type == ED25519
    assert key.text() == text
    # The key ID is SHA-256(name || 0x0A || 0x01 || public key)[:4].
    digest = hashlib.sha256(key.name.encode() + b"\n\x01" + key.public_key).digest()
    assert key.key_id == digest[:4]


def test_a_published_cosignature_key_has_the_0x04_type_and_its_own_id() -> None:
    key = VerifierKey.parse(REMORA_COSIGNATURE_VKEY)
    assert key.key_type == COSIGNATURE_V1 and key.key_id.hex() == "da77ade7"
    assert key.text() == REMORA_COSIGNATURE_VKEY
    # The same Ed25519 key as a cosigner has another key ID (formats' VKeyToCosignatureV1).
    plain = VerifierKey.parse(TEST_ED25519_VKEY)
    assert plain.as_type(COSIGNATURE_V1).key_id != plain.key_id
    assert (
        plain.as_type(COSIGNATURE_V1).key_id
        == (hashlib.sha256(b"TEST\n\x04" + plain.public_key).digest()[:4])
    )


def test_a_signer_key_gives_its_published_verifier_key() -> None:
    for skey, vkey in ((PETER_SKEY, PETER_VKEY), (WIT1_SKEY, WIT1_VKEY)):
        assert parse_signer(skey).verifier.text() == vkey
        assert SignerKey.parse(skey).text() == skey


def test_every_mangling_of_a_verifier_key_is_refused() -> None:
    """Go's TestNewVerifier: every proper substring and every byte changed by one."""
    for start in range(len(PETER_VKEY) + 1):
        for end in range(start + 1, len(PETER_VKEY) + 1):
            if (start, end) != (0, len(PETER_VKEY)):
                with pytest.raises(LedgerError, match="NOTE_KEY_INVALID"):
                    VerifierKey.parse(PETER_VKEY[start:end])
    for index, character in enumerate(PETER_VKEY):
        changed = PETER_VKEY[:index] + chr(ord(character) + 1) + PETER_VKEY[index + 1 :]
        with pytest.raises(LedgerError, match="NOTE_KEY_INVALID"):
            VerifierKey.parse(changed)
    # Go's two: a key of the wrong length and an unknown type, each with its key ID adjusted.
    for text in (
        "PeterNeumann+cc469956+ARpc2QcUPDhMQegwxbzhKqiBfsVkmqq/LDE4izWy10TWBADKEY==",
        "PeterNeumann+173116ae+ZRpc2QcUPDhMQegwxbzhKqiBfsVkmqq/LDE4izWy10TW",
    ):
        with pytest.raises(LedgerError, match="NOTE_KEY_INVALID"):
            VerifierKey.parse(text)


def test_every_mangling_of_a_signer_key_is_refused() -> None:
    """Go's TestNewSigner: proper substrings and bytes changed by one never load."""
    for start in range(len(PETER_SKEY) + 1):
        for end in range(start + 1, len(PETER_SKEY) + 1):
            if (start, end) != (0, len(PETER_SKEY)):
                with pytest.raises(LedgerError, match="NOTE_KEY_INVALID"):
                    parse_signer(PETER_SKEY[start:end])
    for index, character in enumerate(PETER_SKEY):
        changed = PETER_SKEY[:index] + chr(ord(character) + 1) + PETER_SKEY[index + 1 :]
        with pytest.raises(LedgerError, match="NOTE_KEY_INVALID"):
            parse_signer(changed)


# -- signed notes -------------------------------------------------------------------------------


def test_signing_gives_gos_note_sign_output_byte_for_byte() -> None:
    signer = parse_signer(PETER_SKEY)
    signature = signer.sign(PETER_TEXT.encode())
    note = SignedNote(PETER_TEXT, (ed25519_signature(signer.verifier, signature),))
    assert note.encode() == PETER_TEXT + "\n" + PETER_SIG
    # Signing again replaces the key's own line (Go's "existing signature is replaced").
    bad = NoteSignature("PeterNeumann", bytes.fromhex("c74f20a3"), b"\x00" * 64)
    resigned = SignedNote(PETER_TEXT, (bad,)).with_signature(note.signatures[0])
    assert resigned.encode() == PETER_TEXT + "\n" + PETER_SIG


def test_open_checks_known_keys_and_keeps_unknown_ones_aside() -> None:
    peter, enoch = VerifierKey.parse(PETER_VKEY), VerifierKey.parse(ENOCH_VKEY)
    message = PETER_TEXT + "\n" + PETER_SIG + ENOCH_SIG
    opened = open_note(message, [peter], check_ed25519)
    assert opened.text == PETER_TEXT
    assert [s.name for s in opened.verified] == ["PeterNeumann"]
    assert [s.name for s in opened.unverified] == ["EnochRoot"]
    both = open_note(message, [peter, enoch], check_ed25519)
    assert [s.name for s in both.verified] == ["PeterNeumann", "EnochRoot"]
    with pytest.raises(LedgerError, match="NOTE_UNVERIFIED"):
        open_note(message, [], check_ed25519)
    # A repeated signature counts once; 101 signature lines are refused.
    assert len(open_note(PETER_TEXT + "\n" + PETER_SIG * 3, [peter], check_ed25519).verified) == 1
    with pytest.raises(LedgerError, match="NOTE_INVALID"):
        open_note(PETER_TEXT + "\n" + PETER_SIG * 101, [peter], check_ed25519)
    # A known key's signature that does not verify fails the whole note.
    broken = PETER_SIG[:60] + "ABCD" + PETER_SIG[60:]
    with pytest.raises(LedgerError, match="NOTE_SIGNATURE_INVALID"):
        open_note(PETER_TEXT + "\n" + broken, [peter], check_ed25519)


@pytest.mark.parametrize(
    "message",
    [
        PETER_TEXT,
        PETER_TEXT + "\n",
        PETER_TEXT + "\n" + PETER_SIG[:-1],
        "\x01" + PETER_TEXT + "\n" + PETER_SIG,
        PETER_TEXT + "\n" + "\u2014 Bad Name x08go/ZJkuBS9UG/SffcvIAQxVBtiFupLLr8pAcElZInNIuGUgYN"
        "1FFYC2pZSNXgKvqfqdngotpRZb6KE6RyyBwJnAM=",
        PETER_TEXT + "\n" + PETER_SIG + "Unexpected line.\n",
    ],
)
def test_gos_malformed_notes_are_refused(message: str) -> None:
    with pytest.raises(LedgerError, match="NOTE_INVALID"):
        open_note(message, [VerifierKey.parse(PETER_VKEY)], check_ed25519)


def test_invalid_utf8_is_refused() -> None:
    with pytest.raises(LedgerError, match="NOTE_INVALID"):
        parse_note(b"\xff" + (PETER_TEXT + "\n" + PETER_SIG).encode())


def test_the_specs_example_note_verifies_under_its_key() -> None:
    opened = open_note(FOO_NOTE, [VerifierKey.parse(FOO_VKEY)], check_ed25519)
    assert opened.text == "This is an example message.\n"
    assert parse_note(FOO_NOTE).encode() == FOO_NOTE
    tampered = FOO_NOTE.replace("example message", "example massage")
    with pytest.raises(LedgerError, match="NOTE_SIGNATURE_INVALID"):
        open_note(tampered, [VerifierKey.parse(FOO_VKEY)], check_ed25519)


# -- checkpoints --------------------------------------------------------------------------------


def test_the_specs_checkpoint_parses_and_writes_back() -> None:
    note = parse_note(SOFA_BODY + "\n" + SOFA_LOG_LINE + SOFA_WITNESS_LINE)
    checkpoint = Checkpoint.parse(note.text)
    assert (checkpoint.origin, checkpoint.size) == ("example.com/behind-the-sofa", 20852163)
    assert checkpoint.body() == SOFA_BODY
    assert note.encode() == SOFA_BODY + "\n" + SOFA_LOG_LINE + SOFA_WITNESS_LINE


def test_the_sumdb_checkpoint_verifies_under_sum_golang_orgs_key() -> None:
    key = VerifierKey.parse(SUMDB_VKEY)
    opened = open_checkpoint(SUMDB_NOTE, key, check_ed25519, origin="go.sum database tree")
    assert opened.checkpoint.origin == "go.sum database tree"
    assert opened.checkpoint.size == 6476701
    assert opened.checkpoint.root == base64.b64decode(
        "mb8QLQIs0Z0yP5Cstq6guj87oXWeC9gEM8oVikmm9Wk="
    )


def test_a_checkpoint_whose_origin_is_not_the_key_name_is_refused() -> None:
    """sum.golang.org's key is named unlike its origin: by default the origin is the key's."""
    with pytest.raises(LedgerError, match="CHECKPOINT_INVALID"):
        open_checkpoint(SUMDB_NOTE, VerifierKey.parse(SUMDB_VKEY), check_ed25519)


def test_format_tree_body_of_go_sumdb() -> None:
    """sumdb/tlog TestFormatTree: the body of a tree of 123456789012 leaves whose root is the
    RFC 6962 record hash of "hello world"."""
    checkpoint = Checkpoint("go.sum database tree", 123456789012, leaf_hash(b"hello world"))
    assert checkpoint.body() == (
        "go.sum database tree\n123456789012\nTszzRgjTG6xce+z2AG31kAXYKBgQVtCSCE40HmuwBb0=\n"
    )


@pytest.mark.parametrize(
    "text",
    [
        "Head\n9944\n",
        "\n9944\ndGhlIHZpZXcgZnJvbSB0aGUgdHJlZSB0b3BzIGlzIGdyZWF0IQ==\n",
        "Log\n123\nYmFuYW5hcw==",
        "go.sum database tree\n0xabcdef\nTszzRgjTG6xce+z2AG31kAXYKBgQVtCSCE40HmuwBb0=\n",
        "go.sum database tree\n123456789012\nTszzRgjTG6xce+z2AG31kAXYKBgQVtCSCE40HmuwBTOOBIG=\n",
        "log\n0123\nTszzRgjTG6xce+z2AG31kAXYKBgQVtCSCE40HmuwBb0=\n",  # a leading zero
        "log\n-1\nTszzRgjTG6xce+z2AG31kAXYKBgQVtCSCE40HmuwBb0=\n",
        "log\n1\nYmFuYW5hcw==\n",  # a root of 7 bytes
        "log\n1\nTszzRgjTG6xce+z2AG31kAXYKBgQVtCSCE40HmuwBb0=\n\n",  # an empty extension line
    ],
)
def test_malformed_checkpoints_are_refused(text: str) -> None:
    with pytest.raises(LedgerError, match="CHECKPOINT_INVALID"):
        Checkpoint.parse(text)


def test_extension_lines_are_kept_and_signed() -> None:
    root = leaf_hash(b"x")
    checkpoint = Checkpoint("log.example/a", 1, root, ("extension one",))
    assert Checkpoint.parse(checkpoint.body()) == checkpoint
    assert checkpoint.body().endswith("\nextension one\n")


# -- cosignatures/v1 ----------------------------------------------------------------------------


def test_the_specs_cosignature_line_carries_the_specs_time() -> None:
    """tlog-cosignature.md's example line: its 8 bytes after the key ID are the timestamp of
    its example signed message, 1679315147."""
    line = parse_note(SOFA_BODY + "\n" + SOFA_LOG_LINE + SOFA_WITNESS_LINE).signatures[1]
    assert line.name == "witness.example.com/w1"
    assert cosignature_time(line) == 1679315147
    assert cosignature_message(SOFA_BODY, 1679315147) == SOFA_COSIGNED_MESSAGE.encode()


def test_formats_cosignature_timestamp_vector() -> None:
    raw = base64.b64decode(TIMESTAMPED)
    line = NoteSignature("w", raw[:4], raw[4:])
    assert cosignature_time(line) == 1727964367
    # formats' "wrong type of signature": a plain 64-byte Ed25519 signature has no timestamp.
    plain = base64.b64decode(PETER_SIG.split(" ")[2])
    with pytest.raises(LedgerError, match="COSIGNATURE_INVALID"):
        cosignature_time(NoteSignature("PeterNeumann", plain[:4], plain[4:]))


def _independent_cosignature(seed: bytes, name: str, timestamp: int, body: str) -> str:
    """A cosignature line written from tlog-cosignature.md alone, for comparison."""
    private = Ed25519PrivateKey.from_private_bytes(seed)
    public = private.public_key().public_bytes_raw()
    key_id = hashlib.sha256(name.encode() + b"\n\x04" + public).digest()[:4]
    message = b"cosignature/v1\ntime " + str(timestamp).encode() + b"\n" + body.encode()
    signature = timestamp.to_bytes(8, "big") + private.sign(message)
    return "\u2014 " + name + " " + base64.b64encode(key_id + signature).decode() + "\n"


def test_a_cosignature_is_the_specs_bytes_and_verifies(golden: SnapshotAssertion) -> None:
    witness = parse_signer(WIT1_SKEY)
    message = cosignature_message(SOFA_BODY, 1679315147)
    assert message == SOFA_COSIGNED_MESSAGE.encode()
    line = cosignature(witness.verifier, 1679315147, witness.sign(message))
    seed = SignerKey.parse(WIT1_SKEY).seed
    assert line.line() == _independent_cosignature(seed, "Wit1", 1679315147, SOFA_BODY)
    note = parse_note(SOFA_BODY + "\n" + SOFA_LOG_LINE).with_signature(line)
    assert verified_cosignatures(note, [VerifierKey.parse(WIT1_VKEY)], check_ed25519) == (line,)
    # The witness's plain Ed25519 key does not open its cosignature as a note signature.
    with pytest.raises(LedgerError, match="NOTE_UNVERIFIED"):
        open_note(note, [VerifierKey.parse(WIT1_VKEY)], check_ed25519)
    # Its 0x04 key does, through the cosignature/v1 message.
    as_cosigner = VerifierKey.parse(WIT1_VKEY).as_type(COSIGNATURE_V1)
    assert open_note(note, [as_cosigner], _ed25519_check_written_from_the_rfc).verified == (line,)
    assert golden == {"line": line.line(), "note": note.encode()}


def test_a_cosignature_covers_extension_lines_and_the_time() -> None:
    witness = parse_signer(WIT1_SKEY)
    body = SOFA_BODY + "Extendo\n"
    line = cosignature(
        witness.verifier, 1700000000, witness.sign(cosignature_message(body, 1700000000))
    )
    good = parse_note(body + "\n" + SOFA_LOG_LINE).with_signature(line)
    assert verified_cosignatures(good, [witness.verifier], check_ed25519)
    changed = parse_note(good.encode().replace("Extendo", "Extend@"))
    with pytest.raises(LedgerError, match="COSIGNATURE_INVALID"):
        verified_cosignatures(changed, [witness.verifier], check_ed25519)
    later = NoteSignature(
        line.name, line.key_id, (1700000001).to_bytes(8, "big") + line.signature[8:]
    )
    with pytest.raises(LedgerError, match="COSIGNATURE_INVALID"):
        verified_cosignatures(good.with_signature(later), [witness.verifier], check_ed25519)


# -- a log's checkpoint, and the witness's decision ---------------------------------------------


def _log_checkpoint(size: int, root: bytes) -> str:
    log = parse_signer(PETER_SKEY)
    checkpoint = Checkpoint("PeterNeumann", size, root)
    return signed_checkpoint(
        checkpoint, log.verifier, log.sign(checkpoint_message(checkpoint))
    ).encode()


def test_a_signed_checkpoint_opens_under_the_log_key(golden: SnapshotAssertion) -> None:
    note = _log_checkpoint(3, leaf_hash(b"three"))
    opened = open_checkpoint(note, VerifierKey.parse(PETER_VKEY), check_ed25519)
    assert opened.checkpoint == Checkpoint("PeterNeumann", 3, leaf_hash(b"three"))
    assert golden == note
    with pytest.raises(LedgerError, match="NOTE_UNVERIFIED"):
        open_checkpoint(note, VerifierKey.parse(ENOCH_VKEY), check_ed25519)


def test_a_stored_note_takes_cosignature_lines_one_per_witness() -> None:
    note = _log_checkpoint(3, leaf_hash(b"three"))
    witness = parse_signer(WIT1_SKEY)
    body = parse_note(note).text
    first = cosignature(witness.verifier, 10, witness.sign(cosignature_message(body, 10)))
    second = cosignature(witness.verifier, 11, witness.sign(cosignature_message(body, 11)))
    both = cosigned_note(note, [first, second])
    assert both == note + second.line()


def _cosign(
    last: WitnessState | None,
    checkpoint: Checkpoint,
    proof: Sequence[bytes] | None,
    *,
    timestamp: int,
) -> CosignPlan:
    """decide_cosign at `timestamp` seconds."""
    request = CosignRequest(checkpoint, None if proof is None else tuple(proof))
    return decide_cosign(last, request, now=Timestamp.from_epoch_ms(timestamp * 1000))


def test_the_witness_cosigns_what_extends_what_it_saw() -> None:
    frontier3, stored3 = Frontier(0).append(leaf_hash(bytes([i])) for i in range(3))
    frontier7, stored7 = frontier3.append(leaf_hash(bytes([i])) for i in range(3, 7))
    nodes = {stored.node: stored.hash for stored in (*stored3, *stored7)}
    head3, head7 = frontier3.head(), frontier7.head()
    first = _cosign(None, Checkpoint("log", 3, head3.root), None, timestamp=5)
    assert first.state == WitnessState("log", 3, head3.root)
    assert consistency_proof_needed(first.state, Checkpoint("log", 7, head7.root)) == 3
    proof = consistency_proof(3, 7, nodes)
    later = _cosign(first.state, Checkpoint("log", 7, head7.root), proof, timestamp=6)
    assert later.state.size == 7 and later.message.startswith(b"cosignature/v1\ntime 6\nlog\n7\n")
    # The same tree again is cosigned again; another root at the same size is not.
    assert _cosign(later.state, Checkpoint("log", 7, head7.root), None, timestamp=7)
    with pytest.raises(LedgerError, match="CHECKPOINT_INCONSISTENT"):
        _cosign(later.state, Checkpoint("log", 7, leaf_hash(b"other")), None, timestamp=7)
    # A rewritten history: a tree of 7 whose first 3 leaves are not the ones cosigned.
    with pytest.raises(LedgerError, match="CHECKPOINT_INCONSISTENT"):
        _cosign(first.state, Checkpoint("log", 7, leaf_hash(b"forged")), proof, timestamp=8)
    with pytest.raises(LedgerError, match="CHECKPOINT_ROLLBACK"):
        _cosign(later.state, Checkpoint("log", 3, head3.root), None, timestamp=9)
    with pytest.raises(LedgerError, match="WITNESS_ORIGIN_MISMATCH"):
        _cosign(later.state, Checkpoint("other", 7, head7.root), None, timestamp=9)


def test_the_cosign_decision_is_golden(golden: SnapshotAssertion) -> None:
    """decide_cosign's plan for a first sight and for a grown tree: the bytes a witness signs
    and the state it keeps."""
    frontier2, stored2 = Frontier(0).append(leaf_hash(bytes([i])) for i in range(2))
    frontier5, stored5 = frontier2.append(leaf_hash(bytes([i])) for i in range(2, 5))
    nodes = {stored.node: stored.hash for stored in (*stored2, *stored5)}
    first = _cosign(None, Checkpoint("log", 2, frontier2.head().root), None, timestamp=7)
    grown = _cosign(
        first.state,
        Checkpoint("log", 5, frontier5.head().root),
        consistency_proof(2, 5, nodes),
        timestamp=8,
    )
    assert golden == [
        {
            "message": plan.message.decode(),
            "timestamp": plan.timestamp,
            "state": plan.state.public(),
        }
        for plan in (first, grown)
    ]


def test_witness_state_round_trips_and_refuses_bad_shapes() -> None:
    state = WitnessState("log", 3, leaf_hash(b"x"))
    assert WitnessState.from_mapping(state.public()) == state
    bad: object
    for bad in ({}, {**state.public(), "size": -1}, {**state.public(), "root": "zz"}, []):
        with pytest.raises(LedgerError, match="WITNESS_STATE_INVALID"):
            WitnessState.from_mapping(bad)
