"""Governed repositories on a git server: the ledger's bare mirror of each, its credentials,
and the push that is the remote's compare-and-swap.

Checks and workspaces read the mirror; only the governed write talks to the remote with a
credential, the ledger's alone: an SSH key with a pinned known_hosts file, or an HTTPS token handed
to git in its environment, never in its argv, a URL, a row, an event or a workspace. The mirror's
`aios-remote.json` names the remote and the credential's files or systemd credentials, no secret.
"""

from __future__ import annotations

import base64
import fcntl
import json
import os
import re
import shlex
import shutil
from collections.abc import Mapping, Sequence
from typing import Any
from urllib.parse import urlsplit

import attrs
from aios_ledger.core import LedgerError
from aios_ledger.core.config import DEFAULT_TOKEN_USER, RemoteSettings
from aios_ledger.shell.git.runner import STDERR_TAIL, GitResult, read_ref, run_git

REMOTE_FILE = "aios-remote.json"
FETCH_LOCK = "aios-fetch.lock"
REMOTE_TIMEOUT = 300.0
MAX_TOKEN_BYTES = 16 * 1024
CREDENTIALS_DIRECTORY = "CREDENTIALS_DIRECTORY"
# A systemd credential's name: what `LoadCredential=NAME:...` accepts, and never a path.
_CREDENTIAL_NAME = re.compile(r"(?!\.\.?$)[A-Za-z0-9_.@+-]{1,255}")
# The credentials given by a systemd credential's name, in place of a file.
_CREDENTIAL_NAMES = ("key_credential", "token_credential")

URL_INVALID = "REMOTE_URL_INVALID"
CREDENTIAL_INVALID = "REMOTE_CREDENTIAL_INVALID"
# Why a remote could not be read or written: each its own code, with the server's message.
HOST_KEY_REFUSED = "REMOTE_HOST_KEY_REFUSED"
CERTIFICATE_REFUSED = "REMOTE_CERTIFICATE_REFUSED"
AUTH_REFUSED = "REMOTE_AUTH_REFUSED"
UNREACHABLE = "REMOTE_UNREACHABLE"
PUSH_REFUSED = "REMOTE_PUSH_REFUSED"
GIT_FAILED = "REMOTE_GIT_FAILED"
NOTES_MOVED = "REMOTE_NOTES_MOVED"
# How many times a push whose notes ref another writer moved is tried on the moved ref.
NOTE_PUSH_ATTEMPTS = 3
# Who made a notes commit: git needs a committer, the ledger's own name.
NOTES_IDENTITY = ("-c", "user.name=aios-ledger", "-c", "user.email=aios-ledger@localhost")

# What git and ssh print for each cause, tried in this order (a host key problem first: ssh
# follows it with a disconnect that would read as unreachable).
_CAUSES = {
    code: re.compile(shape, re.IGNORECASE)
    for code, shape in (
        (
            HOST_KEY_REFUSED,
            r"Host key verification failed|REMOTE HOST IDENTIFICATION HAS CHANGED"
            r"|host key .* is not known|No .* host key is known",
        ),
        (
            CERTIFICATE_REFUSED,
            r"SSL certificate problem|server certificate verification failed"
            r"|certificate verify failed|unable to get local issuer certificate",
        ),
        (
            AUTH_REFUSED,
            r"Permission denied \(|Authentication failed|could not read Username"
            r"|could not read Password|error: 40[13]|HTTP 40[13]|returned error: 40[13]",
        ),
        (
            UNREACHABLE,
            r"Could not resolve host|Connection refused|Connection timed out|Failed to connect"
            r"|Connection reset|Connection closed|Network is unreachable|No route to host"
            r"|unexpected disconnect|remote end hung up|early EOF|Operation timed out"
            r"|kex_exchange_identification|Empty reply from server|Could not read from remote",
        ),
    )
}
# A scp-like address, `[user@]host:path` (a colon before any slash).
_SCP_LIKE = re.compile(
    r"^(?:[^@/:\s-][^@/:\s]*@)?(?:[A-Za-z0-9][A-Za-z0-9._-]*|\[[0-9A-Fa-f:.]+\]):(?!//)([^:].*)$"
)


@attrs.frozen
class Credentials:
    """Which files hold the ledger's credential for a remote (their contents are never kept)."""

    ssh_key: str | None = None
    known_hosts: str | None = None
    token_file: str | None = None
    token_user: str = DEFAULT_TOKEN_USER
    ca_bundle: str | None = None
    # systemd credentials' names, in place of `ssh_key` or `token_file`.
    key_credential: str | None = None
    token_credential: str | None = None

    def key_path(self) -> str:
        """The SSH private key's file: `ssh_key`, or the systemd credential's."""
        if self.key_credential is not None:
            return credential_file(self.key_credential, "--key-credential")
        assert self.ssh_key is not None
        return self.ssh_key

    def token_source(self) -> tuple[str, str]:
        """The token's file, and how a message names it (never by its content)."""
        if self.token_credential is not None:
            shown = f"--token-credential {self.token_credential}"
            return credential_file(self.token_credential, "--token-credential"), shown
        assert self.token_file is not None
        return self.token_file, "--token-file"


def credentials_of(settings: RemoteSettings) -> Credentials:
    """The credential files `[remote]` names, with the command line's flags over it."""
    return Credentials(**{name: getattr(settings, name) for name in attrs.fields_dict(Credentials)})


def _option(name: str) -> str:
    """The command-line option of a credential's field (`ssh_key`: `--ssh-key`)."""
    return "--" + name.replace("_", "-")


def credential_file(name: str, option: str) -> str:
    """The file of systemd credential `name` in `$CREDENTIALS_DIRECTORY` (`LoadCredential=`),
    or REMOTE_CREDENTIAL_INVALID naming the credential."""
    if not _CREDENTIAL_NAME.fullmatch(name):
        raise LedgerError(
            CREDENTIAL_INVALID,
            f"{option} {name[:100]!r}: a systemd credential's name (letters, digits, ._@+-)",
        )
    directory = os.environ.get(CREDENTIALS_DIRECTORY, "")
    if not directory:
        raise LedgerError(
            CREDENTIAL_INVALID,
            f"{option} {name}: ${CREDENTIALS_DIRECTORY} is not set (run under a systemd unit with"
            f" LoadCredential={name}:FILE)",
        )
    path = os.path.join(directory, name)
    if not os.path.isfile(path) or not os.access(path, os.R_OK):
        raise LedgerError(
            CREDENTIAL_INVALID,
            f"{option} {name}: no readable credential {name!r} in ${CREDENTIALS_DIRECTORY}"
            f" (LoadCredential={name}:FILE)",
        )
    return path


@attrs.frozen
class Remote:
    """A governed repository's remote: its URL (no credential in it), scheme, and credentials."""

    url: str
    scheme: str
    credentials: Credentials

    def public(self) -> dict[str, Any]:
        """What answers show of the remote: the URL, and which kind of credential it takes."""
        credential = "ssh-key" if self.scheme == "ssh" else "token"
        return {"url": self.url, "scheme": self.scheme, "credential": credential}


def remote_kind(location: str) -> str | None:
    """`ssh`, `https` or `http` for a remote URL, None for a path on this machine; a URL of any
    other scheme, or one carrying a password, is refused."""
    if "://" in location:
        parts = urlsplit(location)
        scheme = parts.scheme.lower()
        if scheme not in ("ssh", "https", "http") or not parts.hostname:
            raise LedgerError(
                URL_INVALID,
                f"{_shown_url(location)!r}: give ssh://, https://, http://, git@host:path or a"
                " local path",
            )
        if parts.hostname.startswith("-") or parts.path.startswith("/-"):
            raise LedgerError(
                URL_INVALID, f"{_shown_url(location)!r}: a host or path like an option"
            )
        if parts.password is not None or (scheme != "ssh" and parts.username is not None):
            raise LedgerError(
                URL_INVALID,
                "a credential in the URL would be stored with it: give the URL without it and"
                " the token in --token-file",
            )
        return scheme
    if re.match(r"^[A-Za-z0-9+.-]+::", location):
        # git's `<transport>::<address>` runs a remote helper, whatever it names.
        raise LedgerError(URL_INVALID, f"{location[:100]!r}: a remote helper is not a remote")
    if not location.startswith(("/", ".")) and _SCP_LIKE.match(location):
        return "ssh"
    return None


def _shown_url(location: str) -> str:
    """`location` without any userinfo, for a message."""
    return re.sub(r"//[^/@]*@", "//", location)[:300]


def check_credentials(kind: str, credentials: Credentials) -> Credentials:
    """The credentials with absolute paths, each file and systemd credential readable; the
    kind's own required."""
    # Each credential the kind needs, from either of its sources.
    needed = (
        (("ssh_key", "key_credential"), ("known_hosts",))
        if kind == "ssh"
        else (("token_file", "token_credential"),)
    )
    for sources in needed:
        given = [name for name in sources if getattr(credentials, name) is not None]
        named = " or ".join(
            f"{_option(name)} {'NAME' if name.endswith('credential') else 'FILE'}"
            for name in sources
        )
        if not given:
            raise LedgerError(
                CREDENTIAL_INVALID, f"a {kind} remote takes {named} (the ledger's own credential)"
            )
        if len(given) > 1:
            raise LedgerError(CREDENTIAL_INVALID, f"a {kind} remote takes {named}, not both")
    allowed = {name for sources in needed for name in sources}
    if kind == "https":
        allowed.add("ca_bundle")
    misplaced = [
        _option(name)
        for name in ("ssh_key", "known_hosts", "token_file", "ca_bundle", *_CREDENTIAL_NAMES)
        if getattr(credentials, name) is not None and name not in allowed
    ]
    if misplaced:
        raise LedgerError(CREDENTIAL_INVALID, f"a {kind} remote takes no {', '.join(misplaced)}")
    if not re.fullmatch(r"[A-Za-z0-9._@+-]{1,200}", credentials.token_user):
        raise LedgerError(CREDENTIAL_INVALID, "--token-user: letters, digits and ._@+-")
    resolved: dict[str, str] = {}
    for name in (*_CREDENTIAL_NAMES, "ssh_key", "known_hosts", "token_file", "ca_bundle"):
        value = getattr(credentials, name)
        if value is not None and name in _CREDENTIAL_NAMES:
            credential_file(value, _option(name))
        elif value is not None:
            resolved[name] = os.path.abspath(value)
            if not os.path.isfile(resolved[name]) or not os.access(resolved[name], os.R_OK):
                raise LedgerError(
                    CREDENTIAL_INVALID, f"{_option(name)}: {value[:200]!r} is no file"
                )
    return attrs.evolve(credentials, **resolved)


def save_remote(mirror: str, remote: Remote) -> None:
    document = {"url": remote.url, "scheme": remote.scheme, **attrs.asdict(remote.credentials)}
    path = os.path.join(mirror, REMOTE_FILE)
    descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(descriptor, "w") as handle:
        json.dump(document, handle, indent=2, sort_keys=True)


def remote_of(repository_path: str) -> Remote | None:
    """The remote a mirror stands for, or None for a repository governed in place."""
    try:
        with open(os.path.join(repository_path, REMOTE_FILE), encoding="utf-8") as handle:
            document = json.load(handle)
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as exc:
        raise LedgerError("REMOTE_CONFIG_INVALID", f"{repository_path}: {exc}") from None
    fields = {field.name for field in attrs.fields(Credentials)}
    credentials = Credentials(**{name: document.get(name) for name in fields if name in document})
    return Remote(str(document["url"]), str(document["scheme"]), credentials)


def read_token(credentials: Credentials) -> str:
    path, source = credentials.token_source()
    try:
        with open(path, "rb") as handle:
            raw = handle.read(MAX_TOKEN_BYTES + 1)
    except OSError as exc:
        raise LedgerError(CREDENTIAL_INVALID, f"{source}: {exc.strerror}") from None
    token = raw.decode("utf-8", "replace").strip()
    if not token or len(raw) > MAX_TOKEN_BYTES or any(c in token for c in "\r\n\0"):
        raise LedgerError(CREDENTIAL_INVALID, f"{source}: one token on one line")
    return token


def redact(text: str, remote: Remote) -> str:
    """`text` without any form of the remote's secret: a token, alone or in a Basic header."""
    if remote.scheme != "ssh":
        token = read_token(remote.credentials)
        basic = f"{remote.credentials.token_user}:{token}".encode()
        for secret in (token, base64.b64encode(basic).decode()):
            text = text.replace(secret, "[REDACTED]")
    return re.sub(r"(?i)(authorization:\s*\w+\s+)\S+", r"\1[REDACTED]", text)


def git_options(remote: Remote) -> list[str]:
    """git's `-c` options for the remote: only its own protocol, the CA bundle it names."""
    options = ["-c", f"protocol.{remote.scheme}.allow=always"]
    if remote.scheme != "ssh":
        options += ["-c", "http.sslVerify=true", "-c", "http.followRedirects=false"]
    if remote.credentials.ca_bundle is not None:
        options += ["-c", f"http.sslCAInfo={remote.credentials.ca_bundle}"]
    return options


def git_environment(remote: Remote) -> dict[str, str]:
    """The credential, in git's environment only: ssh with the key and the pinned host keys
    alone (no ssh config, agent or prompt), or the token as an HTTP header."""
    credentials = remote.credentials
    if remote.scheme == "ssh":
        assert credentials.known_hosts is not None
        command = ["ssh", "-F", "/dev/null", "-i", credentials.key_path()]
        for option in (
            "IdentitiesOnly=yes",
            "IdentityAgent=none",
            "StrictHostKeyChecking=yes",
            f"UserKnownHostsFile={credentials.known_hosts}",
            "GlobalKnownHostsFile=/dev/null",
            "BatchMode=yes",
            "ConnectTimeout=30",
        ):
            command += ["-o", option]
        return {"GIT_SSH_COMMAND": shlex.join(command), "GIT_SSH_VARIANT": "ssh"}
    basic = f"{credentials.token_user}:{read_token(credentials)}".encode()
    return {
        "GIT_CONFIG_COUNT": "1",
        "GIT_CONFIG_KEY_0": "http.extraHeader",
        "GIT_CONFIG_VALUE_0": "Authorization: Basic " + base64.b64encode(basic).decode(),
    }


def refusal(remote: Remote, result: GitResult, what: str) -> LedgerError:
    """The error of a failed git call on the remote: its cause's code, the server's message
    (credentials redacted)."""
    message = redact(result.stderr.decode("utf-8", "replace").strip(), remote)[-STDERR_TAIL:]
    code = next((code for code, shape in _CAUSES.items() if shape.search(message)), GIT_FAILED)
    return LedgerError(code, f"{what} {remote.url}: {message or f'git exited {result.returncode}'}")


def run_remote(
    remote: Remote, args: Sequence[str], *, what: str, git_dir: str | None = None
) -> GitResult:
    """`git <args>` against the remote with the ledger's credential; a failure raises its
    cause's code."""
    prefix = [] if git_dir is None else ["--git-dir", git_dir]
    result = run_git(
        [*git_options(remote), *prefix, *args],
        env=git_environment(remote),
        timeout=REMOTE_TIMEOUT,
        max_output=64 << 20,
        check=False,
    )
    if result.returncode != 0:
        raise refusal(remote, result, what)
    return result


@attrs.frozen
class Listing:
    """The remote's branches and notes (`ls-remote`), and the branch its HEAD names."""

    refs: Mapping[str, str]
    default_branch: str | None


def list_remote(remote: Remote) -> Listing:
    found = run_remote(
        remote,
        ["ls-remote", "--symref", remote.url, "HEAD", "refs/heads/*", "refs/notes/*"],
        what="cannot read",
    )
    refs: dict[str, str] = {}
    default = None
    for line in found.text.splitlines():
        value, _, name = line.partition("\t")
        if value.startswith("ref: ") and name == "HEAD":
            default = value.removeprefix("ref: ").removeprefix("refs/heads/")
        elif name != "HEAD":
            refs[name] = value
    return Listing(refs, default)


def remote_ref(remote: Remote, ref: str) -> str | None:
    """The object id `ref` holds on the remote now, or None when it does not exist there."""
    return list_remote(remote).refs.get(ref)


def fetch_mirror(mirror: str, remote: Remote) -> Listing:
    """Bring the mirror's branches and notes to the remote's; its HEAD names the remote's.
    One fetch at a time per mirror: two would race for its ref locks."""
    listing = list_remote(remote)
    fetch = ["fetch", "--quiet", "--no-tags", "--prune", "--no-write-fetch-head", remote.url]
    refspecs = ["+refs/heads/*:refs/heads/*", "+refs/notes/*:refs/notes/*"]
    with open(os.path.join(mirror, FETCH_LOCK), "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        run_remote(remote, [*fetch, *refspecs], what="cannot fetch from", git_dir=mirror)
    if listing.default_branch is not None:
        head = f"refs/heads/{listing.default_branch}"
        run_git(["--git-dir", mirror, "symbolic-ref", "HEAD", head])
    return listing


def refresh_mirror(repository_path: str) -> None:
    """Fetch a mirror from its remote; a repository governed in place is left as it is."""
    remote = remote_of(repository_path)
    if remote is not None:
        fetch_mirror(repository_path, remote)


def create_mirror(mirror: str, remote: Remote) -> Listing:
    """A new bare mirror of `remote` at `mirror` (or the one already there, for the same URL)."""
    existing = remote_of(mirror) if os.path.isdir(mirror) else None
    if existing is not None and existing.url != remote.url:
        raise LedgerError(
            "REPOSITORY_NOT_BARE", f"{mirror} mirrors {existing.url}, not {remote.url}"
        )
    if existing is None and os.path.exists(mirror) and os.listdir(mirror):
        raise LedgerError("REPOSITORY_NOT_BARE", f"{mirror}: the mirror's folder is not empty")
    # A remote the ledger cannot read leaves no mirror behind.
    list_remote(remote)
    created = not os.path.exists(mirror)
    os.makedirs(mirror, mode=0o700, exist_ok=True)
    try:
        run_git(["init", "--quiet", "--bare", mirror])
        save_remote(mirror, remote)
        return fetch_mirror(mirror, remote)
    except BaseException:
        if created:
            shutil.rmtree(mirror, ignore_errors=True)
        raise


@attrs.frozen
class PushAnswer:
    """What the remote answered a governed push: it took the ref (`swapped`), or why not
    (`code` None: the lease was refused, the ref as read says by whom)."""

    swapped: bool
    code: str | None = None
    message: str = ""


@attrs.frozen
class PushedNote:
    """An attestation note to land with the branch: the notes ref it goes under and its text
    (attached to the branch's new commit)."""

    notes_ref: str
    text: str


def push_write(
    mirror: str,
    remote: Remote,
    ref: str,
    new: str,
    old: str,
    *,
    zero: str,
    note: PushedNote | None = None,
) -> PushAnswer:
    """The remote's compare-and-swap: `ref` from `old` (`zero`: absent) to `new`, refused by the
    server when the ref holds anything else (`--force-with-lease`, an empty value for absent).
    With `note`, the notes ref moves in the same atomic push, leased on the value the mirror
    last fetched, so the remote never holds the branch without its note or the reverse; a
    notes ref another writer moved meanwhile is fetched again and the note appended to it."""
    branch_lease = f"--force-with-lease={ref}:{'' if old == zero else old}"
    for _ in range(NOTE_PUSH_ATTEMPTS):
        leases, refspecs = [branch_lease], [f"{new}:{ref}"]
        notes_commit = None
        if note is not None:
            base = read_ref(mirror, note.notes_ref)
            notes_commit = _notes_commit(mirror, note, new, base)
            leases.append(f"--force-with-lease={note.notes_ref}:{base or ''}")
            refspecs.append(f"{notes_commit}:{note.notes_ref}")
        result = push_refs(mirror, remote, leases, refspecs)
        if result.returncode == 0:
            run_git(["--git-dir", mirror, "update-ref", ref, new])
            if note is not None and notes_commit is not None:
                run_git(["--git-dir", mirror, "update-ref", note.notes_ref, notes_commit])
            return PushAnswer(True)
        # git's porcelain answer per ref (stdout) says which lease or the server refused.
        answers = _porcelain(result.stdout.decode("utf-8", "replace"))
        failed = refusal(remote, result, "cannot push to")
        branch = answers.get(ref, "")
        if "[remote rejected]" in branch:
            return PushAnswer(False, PUSH_REFUSED, failed.detail)
        if "[rejected]" in branch and "atomic push failed" not in branch:
            return PushAnswer(False, None, failed.detail)
        if note is None or "stale info" not in answers.get(note.notes_ref, ""):
            return PushAnswer(False, failed.code, failed.detail)
        # Only the notes ref had moved: read it again, and append the note to it.
        try:
            _fetch_notes(mirror, remote, note.notes_ref)
        except LedgerError as unread:
            return PushAnswer(False, unread.code, unread.detail)
    assert note is not None  # only a moved notes ref tries again
    return PushAnswer(
        False,
        NOTES_MOVED,
        f"{note.notes_ref} of {remote.url} moved under each of {NOTE_PUSH_ATTEMPTS} pushes;"
        " the branch was not pushed without its note",
    )


def push_refs(
    mirror: str, remote: Remote, leases: Sequence[str], refspecs: Sequence[str]
) -> GitResult:
    """One `git push --atomic` of `refspecs` under `leases`; a module function, so that a test
    can move the remote's refs right before it."""
    push = ["push", "--atomic", "--porcelain", "--no-verify", *leases, remote.url, *refspecs]
    return run_git(
        [*git_options(remote), "--git-dir", mirror, *push],
        env=git_environment(remote),
        timeout=REMOTE_TIMEOUT,
        check=False,
    )


def _porcelain(answer: str) -> dict[str, str]:
    """`git push --porcelain`'s summary per destination ref (`FLAG\tFROM:TO\tSUMMARY`)."""
    rows = [line.split("\t") for line in answer.splitlines()]
    return {row[1].rpartition(":")[2]: row[2] for row in rows if len(row) >= 3 and ":" in row[1]}


def _notes_commit(mirror: str, note: PushedNote, commit: str, base: str | None) -> str:
    """A notes commit on `base` (None: the first) attaching `note` to `commit`, made on a
    scratch notes ref: the mirror's own notes ref moves only once the remote took the push.
    Under the fetch lock, as `fetch --prune` would drop a notes ref the remote lacks."""
    scratch = f"refs/notes/aios-pending-{os.getpid()}-{commit[:16]}"
    with open(os.path.join(mirror, FETCH_LOCK), "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            if base is None:
                run_git(["--git-dir", mirror, "update-ref", "-d", scratch], check=False)
            else:
                run_git(["--git-dir", mirror, "update-ref", scratch, base])
            notes = ["notes", "--ref", scratch, "add", "--force", "--file", "-", commit]
            run_git(
                ["--git-dir", mirror, *NOTES_IDENTITY, *notes],
                stdin=note.text.encode("utf-8") + b"\n",
            )
            made = read_ref(mirror, scratch)
        finally:
            run_git(["--git-dir", mirror, "update-ref", "-d", scratch], check=False)
    assert made is not None
    return made


def _fetch_notes(mirror: str, remote: Remote, notes_ref: str) -> None:
    fetch = ["fetch", "--quiet", "--no-tags", "--no-write-fetch-head", remote.url]
    with open(os.path.join(mirror, FETCH_LOCK), "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if remote_ref(remote, notes_ref) is None:
            run_git(["--git-dir", mirror, "update-ref", "-d", notes_ref], check=False)
            return
        refspec = f"+{notes_ref}:{notes_ref}"
        run_remote(remote, [*fetch, refspec], what="cannot fetch from", git_dir=mirror)


def push_notes(mirror: str, remote: Remote, notes_ref: str) -> None:
    """Send the mirror's attestation notes to the remote (a fast-forward, so no note another
    writer pushed is dropped): for a note made after its write landed without one."""
    run_remote(
        remote,
        ["push", "--porcelain", remote.url, f"{notes_ref}:{notes_ref}"],
        what="cannot push the notes to",
        git_dir=mirror,
    )
