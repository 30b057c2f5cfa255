"""portal.body_limit in front of Django's ASGI handler: a body over its path's limit gets 413
after about the limit's bytes (chunked) or none (a declared length), Django reads no more of it,
and a body under the limit reaches Django whole."""

import asyncio
import json
import re

import pytest
from django.http import HttpResponse

from portal import body_limit, limits
from portal.asgi import OneTripASGIHandler
from portal.body_limit import bounded_bodies

CHUNK = 64 * 1024


class FakeClient:
    """One request as a server hands it to an ASGI application: the body in `CHUNK`-sized
    http.request messages, made as the application asks for them and counted."""

    def __init__(self, method: str, path: str, total: int, declared: int | None = None):
        headers = [(b"host", b"127.0.0.1")]
        if declared is not None:
            headers.append((b"content-length", str(declared).encode()))
        self.scope = {
            "type": "http",
            "asgi": {"version": "3.0"},
            "http_version": "1.1",
            "method": method,
            "scheme": "http",
            "path": path,
            "raw_path": path.encode(),
            "query_string": b"",
            "root_path": "",
            "headers": headers,
            "client": ("127.0.0.1", 50000),
            "server": ("127.0.0.1", 80),
        }
        self.left = total
        self.handed = 0  # body bytes the application took
        self.finished = False
        self.sent: list[dict] = []
        self.answered = asyncio.Event()

    async def receive(self) -> dict:
        if self.finished:  # all handed over: the client waits for its answer
            await self.answered.wait()
            return {"type": "http.disconnect"}
        part = b"x" * min(CHUNK, self.left)
        self.left -= len(part)
        self.handed += len(part)
        self.finished = not self.left
        return {"type": "http.request", "body": part, "more_body": not self.finished}

    async def send(self, message: dict) -> None:
        self.sent.append(message)
        if message["type"] == "http.response.body" and not message.get("more_body"):
            self.answered.set()

    def run(self, application) -> "FakeClient":
        asyncio.run(asyncio.wait_for(application(self.scope, self.receive, self.send), 30))
        return self

    @property
    def status(self) -> int:
        return self.sent[0]["status"]

    @property
    def headers(self) -> dict[bytes, bytes]:
        return dict(self.sent[0]["headers"])

    @property
    def body(self) -> bytes:
        return b"".join(m.get("body", b"") for m in self.sent[1:])


class Echo(OneTripASGIHandler):
    """The portal's ASGI handler with a view that answers the body it was given."""

    def __init__(self) -> None:
        super().__init__()
        self.seen: list[bytes] = []

    def get_response(self, request):
        self.seen.append(request.read())  # as the API's parsers read it (request.body has a cap)
        return HttpResponse(self.seen[-1], content_type="application/octet-stream")


@pytest.fixture
def echo() -> Echo:
    return Echo()


@pytest.fixture(autouse=True)
def no_linger(monkeypatch):
    """The close a moment after a 413 matters to a proxy (test_body_limit_server): not here."""
    monkeypatch.setattr(body_limit, "LINGER_SECONDS", 0)


@pytest.fixture
def small_limits(settings):
    settings.DATA_UPLOAD_MAX_MEMORY_SIZE = 1024 * 1024
    settings.JOB_UPLOAD_MAX_BYTES = 4 * 1024 * 1024
    return settings


def test_a_chunked_body_past_the_limit_gets_413_after_about_the_limits_bytes(echo, small_limits):
    client = FakeClient("POST", "/accounts/login/", total=200 * 1024 * 1024).run(
        bounded_bodies(echo)
    )
    assert client.status == 413
    assert client.body == b"the request body is larger than 1048576 bytes\n"
    assert client.headers[b"connection"] == b"close"  # the server reads no more of it
    # The whole answer is out before the close (the last message, empty, ends it).
    assert client.sent[1]["body"] == client.body and client.sent[-1]["body"] == b""
    # What was read: the limit and the part that passed it, not the 200 MB.
    assert 1024 * 1024 < client.handed <= 1024 * 1024 + CHUNK
    assert echo.seen == []  # Django stopped reading and answered nothing


def test_a_declared_length_past_the_limit_gets_413_with_nothing_read(echo, small_limits):
    client = FakeClient("POST", "/accounts/login/", total=10 * CHUNK, declared=2 * 1024**3).run(
        bounded_bodies(echo)
    )
    assert client.status == 413 and client.handed == 0
    assert echo.seen == []


def test_a_body_under_the_limit_reaches_django_whole(echo, small_limits):
    client = FakeClient("POST", "/accounts/login/", total=1024 * 1024, declared=1024 * 1024)
    client.run(bounded_bodies(echo))
    assert client.status == 200
    assert echo.seen == [b"x" * 1024 * 1024] and client.body == echo.seen[0]


def test_a_chunked_body_under_the_limit_reaches_django_whole(echo, small_limits):
    client = FakeClient("POST", "/accounts/login/", total=CHUNK * 3 + 5).run(bounded_bodies(echo))
    assert client.status == 200 and echo.seen == [b"x" * (CHUNK * 3 + 5)]


@pytest.mark.parametrize("path", ["/clusters/7/jobs", "/api/v1/clusters/7/jobs/"])
def test_the_job_submit_path_takes_its_larger_limit(echo, small_limits, path):
    job_limit = 5 * 1024 * 1024  # the request's own limit plus a job's files
    client = FakeClient("POST", path, total=3 * 1024 * 1024).run(bounded_bodies(echo))
    assert client.status == 200 and len(echo.seen[0]) == 3 * 1024 * 1024
    refused = FakeClient("POST", path, total=20 * 1024 * 1024).run(bounded_bodies(echo))
    assert refused.status == 413 and job_limit < refused.handed <= job_limit + CHUNK
    assert f"larger than {job_limit} bytes".encode() in refused.body
    # The same size elsewhere is refused at the request's own limit.
    other = FakeClient("POST", "/clusters/7/", total=3 * 1024 * 1024).run(bounded_bodies(echo))
    assert other.status == 413 and other.handed <= 1024 * 1024 + CHUNK


@pytest.mark.parametrize(
    ("path", "error"),
    [("/api/v1/clusters", "payload_too_large"), ("/bigdata/api/v1/products/demo/1.0", None)],
)
def test_an_api_client_gets_the_apis_error_body(echo, small_limits, path, error):
    for declared in (None, 2 * 1024 * 1024):
        client = FakeClient("POST", path, total=2 * 1024 * 1024, declared=declared)
        client.run(bounded_bodies(echo))
        body = json.loads(client.body)
        assert client.status == 413 and client.headers[b"content-type"] == b"application/json"
        assert body["status"] == 413 and body["error"] == (error or "payload too large")
        assert body["message"] == "the request body is larger than 1048576 bytes"


def test_no_limit_means_no_count(echo, settings):
    settings.DATA_UPLOAD_MAX_MEMORY_SIZE = None
    client = FakeClient("POST", "/accounts/login/", total=3 * 1024 * 1024).run(bounded_bodies(echo))
    assert client.status == 200 and len(echo.seen[0]) == 3 * 1024 * 1024


@pytest.mark.parametrize("kind", ["websocket", "lifespan"])
def test_websockets_and_lifespan_pass_through_untouched(kind):
    calls = []

    async def inner(scope, receive, send):
        calls.append((scope, receive, send))

    async def receive():
        return {}

    async def send(message):
        pass

    scope = {"type": kind, "path": "/clusters/1/jobs", "headers": [(b"content-length", b"9" * 12)]}
    asyncio.run(bounded_bodies(inner)(scope, receive, send))
    assert calls == [(scope, receive, send)]


def test_the_reverse_proxy_caps_bodies_a_little_above_the_portals_limits(settings):
    caddyfile = (settings.BASE_DIR / "deploy" / "Caddyfile").read_text()
    assert f"@job_submit path_regexp {limits.JOB_SUBMIT.pattern}\n" in caddyfile  # the same paths
    caps = [int(mib) * 1024 * 1024 for mib in re.findall(r"max_size (\d+)MiB", caddyfile)]
    job_limit, _ = limits.body_limit("/api/v1/clusters/1/jobs")
    limit, _ = limits.body_limit("/accounts/login/")
    assert limit is not None and job_limit is not None
    # The job submit's, the portal's other paths', the UI hosts'.
    assert caps == [job_limit + 1024 * 1024, limit + 1024 * 1024, limit + 1024 * 1024]
