"""Issuing, checking and revoking personal API tokens.

A token reads ``plt_<prefix>_<secret>``: 8 hex characters of prefix (looked up, shown in
lists) and 43 URL-safe characters (256 bits) of secret. With that much entropy a plain
SHA-256 digest is as good as a slow password hash and keeps every request cheap."""

import hashlib
import hmac
import secrets
from dataclasses import dataclass
from datetime import datetime, timedelta

from django.db import IntegrityError, transaction
from django.utils import timezone

from apps.audit.services import Action, Actor, record

from . import cache as token_cache
from .models import ApiToken

TOKEN_MARK = "plt"  # noqa: S105 (the visible mark of every token, not a secret)
# last_used is written at most this often per token, so busy scripts do not write per call.
LAST_USED_RESOLUTION = timedelta(seconds=60)


class TokenInvalid(Exception):
    """The token is unknown, malformed or revoked."""


class TokenExpired(TokenInvalid):
    """The token was valid until its expiry date."""


class TokenOutlivesItsMaker(ValueError):
    """A token may not make a token that expires later than itself (or never): a leaked
    short-lived token would otherwise become a permanent one."""

    def __init__(self, maker: ApiToken) -> None:
        assert maker.expires_at is not None  # only an expiring token limits what it makes
        left = (maker.expires_at - timezone.now()) / timedelta(days=1)
        super().__init__(
            f"the token this request uses expires at {maker.expires_at.isoformat()}: a token it "
            f"makes must expire no later (expires_in_days at most {max(left, 0):.3f})"
        )


@dataclass(frozen=True)
class IssuedToken:
    token: ApiToken
    secret: str  # the full token text; shown once, never stored


def digest_of(raw: str) -> str:
    return hashlib.sha256(raw.encode()).hexdigest()


def outlives(expires_at: datetime | None, maker: ApiToken) -> bool:
    """Whether a token expiring at ``expires_at`` (None: never) would outlive ``maker``."""
    if maker.expires_at is None:
        return False
    return expires_at is None or expires_at > maker.expires_at


def issue_token(
    user,
    name: str,
    expires_in_days: float | None = None,
    read_only: bool = False,
    *,
    actor: Actor = None,
    made_with: ApiToken | None = None,
) -> IssuedToken:
    """A new token for ``user``; the returned secret is the only copy there will ever be.
    ``actor`` is who issued it (the user themselves, an admin; None: a command line);
    ``made_with`` the token the request authenticated with, if any: the new token may not
    outlive it (TokenOutlivesItsMaker)."""
    expires_at = None
    if expires_in_days is not None:
        if expires_in_days <= 0:
            raise ValueError(f"expiry must be in the future; got {expires_in_days} days")
        expires_at = timezone.now() + timedelta(days=expires_in_days)
    if made_with is not None and outlives(expires_at, made_with):
        raise TokenOutlivesItsMaker(made_with)
    for _attempt in range(5):  # a prefix collision is astronomically rare; just draw again
        prefix = secrets.token_hex(4)
        raw = f"{TOKEN_MARK}_{prefix}_{secrets.token_urlsafe(32)}"
        try:
            with transaction.atomic():
                if made_with is not None:
                    _refuse_revoked_maker(made_with)
                token = ApiToken.objects.create(
                    user=user,
                    name=name,
                    prefix=prefix,
                    digest=digest_of(raw),
                    read_only=read_only,
                    expires_at=expires_at,
                    parent=made_with,
                )
                # What the token is and may do; never the secret, nor its digest.
                record(
                    Action.TOKEN_CREATE,
                    actor,
                    token,
                    object_repr=_describe(token),
                    name=name,
                    owner=user.get_username(),
                    prefix=prefix,
                    read_only=read_only,
                    expires_at=expires_at,
                    made_with=made_with.prefix if made_with else None,
                )
        except IntegrityError:
            continue
        return IssuedToken(token=token, secret=raw)
    raise RuntimeError("could not draw a free token prefix")


def _refuse_revoked_maker(maker: ApiToken) -> None:
    """TokenInvalid when ``maker`` is revoked in the database. Its row stays locked until the
    new token is committed, so a revoke() of it either comes first (and this refuses) or
    waits and then finds the new token among its children. Another process may still hold
    the maker in its token cache for a few seconds after it was revoked: this is where such a
    request stops."""
    locked = ApiToken.objects.select_for_update().filter(id=maker.id).first()
    if locked is None or locked.is_revoked:
        raise TokenInvalid("token revoked")


def check_token(raw: str) -> ApiToken:
    """The token ``raw`` stands for, or TokenInvalid / TokenExpired. Records its use.

    A token found valid is kept a few seconds in the process (apps.tokens.cache says what that
    allows); its expiry is checked on every call."""
    mark, _, rest = raw.strip().partition("_")
    prefix, _, secret = rest.partition("_")
    if mark != TOKEN_MARK or not prefix or not secret:
        raise TokenInvalid("malformed token")
    digest = digest_of(raw.strip())
    token = token_cache.get(digest)
    fetched = token is None
    if token is None:
        token = ApiToken.objects.select_related("user").filter(prefix=prefix).first()
        # Compare digests in constant time so response timing says nothing about the secret.
        if token is None or not hmac.compare_digest(token.digest, digest):
            raise TokenInvalid("unknown token")
    if token.is_revoked or not token.user.is_active:
        raise TokenInvalid("token revoked")
    if token.is_expired:
        raise TokenExpired("token has expired")
    if fetched:
        token_cache.put(digest, token)
    _touch(token)
    return token_cache.own_copy(token)


def _touch(token: ApiToken) -> None:
    now = timezone.now()
    if token.last_used and now - token.last_used < LAST_USED_RESOLUTION:
        return
    ApiToken.objects.filter(id=token.id).update(last_used=now)
    token.last_used = now


@transaction.atomic
def revoke(token_id: int, *, actor: Actor = None) -> bool:
    """Revoke the token and every token made with it, their children too; False when it was
    already revoked (its children are revoked all the same). Revoked tokens stay listed.

    Level by level: each level's rows are locked by their UPDATE before their children are
    looked up, so a child being made at the same time (issue_token locks its maker) is
    either refused or found here."""
    now = timezone.now()
    revoked = _revoke_rows([token_id], now, actor)
    root = ApiToken.objects.filter(id=token_id).values_list("prefix", flat=True).first()
    level = [token_id]
    while level:
        children = list(ApiToken.objects.filter(parent_id__in=level).values_list("id", flat=True))
        _revoke_rows(children, now, actor, along_with=root)
        level = children
    return bool(revoked)


def _revoke_rows(
    ids: list[int], now: datetime, actor: Actor, *, along_with: str | None = None
) -> int:
    """Revoke the rows of ``ids`` not revoked yet, audit each (``along_with``: the prefix of
    the token whose revocation took them along) and drop them from the token cache; how many
    were live."""
    if not ids:
        return 0
    live = list(
        ApiToken.objects.select_for_update()
        .filter(id__in=ids, revoked_at__isnull=True)
        .values_list("id", flat=True)
    )
    ApiToken.objects.filter(id__in=live).update(revoked_at=now)
    # Stops working in this process now, and again once committed (a request between the two
    # would have cached the row as it was); in the others within TOKEN_CACHE_SECONDS.
    _forget(ids)
    transaction.on_commit(lambda: _forget(ids))
    for token in ApiToken.objects.select_related("user").filter(id__in=live):
        described = _describe(token)
        if along_with:
            record(
                Action.TOKEN_REVOKE,
                actor,
                token,
                object_repr=described,
                name=token.name,
                along_with=along_with,
            )
        else:
            record(Action.TOKEN_REVOKE, actor, token, object_repr=described, name=token.name)
    return len(live)


def _forget(ids: list[int]) -> None:
    for token_id in ids:
        token_cache.forget(token_id=token_id)


def _describe(token: ApiToken) -> str:
    return f"{token} of {token.user.get_username()}"
