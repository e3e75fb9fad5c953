"""The console's sessions, in the server's memory, so that a restart ends them all: each holds,
under its id's sha256, the digest of the API token it signed in with (never the token).

A session ends when idle, at its absolute expiry, on logout, and when its token no longer
authenticates.
"""

from __future__ import annotations

import hashlib
import secrets
import threading
import time
from collections.abc import Callable

import attrs

SESSION_ID_BYTES = 32
CSRF_TOKEN_BYTES = 32
DEFAULT_IDLE_SECONDS = 30 * 60.0
DEFAULT_MAX_SECONDS = 12 * 3600.0
# One more evicts the oldest, bounding what a token signing in over and over makes us keep.
MAX_SESSIONS = 10_000


@attrs.frozen
class SessionSettings:
    idle_seconds: float = DEFAULT_IDLE_SECONDS
    max_seconds: float = DEFAULT_MAX_SECONDS


@attrs.define
class Session:
    token_sha256: str
    csrf_token: str
    created: float
    last_used: float


def _key(session_id: str) -> str:
    return hashlib.sha256(session_id.encode("utf-8", "surrogatepass")).hexdigest()


class SessionStore:
    """The sessions of one server, timed by a monotonic `clock` in seconds."""

    def __init__(
        self, settings: SessionSettings, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.settings = settings
        self._clock = clock
        self._sessions: dict[str, Session] = {}
        self._lock = threading.Lock()

    def open(self, token_sha256: str) -> tuple[str, Session]:
        """A new session for a token that authenticated, and its id for the cookie."""
        now = self._clock()
        session_id = secrets.token_urlsafe(SESSION_ID_BYTES)
        session = Session(token_sha256, secrets.token_urlsafe(CSRF_TOKEN_BYTES), now, now)
        with self._lock:
            for key in [key for key, s in self._sessions.items() if self._expired(s, now)]:
                del self._sessions[key]
            while len(self._sessions) >= MAX_SESSIONS:
                del self._sessions[next(iter(self._sessions))]  # the oldest (insertion order)
            self._sessions[_key(session_id)] = session
        return session_id, session

    def find(self, session_id: str) -> Session | None:
        """The live session of this id, its idle clock restarted; None, forgotten, if expired."""
        now = self._clock()
        key = _key(session_id)
        with self._lock:
            session = self._sessions.get(key)
            if session is None:
                return None
            if self._expired(session, now):
                del self._sessions[key]
                return None
            session.last_used = now
            return session

    def close(self, session_id: str) -> None:
        with self._lock:
            self._sessions.pop(_key(session_id), None)

    def count(self) -> int:
        with self._lock:
            return len(self._sessions)

    def _expired(self, session: Session, now: float) -> bool:
        return (
            now - session.last_used >= self.settings.idle_seconds
            or now - session.created >= self.settings.max_seconds
        )
