"""`aios-ledger witness --listen HOST:PORT`: the witness as a C2SP tlog-witness server.

One route, `POST /add-checkpoint` (https://c2sp.org/tlog-witness). As the spec asks, checking
the old size and keeping the new state are one step, under a lock that a pulling witness on the
same state folder takes too; there is no authentication beyond the checkpoint's signature.
"""

from __future__ import annotations

import fcntl
import logging
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

import attrs
from aios_ledger.core import LedgerError
from aios_ledger.core.proofs import VerifierKey, cosignature
from aios_ledger.core.proofs.add_checkpoint import (
    MAX_BODY_BYTES,
    SIZE_MEDIA_TYPE,
    WITNESS_CONFLICT,
    WITNESS_REQUEST_INVALID,
    WITNESS_STATUS,
    AddCheckpointRequest,
    decide_add_checkpoint,
    trusted_checkpoint,
)
from aios_ledger.shell.clock import read_clock, system_clock
from aios_ledger.shell.proofs.keys import Signer, check_ed25519
from aios_ledger.shell.proofs.witness import keep_state, log_state_file, read_state, witness_signer
from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import PlainTextResponse, Response
from starlette.routing import Route

LOG = logging.getLogger("aios_ledger.witness")
LOCK_FILE = "witness.lock"


@attrs.frozen
class WitnessService:
    """What the server decides with: the log keys it trusts, its own key and its state."""

    log_keys: tuple[VerifierKey, ...]
    signer: Signer
    state_dir: Path
    lock: threading.Lock = attrs.field(factory=threading.Lock, eq=False)

    @classmethod
    def configure(
        cls, *, log_keys: Sequence[VerifierKey], key_file: Path, state_dir: Path
    ) -> WitnessService:
        return cls(tuple(log_keys), witness_signer(key_file, state_dir), state_dir)

    def _state_file(self, origin: str) -> Path:
        """The state file of the first key named for `origin`, as a pulling witness keeps it."""
        key = next(key for key in self.log_keys if key.name == origin)
        return log_state_file(self.state_dir, key)

    @contextmanager
    def _held(self) -> Iterator[None]:
        with self.lock, (self.state_dir / LOCK_FILE).open("a") as handle:
            fcntl.flock(handle.fileno(), fcntl.LOCK_EX)  # released as the file closes
            yield

    def add_checkpoint(self, body: bytes) -> str:
        """The cosignature line for a request body, its state kept first."""
        request = AddCheckpointRequest.parse(body)
        checkpoint = trusted_checkpoint(request, self.log_keys, check_ed25519)
        state_file = self._state_file(checkpoint.origin)
        with self._held():
            state = read_state(state_file)
            plan = decide_add_checkpoint(state, request, now=read_clock(system_clock))
            signed = self.signer.sign(plan.message)
            keep_state(state_file, plan.state)
        LOG.info("cosigned %s at size %d", checkpoint.origin, checkpoint.size)
        return cosignature(self.signer.verifier, plan.timestamp, signed).line()

    def cosigned_size(self, body: bytes) -> int:
        """The size this witness cosigned last of the request's log (0: none)."""
        request = AddCheckpointRequest.parse(body)
        state = read_state(self._state_file(request.checkpoint.origin))
        return 0 if state is None else state.size


def witness_app(service: WitnessService) -> Starlette:
    async def add_checkpoint(request: Request) -> Response:
        body = b""
        async for chunk in request.stream():
            body += chunk
            if len(body) > MAX_BODY_BYTES:
                return PlainTextResponse(f"{WITNESS_REQUEST_INVALID}: the body is too large\n", 400)
        try:
            line = await run_in_threadpool(service.add_checkpoint, body)
        except LedgerError as refused:
            # Any other refusal is the witness's own (its state unreadable): a server error.
            status = WITNESS_STATUS.get(refused.code, 500)
            if refused.code == WITNESS_CONFLICT:
                size = await run_in_threadpool(service.cosigned_size, body)
                return Response(f"{size}\n", status, media_type=SIZE_MEDIA_TYPE)
            return PlainTextResponse(f"{refused}\n", status)
        return PlainTextResponse(line)

    return Starlette(routes=[Route("/add-checkpoint", add_checkpoint, methods=["POST"])])
