"""One error body for every API answer that is not a success:

    {"status": 409, "error": "conflict", "message": "cluster 7 is queued; ...",
     "fields": {...}, "quota": {...}, "retry_after": 12}

``fields`` (field -> message) comes with 400s about input, ``quota`` with quota rejections,
``retry_after`` with 429s (next to the Retry-After header). Domain exceptions of the services
are translated here, so views simply call the services."""

import re
from typing import Any

from django.apps import apps as django_apps
from django.http import Http404
from rest_framework import exceptions, status
from rest_framework.response import Response
from rest_framework.views import exception_handler as drf_exception_handler

from apps.catalog.images import ImageUnavailable
from apps.catalog.options import OptionsError
from apps.clusters.autoscale import PolicyRefused
from apps.clusters.quotas import QuotaExceeded
from apps.clusters.resize import ResizeRefused
from apps.clusters.services import (
    LeaseError,
    NameTaken,
    NeverFits,
    ReuseError,
    TransitionError,
)
from apps.tokens.services import TokenOutlivesItsMaker
from portal.streams import TooManyNodeCalls, TooManyStreams


class ApiError(exceptions.APIException):
    """An APIException that carries extra members of the error body."""

    def __init__(self, status_code: int, code: str, message: str, **extra: Any) -> None:
        super().__init__(message, code)
        self.status_code = status_code
        self.extra = extra


# Django's get_object_or_404 names the model class ("No ProductVersion matches the given query.").
NO_MATCH = re.compile(r"No (\w+) matches the given query\.")


def _not_found_in_words(exc: Http404) -> Http404:
    """The same 404 naming what was not found as users say it ("no such product version")."""
    match = NO_MATCH.fullmatch(str(exc))
    if match is None:
        return exc
    names = {model.__name__: model._meta.verbose_name for model in django_apps.get_models()}
    return Http404(f"no such {names.get(match[1], 'object')}")


def translate(exc: Exception) -> Exception:
    """Domain exceptions as API errors; anything else unchanged."""
    if isinstance(exc, Http404):
        return _not_found_in_words(exc)
    if isinstance(exc, OptionsError):
        return ApiError(400, "invalid_options", "invalid launch options", fields=exc.errors)
    if isinstance(exc, QuotaExceeded):
        quota = {
            "limit": exc.limit,
            "scope": exc.scope,
            "asked": exc.asked,
            "used": exc.used,
            "maximum": exc.maximum,
        }
        return ApiError(403, "quota_exceeded", str(exc), quota=quota)
    if isinstance(exc, ImageUnavailable):
        return ApiError(409, "image_unavailable", str(exc), images=exc.images)
    if isinstance(exc, NeverFits):
        return ApiError(409, "never_fits", str(exc))
    if isinstance(exc, TransitionError):
        return ApiError(409, "conflict", str(exc))
    if isinstance(exc, LeaseError):
        return ApiError(400, "invalid_lease", str(exc), fields={"lease": str(exc)})
    if isinstance(exc, NameTaken):
        return ApiError(400, "name_taken", str(exc), fields={"name": str(exc)})
    if isinstance(exc, TokenOutlivesItsMaker):
        return ApiError(
            400, "token_outlives_its_maker", str(exc), fields={"expires_in_days": str(exc)}
        )
    if isinstance(exc, ReuseError):
        return ApiError(400, "invalid_reuse", str(exc), fields={"reuse_data_from": str(exc)})
    if isinstance(exc, PolicyRefused):
        named = {"fields": {exc.field: str(exc)}} if exc.field else {}
        return ApiError(400, "policy_refused", str(exc), **named)
    if isinstance(exc, ResizeRefused):
        named = {"fields": {exc.field: str(exc)}} if exc.field else {}
        return ApiError(400, "resize_refused", str(exc), **named)
    if isinstance(exc, TooManyNodeCalls):
        return ApiError(429, "too_many_node_calls", str(exc), limit=exc.limit)
    if isinstance(exc, TooManyStreams):
        return ApiError(429, "too_many_streams", str(exc), limit=exc.limit)
    return exc


def _flatten(detail: Any) -> str:
    if isinstance(detail, list):
        return " ".join(_flatten(item) for item in detail)
    if isinstance(detail, dict):
        return "; ".join(f"{key}: {_flatten(value)}" for key, value in detail.items())
    return str(detail)


def error_body(exc: exceptions.APIException, status_code: int) -> dict[str, Any]:
    if isinstance(exc, exceptions.ValidationError):
        detail = exc.detail
        if isinstance(detail, dict):
            fields = {str(name): _flatten(value) for name, value in detail.items()}
            message = "invalid request: " + ", ".join(fields)
            return {"status": status_code, "error": "invalid", "message": message, "fields": fields}
        return {"status": status_code, "error": "invalid", "message": _flatten(detail)}
    codes = exc.get_codes()
    code = codes if isinstance(codes, str) else exc.default_code
    body: dict[str, Any] = {"status": status_code, "error": code, "message": _flatten(exc.detail)}
    if isinstance(exc, ApiError):
        body.update(exc.extra)
    wait = getattr(exc, "wait", None)  # Throttled's; DRF's stubs leave it out
    if isinstance(exc, exceptions.Throttled) and wait is not None:
        body["retry_after"] = int(wait + 0.999)
    return body


def exception_handler(exc: Exception, context: dict) -> Response | None:
    exc = translate(exc)
    response = drf_exception_handler(exc, context)
    if response is None:
        return None  # a bug: Django's 500 handling (and logging) takes over
    if isinstance(exc, exceptions.APIException):
        response.data = error_body(exc, response.status_code)
    else:  # Http404 and PermissionDenied from Django, already turned into responses
        word = "not_found" if response.status_code == status.HTTP_404_NOT_FOUND else "denied"
        response.data = {
            "status": response.status_code,
            "error": word,
            "message": _flatten(response.data.get("detail", "")),
        }
    return response
