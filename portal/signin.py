"""Sign-in protection glue for django-axes (settings in portal/settings/base.py)."""

import math
from typing import Any

from axes.backends import AxesStandaloneBackend
from axes.helpers import get_client_username, get_cool_off, get_failure_limit
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render


class LockoutBackend(AxesStandaloneBackend):
    """Axes' lock-out check for every sign-in that comes with a request (the login page, the
    admin's login). Calls without a request are in-process (a management command, a shell):
    no client address to lock out, so they pass to the next backend instead of failing."""

    def authenticate(self, request: HttpRequest | None, *args: Any, **kwargs: Any) -> None:
        if request is None:
            return None
        return super().authenticate(request, *args, **kwargs)


def lockout_response(
    request: HttpRequest, original_response: HttpResponse | None = None, credentials: Any = None
) -> HttpResponse:
    """The page a locked-out sign-in gets: 429, what happened and when to come back."""
    cool_off = get_cool_off(request)
    minutes = math.ceil(cool_off.total_seconds() / 60) if cool_off else None
    context = {
        "username": get_client_username(request, credentials) or "",
        "failure_limit": get_failure_limit(request, credentials),
        "minutes": minutes,
    }
    response = render(request, "registration/locked_out.html", context, status=429)
    if cool_off:
        response["Retry-After"] = str(int(cool_off.total_seconds()))
    return response
