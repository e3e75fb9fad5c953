"""The forges' REST APIs for a pull request (GitHub, Gitea/Forgejo) or merge request (GitLab):
find the open request from a head branch into a base branch, else open one. The token is sent in
a header only, and redacted from every message that leaves here.
"""

from __future__ import annotations

import json
import ssl
import urllib.error
import urllib.request
from collections.abc import Callable, Mapping
from typing import Any
from urllib.parse import quote, urlencode

import attrs
from aios_ledger.core.git.forges import (
    AUTH_REFUSED,
    FORGE_FAILED,
    MAX_MESSAGE,
    REFUSED,
    UNREACHABLE,
    PullRequestSetting,
    PullRequestText,
)

FORGE_TIMEOUT = 60.0
MAX_ANSWER_BYTES = 16 << 20
USER_AGENT = "aios-ledger"


@attrs.frozen
class Opened:
    """The request the forge holds for the head and base: found open, or created now."""

    url: str
    number: int
    adopted: bool


class ForgeFailure(Exception):
    """A forge that did not open the request: a `core.git.pull_requests` failure code, the HTTP
    status when one came back, and the forge's message (the token redacted)."""

    def __init__(self, code: str, status: int | None, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.status = status
        self.message = message[:MAX_MESSAGE]


@attrs.frozen
class ForgeClient:
    """One forge's API for one project, with the ledger's token and CA bundle."""

    setting: PullRequestSetting
    token: str
    ca_bundle: str | None = None

    def open_or_find(self, head: str, base: str, text: PullRequestText) -> Opened:
        """The open request from `head` into `base`, adopted, or a new one."""
        forge = FORGE_KINDS[self.setting.forge]
        found = forge.find(self, head, base)
        if found is not None:
            return found
        return forge.create(self, head, base, text)

    # -- HTTP --

    def project_path(self) -> str:
        """The project as the forge's paths name it: GitLab's id is its path, URL-encoded."""
        if self.setting.forge == "gitlab":
            return quote(self.setting.project, safe="")
        owner, name = self.setting.project.split("/")
        return f"{quote(owner, safe='')}/{quote(name, safe='')}"

    def headers(self) -> dict[str, str]:
        auth = {
            "github": {"Authorization": f"Bearer {self.token}"},
            "gitea": {"Authorization": f"token {self.token}"},
            "gitlab": {"PRIVATE-TOKEN": self.token},
        }[self.setting.forge]
        accept = (
            "application/vnd.github+json" if self.setting.forge == "github" else "application/json"
        )
        return {"Accept": accept, "User-Agent": USER_AGENT, **auth}

    def call(
        self, method: str, path: str, *, query: Mapping[str, str] | None = None, body: Any = None
    ) -> tuple[int, Any]:
        """The status and JSON answer of one request; a status of 400 and above raises its
        `ForgeFailure`, except 404 on a GET (answered as `(404, None)`)."""
        url = self.setting.api_url + path + ("?" + urlencode(query) if query else "")
        data = None if body is None else json.dumps(body).encode()
        headers = self.headers()
        if data is not None:
            headers["Content-Type"] = "application/json"
        request = urllib.request.Request(url, data=data, method=method, headers=headers)
        context = ssl.create_default_context(cafile=self.ca_bundle)
        opener = urllib.request.build_opener(
            urllib.request.HTTPSHandler(context=context), _NoRedirect()
        )
        try:
            with opener.open(request, timeout=FORGE_TIMEOUT) as answer:
                return answer.status, _json_of(answer.read(MAX_ANSWER_BYTES + 1), answer.status)
        except urllib.error.HTTPError as failed:
            raw = failed.read(MAX_ANSWER_BYTES + 1)
            if failed.code == 404 and method == "GET":
                return 404, None
            raise ForgeFailure(
                _code_of(failed.code), failed.code, self.redacted(_message_of(raw, failed))
            ) from None
        except (urllib.error.URLError, OSError, ValueError) as failed:
            reason = getattr(failed, "reason", failed)
            raise ForgeFailure(
                UNREACHABLE, None, self.redacted(f"{method} {url}: {reason}")
            ) from None

    def redacted(self, text: str) -> str:
        return text.replace(self.token, "[REDACTED]")[:MAX_MESSAGE] if self.token else text


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    """A redirect is answered as the forge's status: the token is never sent elsewhere."""

    def redirect_request(self, *args: Any, **kwargs: Any) -> None:
        return None


def _code_of(status: int) -> str:
    if status in (401, 403):
        return AUTH_REFUSED
    if 400 <= status < 500:
        return REFUSED
    return FORGE_FAILED


def _message_of(raw: bytes, failed: urllib.error.HTTPError) -> str:
    """The forge's own message (`message`, GitLab's `message` or `error`, GitHub's `errors`)."""
    text = raw[: MAX_MESSAGE * 2].decode("utf-8", "replace").strip()
    try:
        document = json.loads(text)
    except ValueError:
        return f"HTTP {failed.code}: {text or failed.reason}"
    if isinstance(document, dict):
        parts = [str(document.get(key)) for key in ("message", "error") if document.get(key)]
        errors = document.get("errors")
        if errors:
            parts.append(json.dumps(errors, sort_keys=True))
        if parts:
            return f"HTTP {failed.code}: {'; '.join(parts)}"
    return f"HTTP {failed.code}: {text}"


def _json_of(raw: bytes, status: int) -> Any:
    if len(raw) > MAX_ANSWER_BYTES:
        raise ForgeFailure(FORGE_FAILED, status, "the forge's answer is too large")
    try:
        return json.loads(raw) if raw else None
    except ValueError:
        raise ForgeFailure(FORGE_FAILED, status, "the forge's answer is not JSON") from None


def _opened(document: Any, status: int, *, url_key: str, number_key: str, adopted: bool) -> Opened:
    if isinstance(document, dict):
        url, number = document.get(url_key), document.get(number_key)
        # The URL is shown as a link: only a web address of a sane length is taken.
        web = isinstance(url, str) and url.startswith(("https://", "http://")) and len(url) <= 2000
        if web and type(number) is int and 0 < number <= 2**53:
            return Opened(str(url), number, adopted)
    raise ForgeFailure(FORGE_FAILED, status, "the forge's answer names no request")


# --- each forge ----------------------------------------------------------------------------------


@attrs.frozen
class ForgeKind:
    find: Callable[[ForgeClient, str, str], Opened | None]
    create: Callable[[ForgeClient, str, str, PullRequestText], Opened]


def _github_find(client: ForgeClient, head: str, base: str) -> Opened | None:
    owner = client.setting.project.split("/")[0]
    query = {"head": f"{owner}:{head}", "base": base, "state": "open"}
    status, found = client.call("GET", f"/repos/{client.project_path()}/pulls", query=query)
    if isinstance(found, list) and found:
        return _opened(found[0], status, url_key="html_url", number_key="number", adopted=True)
    return None


def _pulls_create(client: ForgeClient, head: str, base: str, text: PullRequestText) -> Opened:
    """GitHub's and Gitea's create alike: `POST /repos/{owner}/{repo}/pulls`."""
    body = {"title": text.title, "head": head, "base": base, "body": text.body}
    status, made = client.call("POST", f"/repos/{client.project_path()}/pulls", body=body)
    return _opened(made, status, url_key="html_url", number_key="number", adopted=False)


def _gitea_find(client: ForgeClient, head: str, base: str) -> Opened | None:
    path = f"/repos/{client.project_path()}/pulls/{quote(base, safe='')}/{quote(head, safe='')}"
    status, found = client.call("GET", path)
    if isinstance(found, dict) and found.get("state") == "open":
        return _opened(found, status, url_key="html_url", number_key="number", adopted=True)
    return None


def _gitlab_find(client: ForgeClient, head: str, base: str) -> Opened | None:
    query = {"source_branch": head, "target_branch": base, "state": "opened"}
    path = f"/projects/{client.project_path()}/merge_requests"
    status, found = client.call("GET", path, query=query)
    if isinstance(found, list) and found:
        return _opened(found[0], status, url_key="web_url", number_key="iid", adopted=True)
    return None


def _gitlab_create(client: ForgeClient, head: str, base: str, text: PullRequestText) -> Opened:
    body = {
        "source_branch": head,
        "target_branch": base,
        "title": text.title,
        "description": text.body,
    }
    path = f"/projects/{client.project_path()}/merge_requests"
    status, made = client.call("POST", path, body=body)
    return _opened(made, status, url_key="web_url", number_key="iid", adopted=False)


FORGE_KINDS = {
    "github": ForgeKind(_github_find, _pulls_create),
    "gitea": ForgeKind(_gitea_find, _pulls_create),
    "gitlab": ForgeKind(_gitlab_find, _gitlab_create),
}
