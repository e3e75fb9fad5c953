"""A PostgreSQL cluster of a test's own, made with `initdb` and run with `pg_ctl` on a free port,
so that a test may stop, restart or crowd it without touching the server other tests share.

`PgCluster()` initialises one in a fresh folder (trust authentication, a role `ledger` without
superuser rights for the ledger, `postgres` for the test's own administration) and starts it;
`stop()`, `start()` and `close()` do what they say. As root the cluster runs as `nobody`
(PostgreSQL refuses to run as root). Without `initdb` on PATH the test skips, unless
AIOS_REQUIRE_POSTGRES=1, where it fails.
"""

from __future__ import annotations

import contextlib
import os
import pwd
import shutil
import subprocess
import tempfile
from pathlib import Path
from types import TracebackType
from typing import Any, Self

import psycopg
import pytest
from api_server import free_port

# PostgreSQL keeps this many connections for superusers: the test administers through them
# while other clients hold every other one.
RESERVED_CONNECTIONS = 3
MAX_CONNECTIONS = 20
LEDGER_ROLE = "ledger"
# A bound on waiting for pg_ctl, never a speed assertion.
PG_CTL_PATIENCE = 60


def _tools() -> tuple[str, str]:
    """`initdb` and `pg_ctl` from PATH, else from Debian's versioned folder (newest first)."""
    folders = sorted(
        Path("/usr/lib/postgresql").glob("*/bin"),
        key=lambda folder: int(folder.parent.name) if folder.parent.name.isdigit() else 0,
        reverse=True,
    )
    path = os.pathsep.join([os.environ.get("PATH", ""), *map(str, folders)])
    initdb, pg_ctl = shutil.which("initdb", path=path), shutil.which("pg_ctl", path=path)
    if initdb is None or pg_ctl is None:
        reason = "initdb and pg_ctl are not on PATH"
        if os.environ.get("AIOS_REQUIRE_POSTGRES") == "1":
            pytest.fail(f"AIOS_REQUIRE_POSTGRES=1 but {reason}")
        pytest.skip(reason)
    return initdb, pg_ctl


class PgCluster:
    """A cluster in a temporary folder, listening on 127.0.0.1 at a free port."""

    def __init__(self) -> None:
        self._initdb, self._pg_ctl = _tools()
        self.port = free_port()
        # Not under pytest's tmp_path, which only root may enter.
        self.folder = Path(tempfile.mkdtemp(prefix="aios-pg-cluster-"))
        self.data = self.folder / "data"
        self._prefix: list[str] = []
        if os.geteuid() == 0:
            nobody = pwd.getpwnam("nobody")
            self._prefix = [
                "setpriv",
                f"--reuid={nobody.pw_uid}",
                f"--regid={nobody.pw_gid}",
                "--clear-groups",
            ]
            self.folder.chmod(0o755)
            os.chown(self.folder, nobody.pw_uid, nobody.pw_gid)
        try:
            self._run(
                self._initdb, "-D", str(self.data), "-U", "postgres", "--auth=trust", "-E", "UTF8"
            )
            self.start()
            with self.admin() as conn:
                conn.execute(f"CREATE ROLE {LEDGER_ROLE} LOGIN")
                conn.execute(f"GRANT CREATE ON DATABASE postgres TO {LEDGER_ROLE}")
                conn.execute("CREATE ROLE crowd LOGIN")
        except BaseException:
            self.close()  # no server left running when the test never gets the cluster
            raise

    def _run(self, *argv: str) -> None:
        answer = subprocess.run(
            [*self._prefix, *argv], capture_output=True, text=True, timeout=PG_CTL_PATIENCE
        )
        assert answer.returncode == 0, answer.stdout + answer.stderr

    def url(self, role: str = LEDGER_ROLE) -> str:
        """A libpq URL as `role` (the ledger's URL too: its schema is the default one)."""
        return f"postgresql://{role}@127.0.0.1:{self.port}/postgres"

    def start(self) -> None:
        options = (
            f"-p {self.port} -k {self.folder} -c listen_addresses=127.0.0.1 -c fsync=off"
            f" -c max_connections={MAX_CONNECTIONS}"
            f" -c superuser_reserved_connections={RESERVED_CONNECTIONS}"
        )
        log = str(self.folder / "postgresql.log")
        self._run(self._pg_ctl, "-D", str(self.data), "-l", log, "-o", options, "-w", "start")

    def stop(self) -> None:
        self._run(self._pg_ctl, "-D", str(self.data), "-m", "fast", "-w", "stop")

    def admin(self) -> psycopg.Connection[Any]:
        """A superuser's connection, which the reserved slots let in when others are full."""
        return psycopg.connect(self.url("postgres"), autocommit=True, connect_timeout=10)

    def close(self) -> None:
        with contextlib.suppress(AssertionError, subprocess.TimeoutExpired):
            self._run(self._pg_ctl, "-D", str(self.data), "-m", "immediate", "-w", "stop")
        shutil.rmtree(self.folder, ignore_errors=True)

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        value: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.close()
