"""One TLS context for every httpx client a test process makes (an autouse fixture, through
tests/conftest.py).

Each new client loads the CA bundle into a new context, about 20 ms of CPU, and the suite makes
thousands of clients that speak plain HTTP to loopback: the default context is made once and
shared; a client asking for anything else (its own context, no verification, a certificate)
gets what it asks for."""

from __future__ import annotations

import functools
import os
import ssl
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

_new_tls_context = httpx.create_ssl_context


@functools.cache
def _default_tls_context(cert_file: str | None, cert_dir: str | None) -> ssl.SSLContext:
    return _new_tls_context()


def _shared_tls_context(verify: Any = True, cert: Any = None, trust_env: bool = True) -> Any:
    if verify is True and cert is None and trust_env:
        environ = os.environ
        return _default_tls_context(environ.get("SSL_CERT_FILE"), environ.get("SSL_CERT_DIR"))
    return _new_tls_context(verify=verify, cert=cert, trust_env=trust_env)


@pytest.fixture(autouse=True, scope="session")
def one_tls_context() -> Iterator[None]:
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr("httpx._transports.default.create_ssl_context", _shared_tls_context)
        yield
