"""Sign-in with the site's OpenID Connect provider (mozilla-django-oidc; settings from
PLATTER_OIDC_*, see portal/settings/directory.py): the authorization code flow with PKCE. The
user is found by one claim (preferred_username by default), made at the first sign-in, and its
groups follow a claim's values at every sign-in (apps.accounts.directory). Claims are the ID
token's and userinfo's together."""

import logging
import re
from functools import wraps
from typing import Any

import requests
from django.conf import settings
from django.contrib import messages
from django.contrib.auth import get_user_model
from django.core.exceptions import SuspiciousOperation
from django.db.models import QuerySet
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseRedirect
from django.shortcuts import resolve_url
from mozilla_django_oidc.auth import OIDCAuthenticationBackend
from mozilla_django_oidc.views import (
    OIDCAuthenticationCallbackView,
    OIDCAuthenticationRequestView,
)

from .directory import GroupMapping, LocalAccount, refuse_local_account, sync_user

log = logging.getLogger(__name__)

# Django's own rule for user names (UnicodeUsernameValidator), at most 150 characters.
USERNAME = re.compile(r"^[\w.@+-]{1,150}\Z")


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


class DirectoryOIDCBackend(OIDCAuthenticationBackend):
    def verify_token(self, token: str, **kwargs: Any) -> dict:
        payload = super().verify_token(token, **kwargs)
        if "nonce" in kwargs:  # the ID token (a userinfo answer as JWT carries no audience)
            audience = payload.get("aud")
            audiences = [audience] if isinstance(audience, str) else audience or []
            if self.OIDC_RP_CLIENT_ID not in audiences:
                raise SuspiciousOperation("the ID token was issued to another client")
            if settings.OIDC_ISSUER and payload.get("iss") != settings.OIDC_ISSUER:
                raise SuspiciousOperation(f"the ID token's issuer is not {settings.OIDC_ISSUER}")
        return payload

    def get_userinfo(self, access_token: str, id_token: str, payload: dict) -> dict:
        # Some providers put the groups (or the user name) only in the ID token: take its
        # claims too, userinfo's winning where both have one.
        return {**payload, **super().get_userinfo(access_token, id_token, payload)}

    def verify_claims(self, claims: dict) -> bool:
        if username_of(claims) is None:
            log.warning("OIDC sign-in refused: no valid %r claim", settings.OIDC_USERNAME_CLAIM)
            return False
        return True

    def filter_users_by_claims(self, claims: dict) -> QuerySet:
        return self.UserModel.objects.filter(username__iexact=username_of(claims))

    def create_user(self, claims: dict) -> Any:
        username = username_of(claims)
        if username is None:  # verify_claims() refused such claims before
            raise ValueError(f"no valid {settings.OIDC_USERNAME_CLAIM!r} claim")
        user = get_user_model().objects.create_user(username)  # no usable password
        return self.update_user(user, claims)

    def update_user(self, user: Any, claims: dict) -> Any:
        try:
            refuse_local_account(user)
        except LocalAccount as refusal:
            log.warning("OIDC sign-in refused: %s", refusal)
            raise SuspiciousOperation(str(refusal)) from None
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
        except (SuspiciousOperation, requests.RequestException) as error:
            log.warning("OIDC sign-in failed: %s", error)
            return self.login_failure()

    def login_failure(self) -> HttpResponse:
        messages.error(self.request, f"Sign-in with {settings.OIDC_PROVIDER_NAME} did not succeed.")
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
