"""`aios-ledger witness`: an independent process that cosigns a ledger's checkpoints.

Each round: fetch the ledger's latest checkpoint (`GET /v1/checkpoint`), verify the log's
signature with the log's verifier key (`--log-key`), fetch the consistency proof from the size
it last cosigned to the new one (`GET /v1/proofs/consistency?old=&new=`), let the core decide
(`decide_cosign`: the same tree, or a larger one that extends it), sign the cosignature/v1
message with its own key, keep the new state in its folder (written and synced before the
cosignature leaves), and send the cosigned note back (`POST /v1/checkpoint/cosignatures`).

Its state is one JSON file per log (`log-<key ID>.json` in `--state`): the origin, size and root
of the last checkpoint it cosigned. A ledger that rewrote its history, even one that re-signed
the rewrite with its own key, cannot show that the new tree extends that one: the witness
refuses (CHECKPOINT_INCONSISTENT), keeps its state, and cosigns nothing of that log again
until a checkpoint extends the one it saw.
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
        signer = read_key_file(key_file)
        try:
            state_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
        except OSError as failed:
            raise LedgerError("WITNESS_STATE_INVALID", f"{state_dir}: {failed.strerror}") from None
        return cls(
            log_url.rstrip("/"),
            log_key,
            signer,
            state_dir / f"log-{log_key.key_id.hex()}.json",
            token if token is not None else os.environ.get(TOKEN_ENV) or None,
        )

    # -- state ---------------------------------------------------------------------------------

    def last_state(self) -> WitnessState | None:
        return read_state(self.state_file)

    # -- the log's API -------------------------------------------------------------------------

    def _get(self, client: httpx.Client, path: str, params: dict[str, int] | None = None) -> Any:
        try:
            response = client.get(self.log_url + path, params=params)
        except httpx.HTTPError as failed:
            raise LedgerError("LOG_UNREACHABLE", f"{self.log_url}: {failed}") from None
        if response.status_code != 200:
            raise problem_error(response)
        return response

    def round(self) -> dict[str, Any]:
        """Fetch, check, cosign and send once; what it did, or the refusal it raised."""
        headers = {} if self.token is None else {"Authorization": f"Bearer {self.token}"}
        with httpx.Client(headers=headers, timeout=TIMEOUT_SECONDS) as client:
            served = self._get(client, "/v1/checkpoint").text
            opened = open_checkpoint(served, self.log_key, check_ed25519)
            checkpoint = opened.checkpoint
            last = self.last_state()
            old = consistency_proof_needed(last, checkpoint)
            hashes: tuple[bytes, ...] | None = None
            if old is not None:
                document = self._get(
                    client, "/v1/proofs/consistency", {"old": old, "new": checkpoint.size}
                ).json()
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
            try:
                response = client.post(
                    self.log_url + "/v1/checkpoint/cosignatures", json={"note": cosigned}
                )
            except httpx.HTTPError as failed:
                raise LedgerError("LOG_UNREACHABLE", f"{self.log_url}: {failed}") from None
            if response.status_code != 200:
                raise problem_error(response)
        LOG.info("cosigned %s at size %d", checkpoint.origin, checkpoint.size)
        return {
            "origin": checkpoint.origin,
            "size": checkpoint.size,
            "root": checkpoint.root.hex(),
            "previous_size": None if last is None else last.size,
            "cosignature": line.line(),
        }

    def run(self, *, interval: float) -> None:
        """Rounds until stopped; a refusal is logged and the next round tries again (a log
        that forked stays refused: the state keeps the checkpoint it forked from)."""
        while True:
            try:
                self.round()
            except LedgerError as refused:
                LOG.error("%s", refused)
            time.sleep(max(0.1, interval))


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
    """Write the state beside its file, sync, rename over it: a crash leaves the old one or
    the new one, never half of either."""
    temporary = state_file.with_suffix(".json.new")
    with temporary.open("w") as handle:
        json.dump(state.public(), handle, sort_keys=True)
        handle.flush()
        os.fsync(handle.fileno())
    os.replace(temporary, state_file)
