"""Per-request limits checked before any view runs: no NUL byte in the path or the query (they
reach the database, which refuses them, as a server error), and no body larger than
DATA_UPLOAD_MAX_MEMORY_SIZE. Django applies that setting only when a view reads
``request.body`` or a form; the API's parsers read the stream directly, and a chunked body
(no Content-Length) escapes it altogether. Under ASGI (production) Django's handler reads the
whole body before any middleware: portal.body_limit applies the same rule (body_limit) in front
of it."""

import io
import re
from collections.abc import Callable
from urllib.parse import parse_qsl

from django.conf import settings
from django.http import HttpRequest, HttpResponse, JsonResponse

API_PREFIXES = ("/api/", "/bigdata/api/")
# The CESGA surface names its errors in words (apps.api.cesga.views.WORDS).
CESGA_WORDS = {400: "bad request", 413: "payload too large"}
API_CODES = {400: "invalid", 413: "payload_too_large"}
# Where jobs are submitted with their files (the API and the cluster page's form).
JOB_SUBMIT = re.compile(r"^/(api/v1/)?clusters/\d+/jobs/?$")


def refuse(request: HttpRequest, status: int, message: str, **extra: object) -> HttpResponse:
    return refusal(request.path_info, status, message, **extra)


def refusal(path: str, status: int, message: str, **extra: object) -> HttpResponse:
    """An API client gets the API's error body; a browser a short text page."""
    if path.startswith(API_PREFIXES):
        words = CESGA_WORDS if path.startswith("/bigdata/") else API_CODES
        body = {"status": status, "error": words[status], "message": message, **extra}
        return JsonResponse(body, status=status)
    return HttpResponse(message + "\n", status=status, content_type="text/plain; charset=utf-8")


def body_limit(path: str) -> tuple[int | None, str]:
    """The most bytes a request body on `path` may hold (None: no limit) and the 413's message
    for one that holds more: this middleware's rule under WSGI, portal.body_limit's under ASGI."""
    limit = settings.DATA_UPLOAD_MAX_MEMORY_SIZE
    if limit is None:
        return None, ""
    why = ""
    if JOB_SUBMIT.match(path):
        # A job's files: apps.jobs checks each against its caps and names them.
        limit += settings.JOB_UPLOAD_MAX_BYTES
        why = f" (a job's files may total {settings.JOB_UPLOAD_MAX_BYTES} bytes)"
    return limit, f"the request body is larger than {limit} bytes{why}"


def nul_in_query(query_string: str) -> list[str]:
    """The query parameters whose name or value holds a NUL byte."""
    pairs = parse_qsl(query_string, keep_blank_values=True, errors="replace")
    return sorted(
        {
            name.replace("\x00", "") or "(unnamed)"
            for name, value in pairs
            if "\x00" in name or "\x00" in value
        }
    )


class RequestLimitsMiddleware:
    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        if "\x00" in request.path_info:
            return refuse(request, 400, "the path contains a NUL byte")
        bad = nul_in_query(request.META.get("QUERY_STRING", ""))
        if bad:
            fields = dict.fromkeys(bad, "contains a NUL byte")
            return refuse(request, 400, "invalid request: " + ", ".join(bad), fields=fields)
        limit, too_large = body_limit(request.path_info)
        if limit is not None and self._too_large(request, limit):
            return refuse(request, 413, too_large)
        return self.get_response(request)

    @staticmethod
    def _too_large(request: HttpRequest, limit: int) -> bool:
        try:
            length = int(request.META.get("CONTENT_LENGTH") or 0)
        except ValueError:
            length = 0  # Django reads no body then
        if length:
            return length > limit
        if not request.META.get("wsgi.input_terminated"):
            return False  # without a length Django reads nothing
        # A chunked body the server hands through: read at most one byte past the limit and
        # give the rest of the request a body of known length.
        body = request._stream.read(limit + 1)  # WSGIRequest's own stream
        if len(body) > limit:
            return True
        request._stream = io.BytesIO(body)
        request.META["CONTENT_LENGTH"] = str(len(body))
        return False
