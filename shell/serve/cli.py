"""`aios-ledger serve`: the HTTP API and the web console in one server, with its periodic
checkpoints and their push to witnesses."""

from __future__ import annotations

import argparse
import logging
import socket
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING

from aios_ledger.core.actors import the_ledger
from aios_ledger.core.proofs import VerifierKey
from aios_ledger.shell.actors import process_acting_as
from aios_ledger.shell.api.backend import (
    DEFAULT_HEADER_TIMEOUT,
    DEFAULT_LISTEN,
    DEFAULT_MAX_BODY,
    DEFAULT_MAX_CONNECTIONS,
    DEFAULT_MAX_HEADER_BYTES,
    DEFAULT_MAX_WAITING_PER_TOKEN,
    DEFAULT_RECHECK_SECONDS,
    DEFAULT_STREAM_KEEPALIVE_SECONDS,
    DEFAULT_STREAM_POLL_SECONDS,
    MAX_HEADER_TIMEOUT,
    ApiSettings,
)
from aios_ledger.shell.cli_support import (
    UsageError,
    database_path,
    ledger_settings,
    migrate_on_open,
    synchronous,
)
from aios_ledger.shell.clock import Clock, system_clock
from aios_ledger.shell.listen import bind_listener, parse_listen
from aios_ledger.shell.proofs.checkpoints import PeriodicCheckpoints
from aios_ledger.shell.proofs.keys import load_signer
from aios_ledger.shell.proofs.push import WitnessPush
from aios_ledger.shell.web.sessions import (
    DEFAULT_IDLE_SECONDS,
    DEFAULT_MAX_SECONDS,
    SessionSettings,
)

if TYPE_CHECKING:
    import uvicorn
    from aios_ledger.shell.api.stream import EventFeed

# On SIGTERM, long polls get this long to finish; a keyed claim asked again gets the same claim.
KEEP_ALIVE_SECONDS = 5
GRACEFUL_SHUTDOWN_SECONDS = 10
LOG = logging.getLogger("aios_ledger.api")


def register(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    serve = commands.add_parser("serve", help="run the HTTP API (Starlette on uvicorn)")
    serve.add_argument(
        "--listen", default=DEFAULT_LISTEN, metavar="HOST:PORT", help="the address to listen on"
    )
    serve.add_argument(
        "--db",
        default=argparse.SUPPRESS,
        help="database file or postgresql:// URL (as the global --db)",
    )
    serve.add_argument(
        "--max-body",
        type=int,
        default=DEFAULT_MAX_BODY,
        metavar="BYTES",
        help="largest request body; a larger one is 413 BODY_TOO_LARGE",
    )
    serve.add_argument(
        "--max-waiting-per-token",
        type=int,
        default=DEFAULT_MAX_WAITING_PER_TOKEN,
        metavar="N",
        help="waiting long-poll claims one token may hold; more is 429 TOO_MANY_WAITING",
    )
    serve.add_argument(
        "--recheck-seconds",
        type=float,
        default=DEFAULT_RECHECK_SECONDS,
        metavar="S",
        help="how often a waiting claim re-tries on its own, for work that becomes claimable "
        "with time (a lease passing, not_before) or is written by another process",
    )
    serve.add_argument(
        "--stream-poll-seconds",
        type=float,
        default=DEFAULT_STREAM_POLL_SECONDS,
        metavar="S",
        help="while an event stream is open, how often the log's head is read for new events "
        "(one read for every stream together), besides at once when a server of the ledger "
        "announces events written (the command line's writes announce nothing)",
    )
    serve.add_argument(
        "--stream-keepalive-seconds",
        type=float,
        default=DEFAULT_STREAM_KEEPALIVE_SECONDS,
        metavar="S",
        help="an idle event stream writes a comment this often, so that proxies keep it open",
    )
    serve.add_argument(
        "--header-timeout",
        type=float,
        default=DEFAULT_HEADER_TIMEOUT,
        metavar="S",
        help="a request's head (request line and headers) must arrive within S seconds of its "
        "first byte, or the connection is closed (slow clients cannot hold connections)",
    )
    serve.add_argument(
        "--max-connections",
        type=int,
        default=DEFAULT_MAX_CONNECTIONS,
        metavar="N",
        help="open connections at most; one more is answered 503 TOO_MANY_CONNECTIONS and closed",
    )
    serve.add_argument(
        "--max-header-bytes",
        type=int,
        default=DEFAULT_MAX_HEADER_BYTES,
        metavar="BYTES",
        help="largest request head (request line and headers); a larger one is answered 431 "
        "HEADERS_TOO_LARGE and its connection closed, the rest unread",
    )
    serve.add_argument(
        "--checkpoint-key",
        metavar="FILE",
        help="the key that signs checkpoints (default: [checkpoint] key, else the systemd "
        "credential [checkpoint] credential); needed by the two options below",
    )
    serve.add_argument(
        "--checkpoint-every-seconds",
        type=float,
        metavar="N",
        help="sign a checkpoint when N seconds passed and the log grew (and one at start)",
    )
    serve.add_argument(
        "--checkpoint-every-events",
        type=int,
        metavar="N",
        help="sign a checkpoint each time the log grew by N events (and one at start)",
    )
    serve.add_argument(
        "--witness-key",
        action="append",
        metavar="VKEY",
        help="a witness whose cosignatures POST /v1/checkpoint/cosignatures accepts (its "
        "verifier key; repeatable; default: [checkpoint] witnesses)",
    )
    serve.add_argument(
        "--session-idle-seconds",
        type=float,
        default=DEFAULT_IDLE_SECONDS,
        metavar="S",
        help="a console session unused this long ends (sign in again)",
    )
    serve.add_argument(
        "--session-max-seconds",
        type=float,
        default=DEFAULT_MAX_SECONDS,
        metavar="S",
        help="a console session ends this long after sign-in, however busy",
    )
    serve.add_argument(
        "--witness-url",
        action="append",
        metavar="URL",
        help="a C2SP tlog-witness (`witness --listen`) each signed checkpoint is pushed to, its "
        "cosignature stored (repeatable; needs --witness-key; default: [checkpoint] "
        "witness_urls)",
    )
    serve.set_defaults(handler=_serve, default_log_level="INFO")


def _serve(args: argparse.Namespace) -> int:
    from aios_ledger.shell.serve.app import settle_startup_heap

    # Requests act as their tokens; what the server does on its own is the ledger's.
    with process_acting_as(the_ledger("serve")), configured_server(args) as (server, listener):
        settle_startup_heap()
        server.run(sockets=[listener])
    return 0


@contextmanager
def configured_server(
    args: argparse.Namespace, clock: Clock = system_clock
) -> Iterator[tuple[uvicorn.Server, socket.socket]]:
    """The server `serve` runs and its bound socket, for the caller to run in any thread;
    leaving closes them. A test sets `clock` to move the leases' time instead of waiting."""
    import uvicorn
    from aios_ledger.shell.api.connections import guarded_protocol
    from aios_ledger.shell.serve.app import served_app

    host, port = parse_listen(args.listen)
    if (
        args.max_body < 1
        or args.max_waiting_per_token < 0
        or not args.recheck_seconds > 0
        or not 0 < args.stream_poll_seconds <= MAX_HEADER_TIMEOUT
        or not 0 < args.stream_keepalive_seconds <= MAX_HEADER_TIMEOUT
        or not 0 < args.header_timeout <= MAX_HEADER_TIMEOUT
        or args.max_connections < 1
        or args.max_header_bytes < 1
        or not 0 < args.session_idle_seconds < float("inf")
        or not 0 < args.session_max_seconds < float("inf")
    ):
        raise UsageError(
            "USAGE_INVALID",
            "--max-body, --recheck-seconds, --max-connections and --max-header-bytes must be "
            "positive, "
            "--header-timeout, --stream-poll-seconds and --stream-keepalive-seconds from 0 to "
            f"{MAX_HEADER_TIMEOUT:g} seconds, "
            "--max-waiting-per-token >= 0, --session-idle-seconds and --session-max-seconds "
            "positive",
        )
    configured = ledger_settings(args).checkpoint
    every_seconds = args.checkpoint_every_seconds or configured.every_seconds
    every_events = args.checkpoint_every_events or configured.every_events
    if (every_seconds is not None and not every_seconds > 0) or (
        every_events is not None and every_events < 1
    ):
        raise UsageError(
            "USAGE_INVALID", "--checkpoint-every-seconds and --checkpoint-every-events are positive"
        )
    witness_keys = tuple(args.witness_key or configured.witnesses)
    # A mistyped key is refused now, not at the first cosignature.
    witnesses = [VerifierKey.parse(key) for key in witness_keys]
    witness_urls = tuple(args.witness_url or configured.witness_urls)
    if witness_urls and not witness_keys:
        raise UsageError(
            "USAGE_INVALID",
            "--witness-url needs --witness-key: the keys its cosignatures are checked with",
        )
    signer = None
    if every_seconds is not None or every_events is not None:
        signer = load_signer(args.checkpoint_key or configured.key, configured.credential)
    settings = ApiSettings(
        db_path=database_path(args),
        synchronous=synchronous(args),
        migrate=migrate_on_open(args),
        max_body=args.max_body,
        max_waiting_per_token=args.max_waiting_per_token,
        recheck_seconds=args.recheck_seconds,
        witness_keys=witness_keys,
        checkpoint_keys=(
            *configured.log_keys,
            *(() if signer is None else (signer.verifier.text(),)),
        ),
        stream_poll_seconds=args.stream_poll_seconds,
        stream_keepalive_seconds=args.stream_keepalive_seconds,
        clock=clock,
    )
    # Bound before anything is opened or announced: an address in use is one clear refusal.
    listener = bind_listener(host, port)
    sessions = SessionSettings(
        idle_seconds=args.session_idle_seconds, max_seconds=args.session_max_seconds
    )
    app = served_app(settings, sessions)
    periodic = None
    if signer is not None:
        periodic = PeriodicCheckpoints(
            settings.db_path,
            signer,
            every_seconds=every_seconds,
            every_events=every_events,
            clock=settings.clock,
            after_sign=WitnessPush(witness_urls, witnesses).push if witness_urls else None,
        )
        periodic.start()
    config = uvicorn.Config(
        app,
        host=host,
        port=port,
        log_config=None,  # the ledger's logging (--log-level, --log-format)
        access_log=False,  # an access line would hold paths with ids; metrics count requests
        http=guarded_protocol(
            header_timeout=args.header_timeout,
            max_connections=args.max_connections,
            max_header_bytes=args.max_header_bytes,
        ),
        timeout_keep_alive=KEEP_ALIVE_SECONDS,
        timeout_graceful_shutdown=GRACEFUL_SHUTDOWN_SECONDS,
        server_header=False,
    )
    LOG.info("serving %s on http://%s:%d", settings.db_path, host, port)
    try:
        yield ledger_server(config, app.state.event_feed), listener
    finally:
        listener.close()
        if periodic is not None:
            periodic.stop()
        app.state.backend.close()


def ledger_server(config: uvicorn.Config, feed: EventFeed) -> uvicorn.Server:
    """uvicorn's server, whose graceful shutdown first ends the open event streams, which
    would never finish on their own."""
    import uvicorn

    class LedgerServer(uvicorn.Server):
        async def shutdown(self, sockets: list[socket.socket] | None = None) -> None:
            feed.close()
            await super().shutdown(sockets)

    return LedgerServer(config)
