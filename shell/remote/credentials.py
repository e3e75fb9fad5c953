"""Reading an API token from a file (`--token-file`) or a systemd credential; the token never
appears in an error, only the file's name does.
"""

from __future__ import annotations

import os
import stat
import string

from aios_ledger.core import LedgerError

CREDENTIALS_DIRECTORY_ENV = "CREDENTIALS_DIRECTORY"
API_URL_ENV = "AIOS_GOVERNED_WRITE_API_URL"
CONTROL_TOKEN_CREDENTIAL = "agent_task_control_token"
MAX_TOKEN_FILE = 4096
_TOKEN_CHARACTERS = frozenset(string.ascii_letters + string.digits + "-._~+/=")


def read_token_file(path: str | os.PathLike[str]) -> str:
    """The token on the one line of the regular file `path`, or TOKEN_FILE_INVALID."""
    name = os.fspath(path)
    try:
        with open(name, "rb") as handle:
            if not stat.S_ISREG(os.fstat(handle.fileno()).st_mode):
                raise LedgerError("TOKEN_FILE_INVALID", f"{name[:200]!r} is not a regular file")
            raw = handle.read(MAX_TOKEN_FILE + 1)
    except OSError as exc:
        raise LedgerError("TOKEN_FILE_INVALID", f"{name[:200]!r}: {exc.strerror}") from None
    if len(raw) > MAX_TOKEN_FILE:
        raise LedgerError("TOKEN_FILE_INVALID", f"{name[:200]!r} is larger than a token")
    try:
        text = raw.decode("ascii")
    except UnicodeDecodeError:
        raise LedgerError("TOKEN_FILE_INVALID", f"{name[:200]!r} is not ASCII text") from None
    token = text.removesuffix("\n").removesuffix("\r")
    if not token or not set(token) <= _TOKEN_CHARACTERS:
        raise LedgerError(
            "TOKEN_FILE_INVALID", f"{name[:200]!r} does not hold one token on one line"
        )
    return token


def credential_token(name: str = CONTROL_TOKEN_CREDENTIAL) -> str:
    """The token of systemd credential `name` ($CREDENTIALS_DIRECTORY/name)."""
    directory = os.environ.get(CREDENTIALS_DIRECTORY_ENV)
    if not directory:
        raise LedgerError(
            "CREDENTIAL_MISSING", f"${CREDENTIALS_DIRECTORY_ENV} is not set: no credential {name}"
        )
    return read_token_file(os.path.join(directory, name))
