"""The checkpoint routes: the latest signed checkpoint as a C2SP signed note, and a witness's
cosignature of one. A cosignature is checked against the keys the server was given, so a token
alone cannot add a line no witness signed.
"""

from __future__ import annotations

from aios_ledger.core import LedgerError
from aios_ledger.core.actors import OWNER, ROLES, WITNESS
from aios_ledger.core.proofs import VerifierKey
from aios_ledger.shell.api.app import Answer, Call
from aios_ledger.shell.api.openapi import Operation, Query, Routes
from aios_ledger.shell.clock import read_clock
from aios_ledger.shell.proofs.checkpoints import add_cosignatures, latest_checkpoint
from starlette.responses import Response

CHECKPOINT_READERS = frozenset(ROLES)
COSIGNERS = frozenset({WITNESS, OWNER})
NOTE_MEDIA = "text/plain; charset=utf-8"
route = Routes()


@route(
    "GET /v1/checkpoint",
    CHECKPOINT_READERS,
    "the latest signed checkpoint (a C2SP signed note), with its cosignatures",
    query=(Query("size", {"type": "integer", "minimum": 0}),),
    media="text/plain",
)
def get_checkpoint(call: Call) -> Response:
    size = None if call.query("size") is None else call.query_int("size", 0)
    if size is not None and size < 0:
        raise LedgerError("FIELDS_INVALID", "size: must not be negative")
    served = call.backend.read_now(lambda stores: latest_checkpoint(stores.db, size))
    return Response(
        served.note,
        media_type=NOTE_MEDIA,
        headers={"Aios-Checkpoint-Id": str(served.row.checkpoint_id)},
    )


@route(
    "POST /v1/checkpoint/cosignatures",
    COSIGNERS,
    "store a witness's cosignature/v1 of a checkpoint this ledger signed",
    body="CosignatureBody",
)
def add_cosignature(call: Call) -> Answer:
    witnesses = tuple(VerifierKey.parse(key) for key in call.backend.settings.witness_keys)
    if not witnesses:
        raise LedgerError(
            "WITNESS_UNKNOWN", "this server accepts no cosignatures: it was given no --witness-key"
        )
    note = call.body["note"]
    now = read_clock(call.backend.settings.clock)
    served = call.backend.write_now(lambda s: add_cosignatures(s.db, note, witnesses, now))
    return Answer(served.public())


def checkpoint_operations() -> tuple[Operation, ...]:
    return tuple(route.operations)
