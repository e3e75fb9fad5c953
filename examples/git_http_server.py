"""A git server on loopback with nothing but Python and git: `git http-backend` (git's own smart
HTTP server, a CGI program) run by Python's http.server for each request, behind basic
authentication with one token. The demo and the README's remote walk-through govern a
repository through it as through a forge; it is no server for anything else (one process, a
whole request and answer held in memory).

    python3 examples/git_http_server.py ROOT --token-file FILE [--port 0] [--port-file FILE]

serves every bare repository under ROOT at http://127.0.0.1:PORT/NAME.git (pushes too) to any
user name with the token in FILE as password, until it is stopped.
"""

from __future__ import annotations

import argparse
import base64
import contextlib
import hmac
import os
import shutil
import subprocess
import sys
from collections.abc import Sequence
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import urlsplit

BACKEND_TIMEOUT = 300.0


def http_backend() -> str:
    """Where this git keeps `git-http-backend` (its exec path)."""
    git = shutil.which("git")
    if git is None:
        raise SystemExit("git is not on PATH")
    exec_path = subprocess.run(
        [git, "--exec-path"], capture_output=True, text=True, check=True
    ).stdout.strip()
    return os.path.join(exec_path, "git-http-backend")


def git_http_server(root: Path, token: str, port: int = 0) -> ThreadingHTTPServer:
    """`git http-backend` over http://127.0.0.1:PORT for the bare repositories under `root`,
    answering only a request whose basic-authentication password is `token`."""
    backend = http_backend()
    project_root = str(root.resolve())

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            self._serve()

        def do_POST(self) -> None:
            self._serve()

        def log_message(self, format: str, *args: object) -> None:
            """Quiet: the demo's story is told by the ledger, not by a request log."""

        def _authorized(self) -> bool:
            kind, _, credential = self.headers.get("Authorization", "").partition(" ")
            if kind.lower() != "basic":
                return False
            try:
                decoded = base64.b64decode(credential, validate=True).decode()
            except ValueError:
                return False
            user, _, password = decoded.partition(":")
            return bool(user) and hmac.compare_digest(password.encode(), token.encode())

        def _body(self) -> bytes:
            """The request body, whole: git sends a large push in chunks."""
            if self.headers.get("Transfer-Encoding", "").lower() != "chunked":
                return self.rfile.read(int(self.headers.get("Content-Length") or 0))
            chunks: list[bytes] = []
            while True:
                size = int(self.rfile.readline().split(b";")[0].strip(), 16)
                if size == 0:
                    while self.rfile.readline() not in (b"\r\n", b"\n", b""):
                        pass
                    return b"".join(chunks)
                chunks.append(self.rfile.read(size))
                self.rfile.readline()

        def _serve(self) -> None:
            if not self._authorized():
                self.send_response(401)
                self.send_header("WWW-Authenticate", 'Basic realm="git"')
                self.send_header("Content-Length", "0")
                self.end_headers()
                return
            body = self._body()
            parts = urlsplit(self.path)
            environment = {
                "PATH": os.environ.get("PATH", os.defpath),
                "GIT_PROJECT_ROOT": project_root,
                "GIT_HTTP_EXPORT_ALL": "1",
                # A REMOTE_USER is what lets git http-backend take a push.
                "REMOTE_USER": "git",
                "REMOTE_ADDR": self.client_address[0],
                "REQUEST_METHOD": self.command,
                "PATH_INFO": parts.path,
                "QUERY_STRING": parts.query,
                "CONTENT_TYPE": self.headers.get("Content-Type", ""),
                "CONTENT_LENGTH": str(len(body)),
                "HTTP_CONTENT_ENCODING": self.headers.get("Content-Encoding", ""),
                "GIT_PROTOCOL": self.headers.get("Git-Protocol", ""),
            }
            done = subprocess.run(
                [backend],
                input=body,
                env=environment,
                capture_output=True,
                timeout=BACKEND_TIMEOUT,
                check=False,
            )
            # A CGI answer: its header lines (git ends each with CRLF), a blank line, the body.
            head, _, content = done.stdout.partition(b"\r\n\r\n")
            headers = [line.partition(":")[::2] for line in head.decode("latin-1").splitlines()]
            status = next((value for name, value in headers if name.lower() == "status"), "")
            code = int(status.split()[0]) if status.strip() else 200
            if done.returncode != 0 and not head:
                code, content = 500, done.stderr[-2000:]
            self.send_response(code)
            for name, value in headers:
                if name.lower() not in ("status", "content-length"):
                    self.send_header(name, value.strip())
            self.send_header("Content-Length", str(len(content)))
            self.end_headers()
            self.wfile.write(content)

    server = ThreadingHTTPServer(("127.0.0.1", port), Handler)
    server.daemon_threads = True
    return server


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="git_http_server.py", description=__doc__)
    parser.add_argument("root", type=Path, help="the folder holding the bare repositories")
    parser.add_argument("--token-file", type=Path, required=True)
    parser.add_argument("--port", type=int, default=0, help="0 (the default): a free one")
    parser.add_argument("--port-file", type=Path, help="where to write the port, once serving")
    args = parser.parse_args(argv)
    token = args.token_file.read_text().strip()
    with git_http_server(args.root, token, args.port) as server:
        port = server.server_address[1]
        if args.port_file is not None:
            # Written whole under another name first: a reader never sees half a port.
            partial = args.port_file.with_name(args.port_file.name + ".partial")
            partial.write_text(f"{port}\n")
            partial.replace(args.port_file)
        sys.stdout.write(f"serving {args.root} at http://127.0.0.1:{port}/\n")
        sys.stdout.flush()
        with contextlib.suppress(KeyboardInterrupt):
            server.serve_forever()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
