"""The console's static assets under content-digest addresses (`/static/console.<12 hex>.css`),
so that a browser may keep them for good; the plain address still answers, revalidated.
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
    body: bytes
    media_type: str
    etag: str  # the body's SHA-256, quoted


def digest_name(name: str, digest: str) -> str:
    """`console.css` and its bytes' SHA-256 -> `console.<12 hex>.css`."""
    stem, dot, suffix = name.rpartition(".")
    short = digest[:DIGEST_HEX]
    return f"{stem}.{short}.{suffix}" if dot else f"{name}.{short}"


class StaticAssets:
    """The files of one folder, read once at start, each under its plain and digest names."""

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
            digest = hashlib.sha256(body).hexdigest()
            asset = Asset(body, media_type, f'"{digest}"')
            named = digest_name(path.name, digest)
            self.addresses[path.name] = f"/static/{named}"
            self._by_name[path.name] = (asset, False)
            self._by_name[named] = (asset, True)

    def url(self, name: str) -> str:
        """A template's link to an asset; a typo is a KeyError, so that it fails loudly."""
        return self.addresses[name]

    async def serve(self, request: Request) -> Response:
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
