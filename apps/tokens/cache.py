"""Tokens checked in the last few seconds, kept in the process (issue 34: the API's rate).

Every API call checks its token: a query for the token and its user, compiled and run each time,
was one of the largest costs of a cluster list (bench/api). A token found valid is kept here
for TOKEN_CACHE_SECONDS (5 by default; 0 turns this off), keyed by the SHA-256 digest of the
whole token text, so only the exact secret ever finds an entry.

What a cached token may still do, and for how long:
- Expiry is checked on every call against the token's own expires_at: an expired token stops
  at its expiry, cached or not.
- Revoking it, deactivating its user or changing the user (is_staff, ...) in this process (a
  request, the admin, a command) drops its entries at once (signals, and revoke() itself);
  other processes (the web server's other workers) keep their entry until it is
  TOKEN_CACHE_SECONDS old, so there a revoked token works for at most that long.
- At most MAX_ENTRIES tokens are kept: the oldest go first.

Each caller gets copies of the token and its user, so nothing a request sets on them reaches
another request.
"""

import copy
import threading
import time
from dataclasses import dataclass

from django.conf import settings

from .models import ApiToken

MAX_ENTRIES = 4096


@dataclass(frozen=True)
class _Entry:
    token: ApiToken  # with its user (select_related)
    until: float  # time.monotonic()


_entries: dict[str, _Entry] = {}
_lock = threading.Lock()


def get(digest: str) -> ApiToken | None:
    """The token whose text has this digest, if it was found valid in the last seconds."""
    entry = _entries.get(digest)
    if entry is None:
        return None
    if time.monotonic() >= entry.until:
        with _lock:
            if _entries.get(digest) is entry:
                del _entries[digest]
        return None
    return entry.token


def put(digest: str, token: ApiToken) -> None:
    seconds = settings.TOKEN_CACHE_SECONDS
    if seconds <= 0:
        return
    now = time.monotonic()
    with _lock:
        if len(_entries) >= MAX_ENTRIES:
            for key in [k for k, e in _entries.items() if e.until <= now]:
                del _entries[key]
            while len(_entries) >= MAX_ENTRIES:  # still full: the oldest go
                del _entries[next(iter(_entries))]
        _entries[digest] = _Entry(token, now + seconds)


def forget(*, token_id: int | None = None, user_id: int | None = None) -> None:
    """Drop the entries of a token, or of every token of a user."""
    with _lock:
        for key in [
            k
            for k, e in _entries.items()
            if e.token.id == token_id or (user_id is not None and e.token.user_id == user_id)
        ]:
            del _entries[key]


def clear() -> None:
    with _lock:
        _entries.clear()


def own_copy(token: ApiToken) -> ApiToken:
    """The token and its user as objects of the caller's own."""
    user = copy.copy(token.user)
    mine = copy.copy(token)
    mine.user = user
    return mine
