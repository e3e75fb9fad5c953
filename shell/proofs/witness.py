"""`aios-ledger witness`: an independent process that cosigns a ledger's checkpoints.

Each round it cosigns the latest checkpoint only when a consistency proof shows it extends the
last one it cosigned, whose state it keeps on disk before the cosignature leaves. A ledger that
rewrote its history, even re-signed with its own key, cannot show that, and stays refused.
"""

from __future__ import annotations

import json
import logging
import os
import time
from pathlib import Path
from typing import Any

import attrs
import httpx
from aios_ledger.core import LedgerError
from aios_ledger.core.log.merkle import ConsistencyProof
from aios_ledger.core.proofs import (
    CosignRequest,
    SignedNote,
    VerifierKey,
    WitnessState,
    consistency_proof_needed,
    cosignature,
    decide_cosign,
    open_checkpoint,
)
from aios_ledger.shell.clock import read_clock, system_clock
from aios_ledger.shell.proofs.keys import Signer, check_ed25519, read_key_file
from aios_ledger.shell.remote.client import problem_error

TOKEN_ENV = "AIOS_LEDGER_TOKEN"
LOG = logging.getLogger("aios_ledger.witness")
TIMEOUT_SECONDS = 30.0


@attrs.frozen
class Witness:
    log_url: str
    log_key: VerifierKey
    signer: Signer
    state_file: Path
    token: str | None

    @classmethod
    def configure(
        cls,
        *,
        log_url: str,
        log_key: VerifierKey,
        key_file: Path,
        state_dir: Path,
        token: str | None,
    ) -> Witness:
        return cls(
            log_url.rstrip("/"),
            log_key,
            witness_signer(key_file, state_dir),
            log_state_file(state_dir, log_key),
            token if token is not None else os.environ.get(TOKEN_ENV) or None,
        )

    def _call(self, client: httpx.Client, method: str, path: str, **options: Any) -> Any:
        try:
            response = client.request(method, self.log_url + path, **options)
        except httpx.HTTPError as failed:
            raise LedgerError("LOG_UNREACHABLE", f"{self.log_url}: {failed}") from None
        if response.status_code != 200:
            raise problem_error(response)
        return response

    def round(self) -> dict[str, Any]:
        """Fetch, check, cosign and send once; what it did, or the refusal it raised."""
        headers = {} if self.token is None else {"Authorization": f"Bearer {self.token}"}
        with httpx.Client(headers=headers, timeout=TIMEOUT_SECONDS) as client:
            served = self._call(client, "GET", "/v1/checkpoint").text
            opened = open_checkpoint(served, self.log_key, check_ed25519)
            checkpoint = opened.checkpoint
            last = read_state(self.state_file)
            old = consistency_proof_needed(last, checkpoint)
            hashes: tuple[bytes, ...] | None = None
            if old is not None:
                sizes = {"old": old, "new": checkpoint.size}
                document = self._call(client, "GET", "/v1/proofs/consistency", params=sizes).json()
                proof = ConsistencyProof.from_mapping(document)
                if (proof.old_size, proof.new_size) != (old, checkpoint.size):
                    raise LedgerError(
                        "CHECKPOINT_INCONSISTENT",
                        f"the log sent a proof from {proof.old_size} to {proof.new_size}, "
                        f"not from {old} to {checkpoint.size}",
                    )
                # Only the path is taken from the log: the roots are the witness's own.
                hashes = proof.hashes
            request = CosignRequest(checkpoint, None if hashes is None else tuple(hashes))
            plan = decide_cosign(last, request, now=read_clock(system_clock))
            line = cosignature(self.signer.verifier, plan.timestamp, self.signer.sign(plan.message))
            keep_state(self.state_file, plan.state)
            # The log's line and this witness's: never another witness's, which is theirs to send.
            cosigned = SignedNote(opened.opened.text, (*opened.opened.verified, line)).encode()
            self._call(client, "POST", "/v1/checkpoint/cosignatures", json={"note": cosigned})
        LOG.info("cosigned %s at size %d", checkpoint.origin, checkpoint.size)
        return {
            "origin": checkpoint.origin,
            "size": checkpoint.size,
            "root": checkpoint.root.hex(),
            "previous_size": None if last is None else last.size,
            "cosignature": line.line(),
        }

    def run(self, *, interval: float) -> None:
        """Rounds until stopped; a refusal is logged and the next round tries again."""
        while True:
            try:
                self.round()
            except LedgerError as refused:
                LOG.error("%s", refused)
            time.sleep(max(0.1, interval))


def witness_signer(key_file: Path, state_dir: Path) -> Signer:
    """The witness's signer key, once its state folder is there (made 0700 if missing)."""
    signer = read_key_file(key_file)
    try:
        state_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
    except OSError as failed:
        raise LedgerError("WITNESS_STATE_INVALID", f"{state_dir}: {failed.strerror}") from None
    return signer


def log_state_file(state_dir: Path, log_key: VerifierKey) -> Path:
    return state_dir / f"log-{log_key.key_id.hex()}.json"


def read_state(state_file: Path) -> WitnessState | None:
    """The last checkpoint a witness cosigned of one log (None: it never did)."""
    try:
        text = state_file.read_text()
    except FileNotFoundError:
        return None
    except OSError as failed:
        raise LedgerError("WITNESS_STATE_INVALID", f"{state_file}: {failed}") from None
    try:
        document = json.loads(text)
    except ValueError:
        raise LedgerError("WITNESS_STATE_INVALID", f"{state_file} is not JSON") from None
    return WitnessState.from_mapping(document)


def keep_state(state_file: Path, state: WitnessState) -> None:
    """Write, sync and rename over the state file, so a crash never leaves half of one."""
    temporary = state_file.with_suffix(".json.new")
    with temporary.open("w") as handle:
        json.dump(state.public(), handle, sort_keys=True)
        handle.flush()
        os.fsync(handle.fileno())
    os.replace(temporary, state_file)
