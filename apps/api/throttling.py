"""Request rates per anonymous address, per user and per token: 429 with Retry-After.

A user's scripts share the user's budget, and each token also has its own, smaller one so one
runaway script cannot starve the user's browser session or their other scripts.

The counters live in the cache (Redis). Without it rates go unchecked for a while, with a
warning in the log, rather than every API call failing with a 500."""

import logging
import time

from redis.exceptions import RedisError
from rest_framework.request import Request
from rest_framework.throttling import AnonRateThrottle, SimpleRateThrottle, UserRateThrottle

from apps.tokens.authentication import token_of

log = logging.getLogger(__name__)
WARN_EVERY_SECONDS = 60
_last_warning = [float("-inf")]


class DegradesWithoutCache(SimpleRateThrottle):
    """allow_request() lets the request through when the cache does not answer."""

    def allow_request(self, request: Request, view) -> bool:
        try:
            return super().allow_request(request, view)
        except (RedisError, OSError) as error:
            now = time.monotonic()
            if now - _last_warning[0] >= WARN_EVERY_SECONDS:  # one line a minute, not a flood
                _last_warning[0] = now
                log.warning("request rates are not checked: the cache does not answer (%s)", error)
            return True


class AnonymousThrottle(DegradesWithoutCache, AnonRateThrottle):
    scope = "anon"


class UserThrottle(DegradesWithoutCache, UserRateThrottle):
    """Keyed by user id only (anonymous requests are the AnonymousThrottle's)."""

    scope = "user"

    def get_cache_key(self, request: Request, view) -> str | None:
        if not (request.user and request.user.is_authenticated):
            return None
        return self.cache_format % {"scope": self.scope, "ident": request.user.pk}


class TokenThrottle(DegradesWithoutCache, SimpleRateThrottle):
    scope = "token"

    def get_cache_key(self, request: Request, view) -> str | None:
        token = token_of(request)
        if token is None:
            return None
        return self.cache_format % {"scope": self.scope, "ident": token.pk}
