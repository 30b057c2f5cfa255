"""WebSockets through the proxy on the real web server (gunicorn with uvicorn workers, as
`./platter run` starts it), to a tiny upstream WebSocket server on real sockets: the owner's
messages go both ways on the cluster's UI host; a page of another origin, a browser without
the host's cookie, another user and the portal's own host are refused; messages are bounded,
an idle line is closed and every connection holds one of its user's stream slots."""

import asyncio
import os
import threading
import time

import pytest
from django.conf import settings
from websockets.asyncio.client import connect
from websockets.asyncio.server import serve
from websockets.exceptions import ConnectionClosed, InvalidStatus

from apps.lab import devservers
from apps.lab.tests.test_devservers import free_port
from apps.proxy import services, tickets
from apps.proxy.tests.upstream import cluster_on
from conftest import _database_url
from portal import streams

MAX_BYTES, IDLE_SECONDS, LIMIT = 1000, 3, 2
KERNEL_PROTOCOL = "v1.kernel.websocket.jupyter.org"


def pick_kernel_protocol(connection, offered):
    """Jupyter's kernel protocol when the browser offers it, else none (as Jupyter does)."""
    return KERNEL_PROTOCOL if KERNEL_PROTOCOL in offered else None


class Upstream:
    """A WebSocket server on 127.0.0.1 in a thread of its own: /echo echoes, /big sends a
    message over the proxy's bound, /quiet says nothing. It keeps every request's headers."""

    def __init__(self) -> None:
        self.requests: list[dict[str, str]] = []
        self.loop = asyncio.new_event_loop()
        self.ready = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()
        self.ready.wait(10)

    def _run(self) -> None:
        asyncio.set_event_loop(self.loop)
        self.loop.run_until_complete(self._serve())

    async def _serve(self) -> None:
        async with serve(
            self._handle,
            "127.0.0.1",
            0,
            select_subprotocol=pick_kernel_protocol,
            max_size=10 * MAX_BYTES,
        ) as server:
            self.port = server.sockets[0].getsockname()[1]
            self.stop = self.loop.create_future()
            self.ready.set()
            await self.stop

    async def _handle(self, connection) -> None:
        request = connection.request
        self.requests.append(
            {"path": request.path, **{k.lower(): v for k, v in request.headers.raw_items()}}
        )
        if request.path.startswith("/big"):
            await connection.send("x" * (2 * MAX_BYTES))
        elif request.path.startswith("/quiet"):
            await connection.wait_closed()
        async for message in connection:
            await connection.send(message)

    def close(self) -> None:
        self.loop.call_soon_threadsafe(self.stop.set_result, None)
        self.thread.join(10)


@pytest.fixture(scope="module")
def upstream():
    server = Upstream()
    yield server
    server.close()


@pytest.fixture(scope="module")
def web_server(django_db_setup, tmp_path_factory):
    port = free_port()
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "portal.settings.test",
        "DATABASE_URL": _database_url(settings.DATABASES["default"]),
        "GUNICORN_WORKERS": "1",
        "PLATTER_UI_DOMAIN": "ui.localhost",
        "PLATTER_STREAMS_PER_USER": str(LIMIT),
        "PLATTER_PROXY_WS_MAX_MESSAGE_BYTES": str(MAX_BYTES),
        "PLATTER_PROXY_WS_IDLE_SECONDS": str(IDLE_SECONDS),
    }
    log = (tmp_path_factory.mktemp("web") / "web.log").open("w")
    server = devservers.start_web(f"127.0.0.1:{port}", env, log)
    try:
        devservers.wait_for_web(f"127.0.0.1:{port}", server)
        yield port
    finally:
        devservers.stop_process(server)
        log.close()


class Browser:
    """Opens websockets as a browser on a page of `origin` would, with the UI host's cookie."""

    def __init__(self, port: int, cluster_id: int, user=None, *, origin: str = "") -> None:
        self.port, self.cluster_id = port, cluster_id
        self.host = f"c{cluster_id}.ui.localhost"
        self.origin = origin or f"http://{self.host}:{port}"
        self.cookie = ""
        if user is not None:
            value = tickets.cookie_value(user, cluster_id, self.host, f"http://127.0.0.1:{port}")
            self.cookie = f"{settings.UI_COOKIE_NAME}={value}"

    def open(self, ui_port: int, path: str, *, host: str = "", **options):
        host = host or f"{self.host}:{self.port}"
        url = f"ws://{host}/clusters/{self.cluster_id}/ui/master-0/{ui_port}/{path}"
        headers = {"Cookie": self.cookie} if self.cookie else {}
        return connect(
            url,
            origin=self.origin,  # type: ignore[arg-type]
            additional_headers=headers,
            host="127.0.0.1",  # *.localhost is loopback for browsers, not for every resolver
            port=self.port,
            open_timeout=30,
            proxy=None,
            **options,
        )


def refusal(coroutine) -> tuple[int, str]:
    async def attempt():
        try:
            async with coroutine:
                return 101, ""
        except InvalidStatus as error:
            return error.response.status_code, error.response.body.decode()

    return asyncio.run(attempt())


def wait_for_streams(user, count: int) -> int:
    """The user's open stream slots once they reach `count` (the server releases a slot as
    the connection ends) or after 10 s."""
    end = time.monotonic() + 10
    while streams.open_streams(user.pk) != count and time.monotonic() < end:
        time.sleep(0.1)
    return streams.open_streams(user.pk)


@pytest.mark.django_db(transaction=True)
def test_it_relays_the_owners_messages_both_ways_holding_a_stream_slot(web_server, upstream, alice):
    cluster = cluster_on(alice, upstream.port, upstream.port + 1)
    browser = Browser(web_server, cluster.id, alice)

    async def talk():
        async with browser.open(
            upstream.port, "echo?kernel=1", subprotocols=[KERNEL_PROTOCOL]
        ) as ws:
            await ws.send("hello")
            text = await ws.recv()
            await ws.send(b"\x00\x01bytes")
            data = await ws.recv()
            held = await asyncio.to_thread(streams.open_streams, alice.pk)
            return text, data, ws.subprotocol, held

    text, data, subprotocol, held = asyncio.run(talk())
    assert (text, data) == ("hello", b"\x00\x01bytes")
    assert subprotocol == KERNEL_PROTOCOL
    assert held == 1
    assert wait_for_streams(alice, 0) == 0
    seen = upstream.requests[-1]
    assert seen["path"] == "/echo?kernel=1"
    assert "cookie" not in seen and "origin" not in seen  # the portal's cookie stays behind


@pytest.mark.django_db(transaction=True)
def test_staff_may_open_it(web_server, upstream, alice, admin_user):
    cluster = cluster_on(alice, upstream.port, upstream.port + 1)
    assert refusal(Browser(web_server, cluster.id, admin_user).open(upstream.port, "echo")) == (
        101,
        "",
    )


@pytest.mark.django_db(transaction=True)
def test_it_refuses_other_origins_users_and_hosts(web_server, upstream, alice, bob):
    cluster = cluster_on(alice, upstream.port, upstream.port + 1)
    other = cluster_on(bob, upstream.port, upstream.port + 1)
    sibling = f"http://c{other.id}.ui.localhost:{web_server}"

    status, text = refusal(Browser(web_server, cluster.id).open(upstream.port, "echo"))
    assert status == 403 and "from its cluster page" in text  # no cookie
    status, text = refusal(
        Browser(web_server, cluster.id, alice, origin=sibling).open(upstream.port, "echo")
    )
    assert status == 403 and "own pages" in text  # a sibling cluster's page
    status, _ = refusal(Browser(web_server, cluster.id, bob).open(upstream.port, "echo"))
    assert status == 404  # a genuine cookie of a user who may not see the cluster
    status, _ = refusal(Browser(web_server, cluster.id, alice).open(7077, "echo"))
    assert status == 404  # not a UI port
    portal = Browser(web_server, cluster.id, alice, origin=f"http://127.0.0.1:{web_server}")
    status, _ = refusal(portal.open(upstream.port, "echo", host=f"127.0.0.1:{web_server}"))
    assert status == 404  # the portal's own host serves no websocket
    status, text = refusal(Browser(web_server, cluster.id, alice).open(upstream.port + 1, "x"))
    assert status == 502 and "did not take the websocket" in text  # nothing listens there
    assert wait_for_streams(alice, 0) == 0


@pytest.mark.django_db(transaction=True)
def test_messages_over_the_bound_close_the_line_with_1009(web_server, upstream, alice):
    cluster = cluster_on(alice, upstream.port, upstream.port + 1)
    browser = Browser(web_server, cluster.id, alice)

    async def closed_by(path: str, message: str | None) -> int | None:
        async with browser.open(upstream.port, path, max_size=None) as ws:
            if message is not None:
                await ws.send(message)
            with pytest.raises(ConnectionClosed):
                await ws.recv()
            return ws.close_code

    assert asyncio.run(closed_by("echo", "y" * (MAX_BYTES + 1))) == 1009  # from the browser
    assert asyncio.run(closed_by("big", None)) == 1009  # from the UI


@pytest.mark.django_db(transaction=True)
def test_an_idle_line_is_closed_and_frees_its_slot(web_server, upstream, alice):
    cluster = cluster_on(alice, upstream.port, upstream.port + 1)

    async def idle() -> tuple[int | None, str | None]:
        async with Browser(web_server, cluster.id, alice).open(upstream.port, "quiet") as ws:
            with pytest.raises(ConnectionClosed):
                await ws.recv()  # nothing comes; the proxy closes after IDLE_SECONDS
            return ws.close_code, ws.close_reason

    assert asyncio.run(idle()) == (1001, "idle")
    assert wait_for_streams(alice, 0) == 0


@pytest.mark.django_db(transaction=True)
def test_a_user_over_the_stream_limit_gets_429(web_server, upstream, alice, bob):
    cluster = cluster_on(alice, upstream.port, upstream.port + 1)
    browser = Browser(web_server, cluster.id, alice)

    async def over() -> tuple[int, str]:
        async with browser.open(upstream.port, "echo"), browser.open(upstream.port, "echo"):
            try:
                async with browser.open(upstream.port, "echo"):
                    return 101, ""
            except InvalidStatus as error:
                return error.response.status_code, error.response.body.decode()

    status, text = asyncio.run(over())
    assert status == 429 and f"at most {LIMIT} per user" in text
    assert wait_for_streams(alice, 0) == 0


def test_a_prefixed_ui_gets_the_whole_path_others_the_part_after_it():
    target = services.Target(5, "notebook-0", 8888, "10.0.0.5", {}, prefixed=True)
    assert services.upstream_url(target, "api/kernels", "x=1") == (
        "http://10.0.0.5:8888/clusters/5/ui/notebook-0/8888/api/kernels?x=1"
    )
    plain = services.Target(5, "master-0", 8080, "10.0.0.5", {})
    assert services.upstream_url(plain, "json/", "") == "http://10.0.0.5:8080/json/"
