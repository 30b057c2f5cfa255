"""Sign-in with the site's OpenID Connect provider (mozilla-django-oidc; settings from
PLATTER_OIDC_*, see portal/settings/directory.py): the authorization code flow with PKCE.

A person is bound to their Platter user by the provider's issuer and `sub` (OIDCIdentity),
never by a name claim: preferred_username may change and is not unique by spec, so a renamed
person keeps their user and a newcomer who takes an old name gets no one else's. The first
sign-in makes the user, named by one claim (preferred_username by default); when that name is
already another account's, the sign-in is refused saying so (an admin can bind the identity to
the right user in the admin). Groups follow a claim's values at every sign-in
(apps.accounts.directory), and an optional required group keeps everyone else out. Claims are
the ID token's and userinfo's together."""

import logging
import re
from functools import wraps
from typing import Any

import requests
from django.conf import settings
from django.contrib import messages
from django.contrib.auth import get_user_model
from django.core.exceptions import SuspiciousOperation
from django.db import IntegrityError, transaction
from django.db.models import QuerySet
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseRedirect
from django.shortcuts import resolve_url
from mozilla_django_oidc.auth import OIDCAuthenticationBackend
from mozilla_django_oidc.views import (
    OIDCAuthenticationCallbackView,
    OIDCAuthenticationRequestView,
)

from .directory import GroupMapping, sync_user
from .models import OIDCIdentity

log = logging.getLogger(__name__)

# Django's own rule for user names (UnicodeUsernameValidator), at most 150 characters.
USERNAME = re.compile(r"^[\w.@+-]{1,150}\Z")
SUBJECT_MAX = 255  # OpenID Connect Core 2: sub is at most 255 ASCII characters


class SignInRefused(Exception):
    """A sign-in refused for a reason the person can act on; the text is shown to them. Not a
    SuspiciousOperation (the library would swallow it) nor a PermissionDenied (Django would)."""


def username_of(claims: dict) -> str | None:
    """The Platter user name the claims name (lower case, as LDAP's are), or None when the
    claim is missing or not a valid user name."""
    value = claims.get(settings.OIDC_USERNAME_CLAIM)
    if not isinstance(value, str) or not USERNAME.match(value):
        return None
    return value.lower()


def groups_of(claims: dict) -> list[str]:
    """The groups claim's values: a list of names, or one name."""
    value = claims.get(settings.OIDC_GROUPS_CLAIM, [])
    if isinstance(value, str):
        return [value]
    return [item for item in value if isinstance(item, str)] if isinstance(value, list) else []


def refuse_outsiders(claims: dict) -> None:
    """With PLATTER_OIDC_REQUIRE_GROUP set, only its members sign in (at every sign-in, so
    leaving the group at the provider locks the user out at the next one)."""
    required = getattr(settings, "OIDC_REQUIRE_GROUP", "")  # set whenever OIDC is on
    if required and required not in groups_of(claims):
        raise SignInRefused(f"your account is not in the group {required!r} that may use Platter")


def identity_of(claims: dict) -> tuple[str, str]:
    """(issuer, sub) of verified claims: the ID token's, which the backend checked."""
    issuer, subject = claims.get("iss"), claims.get("sub")
    if not isinstance(subject, str) or not subject or len(subject) > SUBJECT_MAX:
        raise SuspiciousOperation("the ID token carries no valid sub")
    if not settings.OIDC_ISSUER or issuer != settings.OIDC_ISSUER:
        raise SuspiciousOperation(f"the ID token's issuer is not {settings.OIDC_ISSUER!r}")
    return issuer, subject


def bound_user(issuer: str, subject: str) -> Any:
    """The user bound to this identity, or None."""
    found = OIDCIdentity.objects.select_related("user").filter(issuer=issuer, subject=subject)
    return found[0].user if found else None


def create_bound_user(issuer: str, subject: str, username: str) -> Any:
    """A new user named `username`, bound to the identity. A name that is already another
    account's is refused: names are not identities, and handing that account over is what this
    binding prevents. Two first sign-ins of one person at once end on the same user."""
    User = get_user_model()
    try:
        with transaction.atomic():
            if User.objects.filter(username__iexact=username).exists():
                # What an admin needs to link the person to that account, if it is theirs.
                log.warning(
                    "OIDC sub %r at %s asks for the taken name %r", subject, issuer, username
                )
                raise SignInRefused(
                    f"the user name {username!r} belongs to another Platter account; "
                    "ask the portal's admins to link your sign-in to it or to rename it"
                )
            user = User.objects.create_user(username)  # no usable password
            OIDCIdentity.objects.create(user=user, issuer=issuer, subject=subject)
            return user
    except IntegrityError:  # a concurrent first sign-in: of this person, or of the name
        user = bound_user(issuer, subject)
        if user is None:
            raise SignInRefused(f"the user name {username!r} was just taken; try again") from None
        return user


class DirectoryOIDCBackend(OIDCAuthenticationBackend):
    def verify_token(self, token: str, **kwargs: Any) -> dict:
        payload = super().verify_token(token, **kwargs)
        if "nonce" in kwargs:  # the ID token (a userinfo answer as JWT carries no audience)
            audience = payload.get("aud")
            audiences = [audience] if isinstance(audience, str) else audience or []
            if self.OIDC_RP_CLIENT_ID not in audiences:
                raise SuspiciousOperation("the ID token was issued to another client")
            identity_of(payload)  # the configured issuer and a sub, or refused
        return payload

    def get_userinfo(self, access_token: str, id_token: str, payload: dict) -> dict:
        # Some providers put the groups (or the user name) only in the ID token: take its
        # claims too, userinfo's winning where both have one, except who it is about.
        userinfo = super().get_userinfo(access_token, id_token, payload)
        if userinfo.get("sub", payload.get("sub")) != payload.get("sub"):
            raise SuspiciousOperation("userinfo is about another sub than the ID token")
        return {**payload, **userinfo, "iss": payload.get("iss"), "sub": payload.get("sub")}

    def get_or_create_user(self, access_token: str, id_token: str, payload: dict) -> Any:
        claims = self.get_userinfo(access_token, id_token, payload)
        issuer, subject = identity_of(claims)
        refuse_outsiders(claims)
        user = bound_user(issuer, subject)
        if user is None:
            username = username_of(claims)
            if username is None:
                log.warning("OIDC sign-in refused: no valid %r claim", settings.OIDC_USERNAME_CLAIM)
                raise SignInRefused(
                    f"the provider sent no valid user name ({settings.OIDC_USERNAME_CLAIM} claim)"
                )
            user = create_bound_user(issuer, subject, username)
            log.info("OIDC sign-in: made %s for %s at %s", user.get_username(), subject, issuer)
        return self.update_user(user, claims)

    def filter_users_by_claims(self, claims: dict) -> QuerySet:
        # The library's lookup, by identity as everywhere here (never by a name or e-mail).
        issuer, subject = identity_of(claims)
        return self.UserModel.objects.filter(
            oidc_identity__issuer=issuer, oidc_identity__subject=subject
        )

    def update_user(self, user: Any, claims: dict) -> Any:
        fields = {"email": "email", "first_name": "given_name", "last_name": "family_name"}
        changed = [
            field
            for field, claim in fields.items()
            if isinstance(claims.get(claim), str) and getattr(user, field) != claims[claim]
        ]
        for field in changed:
            setattr(user, field, claims[fields[field]])
        if changed:
            user.save(update_fields=changed)
        sync_user(user, groups_of(claims), GroupMapping.from_settings(settings.OIDC_GROUP_MAPPING))
        return user


class CallbackView(OIDCAuthenticationCallbackView):
    """The provider's redirect back: a failed sign-in returns to the sign-in page saying so."""

    def get(self, request: HttpRequest) -> HttpResponse:
        try:
            return super().get(request)
        except SignInRefused as refusal:
            log.warning("OIDC sign-in refused: %s", refusal)
            return self.login_failure(str(refusal))
        except (SuspiciousOperation, requests.RequestException) as error:
            log.warning("OIDC sign-in failed: %s", error)
            return self.login_failure()

    def login_failure(self, reason: str = "") -> HttpResponse:
        text = f"Sign-in with {settings.OIDC_PROVIDER_NAME} did not succeed"
        messages.error(self.request, f"{text}: {reason}." if reason else f"{text}.")
        return HttpResponseRedirect(resolve_url(settings.LOGIN_URL))


def _when_enabled(view: Any) -> Any:
    """404 while OpenID Connect is not configured (mozilla's views need its settings)."""

    @wraps(view)
    def wrapped(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        if not settings.OIDC_ENABLED:
            raise Http404("sign-in with OpenID Connect is not configured")
        return view(request, *args, **kwargs)

    return wrapped


authenticate_view = _when_enabled(OIDCAuthenticationRequestView.as_view())
callback_view = _when_enabled(CallbackView.as_view())
