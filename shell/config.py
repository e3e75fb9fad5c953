"""Finding and reading the config file. Relative paths in a file are relative to the file's own
directory, so that one file works from any directory."""

from __future__ import annotations

import os
import tomllib

import attrs
from aios_ledger.core import LedgerError
from aios_ledger.core.config import LedgerSettings
from aios_ledger.shell.db.engines import is_database_url

CONFIG_ENV = "AIOS_LEDGER_CONFIG"
CONFIG_FILE = "aios-ledger.toml"
MAX_CONFIG_BYTES = 1024 * 1024


def config_path(flag: str | None) -> str | None:
    """The config file in force: the flag's, the variable's, the current directory's, or none."""
    named = flag if flag is not None else os.environ.get(CONFIG_ENV) or None
    if named is None:
        return CONFIG_FILE if os.path.isfile(CONFIG_FILE) else None
    try:
        found = os.path.isfile(named)
    except ValueError:  # a NUL in the name
        found = False
    if not found:
        source = "--config" if flag is not None else f"${CONFIG_ENV}"
        raise LedgerError("CONFIG_NOT_FOUND", f"{source} names {named[:200]!r}: no such file")
    return named


def load_settings(path: str | None) -> LedgerSettings:
    if path is None:
        return LedgerSettings()
    try:
        with open(path, "rb") as handle:
            data = handle.read(MAX_CONFIG_BYTES + 1)
    except OSError as exc:
        raise LedgerError("CONFIG_INVALID", f"{path[:200]}: {exc.strerror or exc}") from None
    if len(data) > MAX_CONFIG_BYTES:
        raise LedgerError("CONFIG_INVALID", f"{path[:200]}: larger than {MAX_CONFIG_BYTES} bytes")
    try:
        raw = tomllib.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise LedgerError("CONFIG_INVALID", f"{path[:200]}: not TOML: {exc}") from None
    settings = LedgerSettings.from_mapping(raw, source=path[:200])
    database = settings.database
    url = database.path is not None and is_database_url(database.path)
    if database.path is not None and not url and not os.path.isabs(database.path):
        relative = os.path.join(os.path.dirname(path), database.path)
        settings = attrs.evolve(settings, database=attrs.evolve(database, path=relative))
    key = settings.attest.key
    if key is not None and not os.path.isabs(key):
        relative = os.path.join(os.path.dirname(path), key)
        settings = attrs.evolve(settings, attest=attrs.evolve(settings.attest, key=relative))
    files = ("mirrors", "ssh_key", "known_hosts", "token_file", "ca_bundle")
    remote = {
        name: os.path.join(os.path.dirname(path), value)
        for name in files
        if (value := getattr(settings.remote, name)) is not None and not os.path.isabs(value)
    }
    if remote:
        settings = attrs.evolve(settings, remote=attrs.evolve(settings.remote, **remote))
    return settings
