"""DRF authentication with personal tokens: ``Authorization: Bearer <token>`` for the
Platter API, ``x-auth-token: <token>`` for the CESGA-compatible surface.

A read-only token's scope is enforced here, where every token passes, and not by a permission
class: a view that sets permission_classes of its own (the admin-only inventory) would drop
such a class, and with it the scope."""

from rest_framework import exceptions
from rest_framework.authentication import BaseAuthentication, get_authorization_header
from rest_framework.permissions import SAFE_METHODS
from rest_framework.request import Request

from .models import ApiToken
from .services import TokenExpired, TokenInvalid, check_token


def _authenticate(request: Request, raw: str) -> tuple:
    try:
        token = check_token(raw)
    except TokenExpired as exc:
        raise exceptions.AuthenticationFailed(str(exc), code="token_expired") from exc
    except TokenInvalid as exc:
        raise exceptions.AuthenticationFailed(
            "please provide a valid authentication token", code="token_invalid"
        ) from exc
    if token.read_only and request.method not in SAFE_METHODS:
        raise exceptions.PermissionDenied("this token is read-only", code="read_only_token")
    return token.user, token


class BearerTokenAuthentication(BaseAuthentication):
    keyword = "Bearer"

    def authenticate(self, request: Request) -> tuple | None:
        parts = get_authorization_header(request).split()
        if not parts or parts[0].lower() != self.keyword.lower().encode():
            return None  # not ours: let session authentication try
        if len(parts) != 2:
            raise exceptions.AuthenticationFailed(
                "the Authorization header must be 'Bearer <token>'", code="token_invalid"
            )
        try:
            raw = parts[1].decode()
        except UnicodeDecodeError as exc:
            raise exceptions.AuthenticationFailed("malformed token", code="token_invalid") from exc
        return _authenticate(request, raw)

    def authenticate_header(self, request: Request) -> str:
        # Present, so DRF answers 401 (not 403) to requests without credentials.
        return f'{self.keyword} realm="api"'


class HeaderTokenAuthentication(BaseAuthentication):
    """The CESGA PaaS header. Only these views use it, so a missing header is a failure."""

    header = "HTTP_X_AUTH_TOKEN"

    def authenticate(self, request: Request) -> tuple | None:
        raw = request.META.get(self.header)
        if not raw:
            return None
        return _authenticate(request, raw)

    def authenticate_header(self, request: Request) -> str:
        return 'x-auth-token realm="bigdata"'


def token_of(request: Request) -> ApiToken | None:
    return request.auth if isinstance(request.auth, ApiToken) else None


# What a read-only token's answers say in place of a cluster's credentials.
SECRETS_WITHHELD = (
    "not shown to a read-only token: use a token that may write, or the cluster's page"
)


def secrets_withheld(request: Request) -> str:
    """Why this request gets no secrets (a cluster's password and shared secret), or "". A
    read-only token is what dashboards and scripts that only watch are given, and is handed
    around more freely: it reads what the owner reads, except what would let it act."""
    token = token_of(request)
    return SECRETS_WITHHELD if token is not None and token.read_only else ""
