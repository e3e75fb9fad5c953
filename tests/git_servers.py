"""Real git servers on loopback for the remote-repository tests: `sshd` whose one authorized key
may only run `git-shell`, and `git http-backend` behind nginx and fcgiwrap with basic
authentication. Each runs as the current user with its own configuration in a temporary folder,
on a free port, and is stopped with its fixture.

The binaries come from the distribution (`openssh-server`, `nginx`, `fcgiwrap`); without them
the tests skip with a message, or fail under AIOS_REQUIRE_GIT_SERVERS=1 (CI installs them)."""

from __future__ import annotations

import contextlib
import os
import pwd
import shutil
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import attrs
import pytest
from aios_ledger.shell.git.runner import run_git

SSHD = "/usr/sbin/sshd"
NGINX = "/usr/sbin/nginx"
FCGIWRAP = "/usr/sbin/fcgiwrap"
HTTP_BACKEND = "/usr/lib/git-core/git-http-backend"
REQUIRE_ENV = "AIOS_REQUIRE_GIT_SERVERS"
# The account the HTTP server's basic authentication admits; the token is its password.
HTTP_USER = "x-access-token"
START_SECONDS = 30.0


def require_binaries(*paths: str) -> None:
    """Skip the test when a server's binary is missing, or fail under AIOS_REQUIRE_GIT_SERVERS=1."""
    missing = [path for path in paths if not os.access(path, os.X_OK)]
    if not missing:
        return
    message = (
        f"{', '.join(missing)} missing: `apt-get install -y openssh-server nginx fcgiwrap`"
        f" (set {REQUIRE_ENV}=1 to fail instead)"
    )
    if os.environ.get(REQUIRE_ENV) == "1":
        pytest.fail(message)
    pytest.skip(message)


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def wait_for_port(port: int, process: subprocess.Popen[bytes], log: Path) -> None:
    """Return once something listens on `port`; fail with the server's log if it died."""
    deadline = time.monotonic() + START_SECONDS
    while time.monotonic() < deadline:
        if process.poll() is not None:
            pytest.fail(f"the server exited {process.returncode}: {log.read_text()[-2000:]}")
        with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), 1):
            return
        time.sleep(0.05)
    pytest.fail(f"nothing listened on port {port}: {log.read_text()[-2000:]}")


def stop(process: subprocess.Popen[bytes]) -> None:
    if process.poll() is None:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


class Daemon:
    """A server's listening process, which a test may stop and start again on the same port
    (the network cut off, and back)."""

    def __init__(self, argv: list[str], port: int, log: Path) -> None:
        self.argv, self.port, self.log = argv, port, log
        self.process: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        self.log.touch()
        self.process = subprocess.Popen(
            self.argv,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        wait_for_port(self.port, self.process, self.log)

    def stop(self) -> None:
        if self.process is not None:
            stop(self.process)
            self.process = None


PUSHES_LOG = "pushes.log"


def serve(bare: Path, refused_branch: str | None = None) -> Path:
    """Let the servers take pushes into the bare repository; a pre-receive hook writes the refs
    of each push on one line of `pushes.log` in it (what went in one push), and with
    `refused_branch` refuses any push to that branch, as a forge's branch protection would."""
    run_git(["--git-dir", str(bare), "config", "http.receivepack", "true"])
    refuse = (
        ""
        if refused_branch is None
        else (f'  if [ "$ref" = "refs/heads/{refused_branch}" ]; then refused=1; fi\n')
    )
    hook = bare / "hooks" / "pre-receive"
    hook.write_text(
        "#!/bin/sh\n"
        "refs=''\nrefused=0\n"
        "while read old new ref; do\n"
        '  refs="$refs $ref"\n'
        f"{refuse}"
        "done\n"
        f'echo "$refs" >> "$GIT_DIR/{PUSHES_LOG}"\n'
        'if [ "$refused" = 1 ]; then\n'
        f'  echo "server protection: {refused_branch} takes no pushes" >&2\n'
        "  exit 1\n"
        "fi\n"
    )
    hook.chmod(0o755)
    return bare


def pushes(bare: Path) -> list[list[str]]:
    """The refs of each push the server received (sorted), in order (refused ones too)."""
    log = bare / PUSHES_LOG
    lines = log.read_text().splitlines() if log.exists() else []
    return [sorted(line.split()) for line in lines]


@attrs.frozen
class SshServer:
    port: int
    user: str
    client_key: Path
    known_hosts: Path
    host_public_key: str
    daemon: Daemon

    def url(self, repository: Path) -> str:
        return f"ssh://{self.user}@127.0.0.1:{self.port}{repository}"


def _keypair(path: Path) -> str:
    subprocess.run(
        ["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", path.name, "-f", str(path)],
        check=True,
    )
    return path.with_suffix(".pub").read_text().strip()


@contextlib.contextmanager
def ssh_server(root: Path) -> Iterator[SshServer]:
    """sshd on a free loopback port with its own host key; the one authorized key runs
    `git-shell` only (no pty, no forwarding)."""
    require_binaries(SSHD, "/usr/bin/git-shell")
    root.mkdir(parents=True, exist_ok=True)
    host_public = _keypair(root / "host_ed25519")
    client_public = _keypair(root / "client_ed25519")
    restricted = 'command="git-shell -c \\"$SSH_ORIGINAL_COMMAND\\"",no-pty,no-port-forwarding,'
    restricted += "no-X11-forwarding,no-agent-forwarding"
    (root / "authorized_keys").write_text(f"{restricted} {client_public}\n")
    port = free_port()
    user = pwd.getpwuid(os.getuid()).pw_name
    config = root / "sshd_config"
    config.write_text(
        f"Port {port}\nListenAddress 127.0.0.1\nHostKey {root / 'host_ed25519'}\n"
        f"PidFile {root / 'sshd.pid'}\nAuthorizedKeysFile {root / 'authorized_keys'}\n"
        "StrictModes no\nUsePAM no\nPasswordAuthentication no\nKbdInteractiveAuthentication no\n"
        "PubkeyAuthentication yes\nPermitRootLogin prohibit-password\nAllowTcpForwarding no\n"
        "X11Forwarding no\nPrintMotd no\nLogLevel VERBOSE\n"
    )
    if os.geteuid() == 0:
        # sshd started by root separates privileges into this directory, which a container
        # without a running sshd lacks.
        os.makedirs("/run/sshd", mode=0o755, exist_ok=True)
    known_hosts = root / "known_hosts"
    known_hosts.write_text(f"[127.0.0.1]:{port} {host_public}\n")
    daemon = Daemon(
        [SSHD, "-D", "-f", str(config), "-E", str(root / "sshd.log")], port, root / "sshd.log"
    )
    try:
        daemon.start()
        yield SshServer(port, user, root / "client_ed25519", known_hosts, host_public, daemon)
    finally:
        daemon.stop()


@attrs.frozen
class HttpServer:
    port: int
    project_root: Path
    token: str
    daemon: Daemon
    # With TLS: the server's self-signed certificate, the CA bundle a client pins.
    certificate: Path | None = None

    def url(self, repository: Path) -> str:
        scheme = "http" if self.certificate is None else "https"
        path = repository.relative_to(self.project_root)
        return f"{scheme}://127.0.0.1:{self.port}/{path}"


def _certificate(root: Path) -> tuple[Path, Path]:
    """A self-signed certificate for 127.0.0.1 (its own CA), and its key."""
    certificate, key = root / "server.pem", root / "server.key"
    subprocess.run(
        [
            "openssl",
            "req",
            "-x509",
            "-newkey",
            "ec",
            "-pkeyopt",
            "ec_paramgen_curve:prime256v1",
            "-nodes",
            "-days",
            "2",
            "-subj",
            "/CN=127.0.0.1",
            "-addext",
            "subjectAltName=IP:127.0.0.1",
            "-keyout",
            str(key),
            "-out",
            str(certificate),
        ],
        check=True,
        capture_output=True,
    )
    return certificate, key


def _htpasswd_line(user: str, password: str) -> str:
    hashed = subprocess.run(
        ["openssl", "passwd", "-apr1", "-stdin"],
        input=password.encode(),
        capture_output=True,
        check=True,
    ).stdout.decode()
    return f"{user}:{hashed.strip()}\n"


@contextlib.contextmanager
def http_server(
    root: Path, project_root: Path, token: str, *, tls: bool = False
) -> Iterator[HttpServer]:
    """nginx on a free loopback port in front of `git http-backend` (through fcgiwrap),
    serving every repository under `project_root` to `x-access-token` with `token`; with `tls`,
    over HTTPS with a self-signed certificate."""
    require_binaries(NGINX, FCGIWRAP, HTTP_BACKEND, shutil.which("openssl") or "openssl")
    root.mkdir(parents=True, exist_ok=True)
    (root / "htpasswd").write_text(_htpasswd_line(HTTP_USER, token))
    socket_path = root / "fcgiwrap.sock"
    port = free_port()
    user = pwd.getpwuid(os.getuid()).pw_name
    # nginx started by root hands its workers to `user`: here the current one, who owns the
    # repositories; started by anyone else it keeps its own user and the directive is ignored.
    user_line = f"user {user};\n" if os.geteuid() == 0 else ""
    temp = {kind: root / f"{kind}-temp" for kind in ("client_body", "proxy", "fastcgi", "uwsgi")}
    temp["scgi"] = root / "scgi-temp"
    certificate = None
    listen = f"127.0.0.1:{port}"
    if tls:
        certificate, key = _certificate(root)
        listen += f" ssl;\n    ssl_certificate {certificate};\n    ssl_certificate_key {key}"
    config = root / "nginx.conf"
    config.write_text(
        f"{user_line}daemon off;\nworker_processes 1;\npid {root / 'nginx.pid'};\n"
        f"error_log {root / 'nginx-error.log'} info;\nevents {{ worker_connections 64; }}\n"
        "http {\n"
        f"  access_log {root / 'nginx-access.log'};\n"
        + "".join(f"  {kind}_temp_path {path};\n" for kind, path in temp.items())
        + f"  server {{\n    listen {listen};\n    client_max_body_size 0;\n"
        "    location / {\n"
        '      auth_basic "git";\n'
        f"      auth_basic_user_file {root / 'htpasswd'};\n"
        f"      fastcgi_pass unix:{socket_path};\n"
        f"      fastcgi_param SCRIPT_FILENAME {HTTP_BACKEND};\n"
        f"      fastcgi_param GIT_PROJECT_ROOT {project_root};\n"
        '      fastcgi_param GIT_HTTP_EXPORT_ALL "";\n'
        "      fastcgi_param REMOTE_USER $remote_user;\n"
        "      fastcgi_param PATH_INFO $uri;\n"
        "      fastcgi_param QUERY_STRING $args;\n"
        "      fastcgi_param REQUEST_METHOD $request_method;\n"
        "      fastcgi_param CONTENT_TYPE $content_type;\n"
        "      fastcgi_param CONTENT_LENGTH $content_length;\n"
        "      fastcgi_param HTTP_CONTENT_ENCODING $http_content_encoding;\n"
        "      fastcgi_param GIT_PROTOCOL $http_git_protocol;\n"
        "    }\n  }\n}\n"
    )
    backend_log = root / "fcgiwrap.log"
    backend_log.touch()
    with backend_log.open("ab") as backend_out:
        backend = subprocess.Popen(
            [FCGIWRAP, "-c", "2", "-s", f"unix:{socket_path}"],
            stdin=subprocess.DEVNULL,
            stdout=backend_out,
            stderr=backend_out,
        )
    daemon = Daemon([NGINX, "-c", str(config), "-p", str(root)], port, root / "nginx-error.log")
    try:
        deadline = time.monotonic() + START_SECONDS
        while not socket_path.exists():
            if backend.poll() is not None or time.monotonic() > deadline:
                pytest.fail(f"fcgiwrap did not start: {backend_log.read_text()[-2000:]}")
            time.sleep(0.05)
        daemon.start()
        yield HttpServer(port, project_root, token, daemon, certificate)
    finally:
        daemon.stop()
        stop(backend)
