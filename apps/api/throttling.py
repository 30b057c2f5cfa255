"""Request rates per anonymous address, per user and per token: 429 with Retry-After.

A user's scripts share the user's budget, and each token also has its own, smaller one so one
runaway script cannot starve the user's browser session or their other scripts."""

from rest_framework.request import Request
from rest_framework.throttling import AnonRateThrottle, SimpleRateThrottle, UserRateThrottle

from apps.tokens.authentication import token_of


class AnonymousThrottle(AnonRateThrottle):
    scope = "anon"


class UserThrottle(UserRateThrottle):
    """Keyed by user id only (anonymous requests are the AnonymousThrottle's)."""

    scope = "user"

    def get_cache_key(self, request: Request, view) -> str | None:
        if not (request.user and request.user.is_authenticated):
            return None
        return self.cache_format % {"scope": self.scope, "ident": request.user.pk}


class TokenThrottle(SimpleRateThrottle):
    scope = "token"

    def get_cache_key(self, request: Request, view) -> str | None:
        token = token_of(request)
        if token is None:
            return None
        return self.cache_format % {"scope": self.scope, "ident": token.pk}
