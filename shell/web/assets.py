"""The console's static assets (shell/web/static/: its stylesheet and scripts) under
content-digest addresses: `/static/console.<12 hex of its SHA-256>.css`.

A page is never cached (`no-store`), but what it links to is: an asset's address changes
whenever its bytes do, so a browser may keep it for a year without asking again
(`immutable`), and a page's render-blocking stylesheet costs no request after the first.
The plain address (`/static/console.css`) still answers, revalidated on every use
(`no-cache`, with an ETag), for whatever linked to it before.
"""

from __future__ import annotations

import hashlib
import mimetypes
from pathlib import Path

import attrs
from starlette.requests import Request
from starlette.responses import Response

DIGEST_HEX = 12
IMMUTABLE = "public, max-age=31536000, immutable"
REVALIDATE = "no-cache"
TYPES = {".css": "text/css; charset=utf-8", ".js": "text/javascript; charset=utf-8"}


@attrs.frozen
class Asset:
    """One file: its bytes, content type and strong ETag (its digest)."""

    body: bytes
    media_type: str
    digest: str

    @property
    def etag(self) -> str:
        return f'"{self.digest}"'


def digest_name(name: str, digest: str) -> str:
    """`console.css` and its bytes' SHA-256 (hex) -> `console.<12 hex>.css`."""
    stem, dot, suffix = name.rpartition(".")
    short = digest[:DIGEST_HEX]
    return f"{stem}.{short}.{suffix}" if dot else f"{name}.{short}"


class StaticAssets:
    """The files of one folder, read once at start (they ship with the package): each under
    its plain name and its digest name."""

    def __init__(self, folder: Path) -> None:
        self.addresses: dict[str, str] = {}
        self._by_name: dict[str, tuple[Asset, bool]] = {}
        for path in sorted(folder.iterdir()):
            if not path.is_file():
                continue
            body = path.read_bytes()
            media_type = TYPES.get(path.suffix) or (
                mimetypes.guess_type(path.name)[0] or "application/octet-stream"
            )
            asset = Asset(body, media_type, hashlib.sha256(body).hexdigest())
            named = digest_name(path.name, asset.digest)
            self.addresses[path.name] = f"/static/{named}"
            self._by_name[path.name] = (asset, False)
            self._by_name[named] = (asset, True)

    def url(self, name: str) -> str:
        """A template's link to an asset: its digest address (a name not in the folder is a
        KeyError, so a template's typo fails loudly)."""
        return self.addresses[name]

    async def serve(self, request: Request) -> Response:
        """GET /static/{name}: the asset, cacheable for good under its digest address."""
        found = self._by_name.get(str(request.path_params["name"]))
        if found is None:
            return Response("not found", status_code=404, media_type="text/plain")
        asset, digested = found
        headers = {
            "Cache-Control": IMMUTABLE if digested else REVALIDATE,
            "ETag": asset.etag,
            "X-Content-Type-Options": "nosniff",
        }
        if request.headers.get("if-none-match") == asset.etag:
            return Response(status_code=304, headers=headers)
        return Response(asset.body, media_type=asset.media_type, headers=headers)
