"""Access on a UI host: a one-time ticket the portal mints after its own check, good only in
the browser that asked for it, and the short-lived cookie the UI host gives for it (JupyterHub's
subdomain hosts do the same with an OAuth round trip and a state cookie).

1. The portal (its session, its access check) sends the browser to
   ``cN.<UI_DOMAIN>/_platter/bind?s=<state>``: the state is signed and names the user, the
   cluster, its host, the path to go on to and the portal (no secret: it opens nothing).
2. The UI host gives the browser a random nonce in a cookie of its own (host-only, HttpOnly;
   ``__Host-`` where Secure) and sends it back to the portal's
   ``/clusters/N/ui-ticket?s=<state>&b=<SHA-256 of the nonce>``.
3. The portal checks the session again (the same user as the state's) and sends the browser
   to ``cN.<UI_DOMAIN>/_platter/ticket?t=<ticket>``; the ticket is signed, names the user, the
   cluster, the host, the path and the nonce's hash, expires within UI_TICKET_SECONDS and is
   taken once (its id claimed in the cache).
4. The UI host takes the ticket only with the nonce cookie whose hash it names, and answers
   with a cookie for that host only, signed with the same three facts and valid for
   UI_COOKIE_SECONDS, and a redirect to the clean path.

A ticket's URL that leaks (a log, a Referer, a shoulder) is worth nothing elsewhere: the nonce
never travels in a URL, only in the asking browser's cookie. Every proxied request still
checks, from the database, that the user may see the cluster.
"""

import hashlib
import re
import secrets
from dataclasses import dataclass

from django.conf import settings
from django.contrib.auth import get_user_model
from django.contrib.auth.models import AbstractBaseUser
from django.core import signing
from django.core.cache import cache
from django.http import HttpRequest, HttpResponse
from django.utils.crypto import constant_time_compare

from portal.cookies import host_only_name

TICKET_SALT = "platter.proxy.ticket"
COOKIE_SALT = "platter.proxy.cookie"
STATE_SALT = "platter.proxy.ticket-state"
TICKET_PATH = "/_platter/ticket"
BIND_PATH = "/_platter/bind"
BIND_COOKIE = "platter-ui-bind"  # with __Host- where cookies are Secure (portal.cookies)
_NONCE = re.compile(r"[A-Za-z0-9_-]{43}")  # secrets.token_urlsafe(32)
_BINDING = re.compile(r"[0-9a-f]{64}")  # its SHA-256, in hex


@dataclass(frozen=True)
class Ticket:
    user_id: int
    cluster_id: int
    next_path: str  # where the UI host sends the browser once its cookie is set
    portal_origin: str  # where the UI host sends a browser whose cookie ran out


@dataclass(frozen=True)
class TicketRequest:
    """What the portal's state says: who asked for which cluster's UI, from which portal."""

    user_id: int
    cluster_id: int
    next_path: str
    portal_origin: str


@dataclass(frozen=True)
class Grant:
    """What a UI host's cookie says: this user, this cluster, minted by that portal."""

    user: AbstractBaseUser
    cluster_id: int
    portal_origin: str


def _user_check(user: AbstractBaseUser) -> str:
    """Part of the user's session hash: a password change ends their UI cookies as it ends
    their sessions."""
    return user.get_session_auth_hash()[:16]


def request_state(
    user: AbstractBaseUser, cluster_id: int, host: str, next_path: str, portal_origin: str
) -> str:
    """Step 1's state: signed so the UI host sends the browser to no portal but this one."""
    return signing.dumps(
        {"u": user.pk, "c": cluster_id, "h": host, "next": next_path, "p": portal_origin},
        salt=STATE_SALT,
        compress=True,
    )


def read_state(value: str, host: str, cluster_id: int) -> TicketRequest | None:
    """The state's facts if it is genuine, fresh and for this host and cluster."""
    try:
        data = signing.loads(value, salt=STATE_SALT, max_age=settings.UI_TICKET_SECONDS)
    except signing.BadSignature:
        return None
    if data.get("h") != host or data.get("c") != cluster_id:
        return None
    return TicketRequest(data["u"], cluster_id, data["next"], data["p"])


def bind_cookie_name() -> str:
    return host_only_name(BIND_COOKIE, settings.SESSION_COOKIE_SECURE)


def browser_nonce(request: HttpRequest) -> str:
    """The nonce this browser holds on this UI host, or a new one. Kept while it lasts, so
    several UIs of the cluster opened at once (tabs) all end on the same nonce."""
    held = request.COOKIES.get(bind_cookie_name(), "")
    return held if _NONCE.fullmatch(held) else secrets.token_urlsafe(32)


def binding_of(nonce: str) -> str:
    """What the portal and the ticket see of the nonce: its hash, which opens nothing."""
    return hashlib.sha256(nonce.encode()).hexdigest()


def is_binding(value: str) -> bool:
    return bool(_BINDING.fullmatch(value))


def set_bind_cookie(response: HttpResponse, nonce: str) -> None:
    """Host-only, HttpOnly, for "/" and Secure where the portal's cookies are, living long
    enough for the round trip to the portal and the ticket's own life."""
    response.set_cookie(
        bind_cookie_name(),
        nonce,
        max_age=2 * settings.UI_TICKET_SECONDS,
        path="/",
        secure=settings.SESSION_COOKIE_SECURE,
        httponly=True,
        samesite="Lax",
    )


def mint_ticket(
    user: AbstractBaseUser,
    cluster_id: int,
    host: str,
    next_path: str,
    portal_origin: str,
    binding: str,
) -> str:
    """A ticket redeemable only with the nonce whose binding_of() is ``binding``."""
    return signing.dumps(
        {
            "u": user.pk,
            "c": cluster_id,
            "h": host,
            "n": secrets.token_urlsafe(16),
            "b": binding,
            "next": next_path,
            "p": portal_origin,
        },
        salt=TICKET_SALT,
        compress=True,
    )


def redeem_ticket(value: str, host: str, cluster_id: int, nonce: str) -> Ticket | None:
    """The ticket's facts if it is genuine, fresh, for this host and cluster, not used before
    and brought by the browser whose nonce it names; taking it uses it up (even when two
    requests race for it, one wins), and so does a try without the right nonce: a leaked
    ticket that another client tries first is lost to the asker too, never won."""
    try:
        data = signing.loads(value, salt=TICKET_SALT, max_age=settings.UI_TICKET_SECONDS)
    except signing.BadSignature:
        return None
    if data.get("h") != host or data.get("c") != cluster_id:
        return None
    # SET NX: only the first redemption adds the key; it outlives the ticket's validity.
    if not cache.add(f"platter:ui-ticket:{data['n']}", 1, settings.UI_TICKET_SECONDS + 60):
        return None
    if not _NONCE.fullmatch(nonce) or not constant_time_compare(
        binding_of(nonce), data.get("b", "")
    ):
        return None
    return Ticket(data["u"], cluster_id, data["next"], data["p"])


def cookie_value(user: AbstractBaseUser, cluster_id: int, host: str, portal_origin: str) -> str:
    return signing.dumps(
        {"u": user.pk, "c": cluster_id, "h": host, "a": _user_check(user), "p": portal_origin},
        salt=COOKIE_SALT,
    )


def set_cookie(response: HttpResponse, value: str) -> None:
    """Host-only (no Domain), HttpOnly, SameSite=Lax, Secure where the portal's are."""
    response.set_cookie(
        settings.UI_COOKIE_NAME,
        value,
        max_age=settings.UI_COOKIE_SECONDS,
        path="/",
        secure=settings.SESSION_COOKIE_SECURE,
        httponly=True,
        samesite="Lax",
    )


def _cookie_data(request: HttpRequest, host: str, cluster_id: int) -> tuple[dict, bool] | None:
    """The cookie's facts when it is genuine and for this host and cluster, and whether it
    is still fresh."""
    value = request.COOKIES.get(settings.UI_COOKIE_NAME, "")
    if not value:
        return None
    fresh = True
    try:
        data = signing.loads(value, salt=COOKIE_SALT, max_age=settings.UI_COOKIE_SECONDS)
    except signing.SignatureExpired:
        data, fresh = signing.loads(value, salt=COOKIE_SALT), False
    except signing.BadSignature:
        return None
    if data.get("h") != host or data.get("c") != cluster_id:
        return None
    return data, fresh


def grant_of(request: HttpRequest, host: str, cluster_id: int) -> Grant | None:
    """Who the UI host's cookie vouches for, or None (none, forged, expired, for another host
    or cluster, or for a user who is gone, inactive or changed their password)."""
    found = _cookie_data(request, host, cluster_id)
    if found is None or not found[1]:
        return None
    data = found[0]
    user = get_user_model().objects.filter(pk=data["u"], is_active=True).first()
    if user is None or not constant_time_compare(data.get("a", ""), _user_check(user)):
        return None
    return Grant(user, cluster_id, data["p"])


def user_check(user: AbstractBaseUser) -> str:
    """What a grant remembers of its user, so a long connection can tell later that they
    changed their password (or were signed out everywhere) since."""
    return _user_check(user)


def still_granted(user_id: int, check: str) -> AbstractBaseUser | None:
    """The user a grant was made for, while they are active and their check is unchanged."""
    user = get_user_model().objects.filter(pk=user_id, is_active=True).first()
    if user is None or not constant_time_compare(check, _user_check(user)):
        return None
    return user


def portal_of(request: HttpRequest, host: str, cluster_id: int) -> str:
    """The portal origin a genuine cookie for this host names, fresh or expired; "" if none.
    A browser whose cookie ran out goes back there for a new one."""
    found = _cookie_data(request, host, cluster_id)
    return found[0].get("p", "") if found else ""
