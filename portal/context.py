"""What the current request or task is about: its id, the client's address, the cluster.

Logs (every line carries these) and the audit log ("from where") read them from here, so no
function has to pass a request down just to say who asked. Context variables keep threads and
async tasks apart.
"""

import re
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar

from django.conf import settings
from django.http import HttpRequest, HttpResponse

request_id: ContextVar[str | None] = ContextVar("request_id", default=None)
client_address: ContextVar[str | None] = ContextVar("client_address", default=None)
cluster_id: ContextVar[int | None] = ContextVar("cluster_id", default=None)
# By name, for bound() and for the log filter that copies them onto every record.
VARIABLES: dict[str, ContextVar] = {
    "request_id": request_id,
    "cluster_id": cluster_id,
    "client_address": client_address,
}

# A caller's X-Request-ID is kept when it looks like an id, so a proxy's id follows the request.
_REQUEST_ID = re.compile(r"^[A-Za-z0-9._:-]{8,64}$")


def new_request_id() -> str:
    return uuid.uuid4().hex


def address_of(request: HttpRequest) -> str:
    """The client's address: REMOTE_ADDR, or behind PLATTER_TRUSTED_PROXY_HOPS proxies the
    entry they appended to X-Forwarded-For (entries further left are the client's word)."""
    hops = settings.TRUSTED_PROXY_HOPS
    forwarded = request.META.get("HTTP_X_FORWARDED_FOR", "")
    if hops and forwarded:
        entries = [entry.strip() for entry in forwarded.split(",") if entry.strip()]
        if len(entries) >= hops:
            return entries[-hops]
    return request.META.get("REMOTE_ADDR", "")


@contextmanager
def bound(**values: object) -> Iterator[None]:
    """Set context values for a block (a task, a command) and restore them after."""
    tokens = [(VARIABLES[name], VARIABLES[name].set(value)) for name, value in values.items()]
    try:
        yield
    finally:
        for variable, token in reversed(tokens):
            variable.reset(token)


class RequestContextMiddleware:
    """Gives every request an id (answered in X-Request-ID) and records the client address."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        asked = request.headers.get("X-Request-ID", "")
        rid = asked if _REQUEST_ID.match(asked) else new_request_id()
        request.id = rid  # type: ignore[attr-defined]  # ours: portal.logs reads it back
        with bound(request_id=rid, client_address=address_of(request)):
            response = self.get_response(request)
        response["X-Request-ID"] = rid
        return response
