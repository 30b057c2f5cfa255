"""Idempotency-Key on launches (the IETF httpapi draft's header): the first request with a key
does the work and its answer is stored with it, in the same transaction; a retry with the
same key and the same request gets that answer again, marked Idempotent-Replayed. The key's
unique row is the lock: a concurrent retry waits on it until the first commits, then replays.
A request that fails (a 4xx) stores nothing, so it may simply be sent again."""

import hashlib
import json
import re
from collections.abc import Callable
from datetime import timedelta

from django.conf import settings
from django.core.serializers.json import DjangoJSONEncoder
from django.db import IntegrityError, transaction
from django.utils import timezone
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter
from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.response import Response

from apps.accounts.requests import signed_in_user

from .errors import ApiError
from .models import IdempotentRequest

HEADER = "Idempotency-Key"
# Printable ASCII without leading or trailing blanks, as a client's UUID or slug would be.
VALID_KEY = re.compile(r"[!-~](?:[ -~]{0,253}[!-~])?")
# For the launches' OpenAPI operations.
PARAMETER = OpenApiParameter(
    HEADER,
    OpenApiTypes.STR,
    OpenApiParameter.HEADER,
    required=False,
    description="Any unique string of yours (e.g. a UUID): a retry with the same key and "
    "body gets the first answer again (header Idempotent-Replayed) instead of launching "
    f"again; the same key with another body is a 422. Kept {settings.IDEMPOTENCY_KEY_HOURS} h.",
)


def key_of(request: Request) -> str | None:
    key = request.headers.get(HEADER)
    if key is None:
        return None
    if not VALID_KEY.fullmatch(key):
        raise serializers.ValidationError(
            {HEADER: "must be 1 to 255 printable ASCII characters, e.g. a UUID"}
        )
    return key


def fingerprint(request: Request) -> str:
    body = request.data
    if hasattr(body, "lists"):  # a form's QueryDict
        body = dict(body.lists())
    shown = json.dumps(
        [request.method, request.path, body], sort_keys=True, cls=DjangoJSONEncoder, default=str
    )
    return hashlib.sha256(shown.encode()).hexdigest()


def once(request: Request, answer: Callable[[], Response]) -> Response:
    """answer(), or the stored answer of the first request with the same Idempotency-Key."""
    key = key_of(request)
    if key is None:
        return answer()
    user, digest = signed_in_user(request), fingerprint(request)
    with transaction.atomic():
        forget_expired(user)
        try:
            with transaction.atomic():
                stored = IdempotentRequest.objects.create(
                    user=user, key=key, fingerprint=digest, status=0, body={}
                )
        except IntegrityError:  # an earlier request with this key committed
            return replay(IdempotentRequest.objects.get(user=user, key=key), key, digest)
        response = answer()
        stored.status, stored.body = response.status_code, response.data
        stored.location = response.get("Location", "")
        stored.save(update_fields=["status", "body", "location"])
    return response


def replay(stored: IdempotentRequest, key: str, digest: str) -> Response:
    if stored.fingerprint != digest:
        message = (
            f"Idempotency-Key {key!r} was sent with another request (path or body); use a new "
            "key for a new request"
        )
        raise ApiError(422, "idempotency_key_reused", message, fields={HEADER: message})
    headers = {"Idempotent-Replayed": "true"}
    if stored.location:
        headers["Location"] = stored.location
    return Response(stored.body, status=stored.status, headers=headers)


def forget_expired(user) -> None:
    """Keys are kept IDEMPOTENCY_KEY_HOURS; after that the same key is a new request."""
    cutoff = timezone.now() - timedelta(hours=settings.IDEMPOTENCY_KEY_HOURS)
    IdempotentRequest.objects.filter(user=user, created__lt=cutoff).delete()
