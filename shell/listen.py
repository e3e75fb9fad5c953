"""The address a server listens on: `HOST:PORT` parsed and its socket bound, each mistake a
usage error that says what to change."""

from __future__ import annotations

import errno
import socket

from aios_ledger.shell.cli_support import UsageError


def parse_listen(text: str) -> tuple[str, int]:
    host, sep, port = text.rpartition(":")
    if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise UsageError("USAGE_INVALID", f"--listen takes HOST:PORT, not {text[:80]!r}")
    return host.strip("[]"), int(port)


def bind_listener(host: str, port: int) -> socket.socket:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    try:
        return socket.create_server((host, port), family=family)
    except OSError as exc:
        if exc.errno == errno.EADDRINUSE:
            raise UsageError(
                "ADDRESS_IN_USE",
                f"{host}:{port} is already in use: stop what listens there "
                "or choose another --listen HOST:PORT",
            ) from None
        raise UsageError(
            "ADDRESS_UNAVAILABLE",
            f"cannot listen on {host}:{port} ({exc.strerror or exc}): choose another --listen",
        ) from None
