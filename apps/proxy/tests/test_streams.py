"""The proxy's transport against UIs that answer slowly: every response ends by its deadline,
and one user's open UI requests count against their stream limit, not anyone else's."""

import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from apps.metrics import store
from apps.proxy.tests.upstream import cluster_on, open_ui
from portal import streams

pytestmark = pytest.mark.django_db


class Drip(BaseHTTPRequestHandler):
    """Headers at once, then a byte every 0.05 s for as long as the reader stays."""

    protocol_version = "HTTP/1.1"
    server: "DripServer"

    def log_message(self, *args) -> None:
        pass

    def do_GET(self) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "application/octet-stream")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        try:
            while True:
                self.wfile.write(b"1\r\n.\r\n")
                self.wfile.flush()
                time.sleep(0.05)
        except OSError:  # the proxy hung up
            self.server.cut.release()


class DripServer(ThreadingHTTPServer):
    daemon_threads = True
    cut = threading.Semaphore(0)


@pytest.fixture(scope="module")
def drip():
    server = DripServer(("127.0.0.1", 0), Drip)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield server
    server.shutdown()


@pytest.fixture
def ui(alice, drip, settings):
    settings.PROXY_READ_TIMEOUT = 10  # each byte comes in time: only the deadline ends it
    cluster = cluster_on(alice, drip.server_port, drip.server_port + 1)
    store.client().delete(*(streams.KEY.format(user_id=uid) for uid in range(1, 100)))
    return f"/clusters/{cluster.id}/ui/master-0/{drip.server_port}"


def test_a_ui_that_drips_forever_is_cut_at_the_deadline(alice, ui, drip, settings):
    settings.PROXY_DEADLINE_SECONDS = 1
    response = open_ui(alice, f"{ui}/").get(f"{ui}/drip")
    assert response.status_code == 200
    assert streams.open_streams(alice.id) == 1  # held while it streams
    body = b"".join(response.streaming_content)  # ends: the deadline cut it
    assert body and set(body) == {ord(".")}
    assert drip.cut.acquire(timeout=10)  # and the upstream connection was closed
    assert streams.open_streams(alice.id) == 0


def test_ui_requests_over_the_limit_are_429_naming_it_while_others_are_served(
    alice, admin_user, ui, settings
):
    settings.STREAMS_PER_USER = 2
    settings.PROXY_DEADLINE_SECONDS = 2
    browser = open_ui(alice, f"{ui}/")
    held = [browser.get(f"{ui}/drip") for _ in range(2)]
    assert [r.status_code for r in held] == [200, 200]
    refused = browser.get(f"{ui}/drip")
    assert refused.status_code == 429
    assert "at most 2 per user" in refused.content.decode()
    staff = open_ui(admin_user, f"{ui}/").get(f"{ui}/drip")  # someone else: served
    assert staff.status_code == 200
    for response in [*held, staff]:
        b"".join(response.streaming_content)  # each ends at its deadline
    assert streams.open_streams(alice.id) == 0
    assert browser.get(f"{ui}/drip").status_code == 200
