"""Who may read /metrics: staff with a session, or a scraper with the configured token."""

import hmac

from django.conf import settings
from django.http import HttpRequest


def bearer_token(request: HttpRequest) -> str | None:
    scheme, _, token = request.headers.get("Authorization", "").partition(" ")
    return token.strip() if scheme.lower() == "bearer" and token.strip() else None


def may_scrape(request: HttpRequest) -> bool:
    user = request.user
    if user.is_authenticated and user.is_active and user.is_staff:
        return True
    expected = settings.METRICS_TOKEN
    given = bearer_token(request)
    # compare_digest: how long the comparison takes says nothing about the token.
    return (
        bool(expected)
        and given is not None
        and hmac.compare_digest(given.encode(), expected.encode())
    )
