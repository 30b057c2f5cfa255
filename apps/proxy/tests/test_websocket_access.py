"""A websocket through the proxy, driven in this process through its ASGI application (so the
settings can be made small), to a real upstream websocket server: the UI token goes on the
upstream handshake and never comes back; a line whose user lost access is closed 4403 at the
next check, one at its maximum life 1001, and the checks hold no database connection."""

import asyncio

import pytest
from asgiref.sync import sync_to_async
from django.conf import settings as django_settings
from django.db import connection
from websockets.asyncio.server import serve

from apps.clusters import credentials
from apps.clusters.models import Cluster
from apps.proxy import tickets, websocket
from apps.proxy.tests.upstream import cluster_on

pytestmark = pytest.mark.django_db(transaction=True)
WAIT = 10  # seconds any step may take before the test gives up


class Browser:
    """The ASGI side of one connection: what the proxy sends it, and its own messages."""

    def __init__(self) -> None:
        self.inbox: asyncio.Queue = asyncio.Queue()  # from the browser to the proxy
        self.got: asyncio.Queue = asyncio.Queue()  # from the proxy to the browser

    async def receive(self) -> dict:
        return await self.inbox.get()

    async def send(self, message: dict) -> None:
        await self.got.put(message)

    async def next(self, kind: str) -> dict:
        """The next message of this type the proxy sent (others before it are skipped)."""
        while True:
            message = await asyncio.wait_for(self.got.get(), WAIT)
            if message["type"] == kind:
                return message


class Upstream:
    """A websocket server on 127.0.0.1: greets with a line holding the UI token (as a kernel
    printing its environment would), then echoes; keeps every handshake's headers."""

    def __init__(self, token: str) -> None:
        self.token = token
        self.handshakes: list[dict[str, str]] = []

    async def handle(self, connection) -> None:
        self.handshakes.append({k.lower(): v for k, v in connection.request.headers.raw_items()})
        await connection.send(f"hello {self.token}!")
        async for message in connection:
            await connection.send(message)


@pytest.fixture
def token_cluster(alice):
    """alice's cluster whose master UI (the port set by the test) takes the UI token."""

    def make(port: int) -> Cluster:
        cluster = cluster_on(alice, port, port + 1)
        cluster.version.ports[0]["token"] = True
        cluster.version.save()
        credentials.ensure_credentials(cluster)
        return cluster

    return make


def scope_for(cluster: Cluster, user, port: int) -> dict:
    host = f"c{cluster.id}.ui.localhost"
    cookie = tickets.cookie_value(user, cluster.id, host, "http://127.0.0.1:8000")
    return {
        "type": "websocket",
        "scheme": "ws",
        "path": f"/clusters/{cluster.id}/ui/master-0/{port}/api/kernels/1/channels",
        "query_string": b"",
        "headers": [
            (b"host", host.encode()),
            (b"origin", f"http://{host}".encode()),
            (b"cookie", f"{django_settings.UI_COOKIE_NAME}={cookie}".encode()),
        ],
        "extensions": {"websocket.http.response": {}},
    }


async def connect(scope: dict) -> tuple[Browser, asyncio.Task]:
    browser = Browser()
    await browser.inbox.put({"type": "websocket.connect"})
    task = asyncio.create_task(websocket.application(scope, browser.receive, browser.send))
    accepted = await browser.next("websocket.accept")
    assert accepted["type"] == "websocket.accept"
    return browser, task


def run_through_proxy(token_cluster, user, revoke=None, *, traffic: bool = False) -> dict:
    """Open a line as `user` to a token UI, say hello, call `revoke(cluster)` (in a thread,
    as another request would) after a first check passed, and return how the proxy closed it,
    with what the browser and the upstream saw."""

    async def scenario() -> dict:
        upstream = Upstream("")
        async with serve(upstream.handle, "127.0.0.1", 0) as server:
            port = server.sockets[0].getsockname()[1]
            cluster = await sync_to_async(token_cluster)(port)
            found = await sync_to_async(credentials.ensure_credentials)(cluster)
            upstream.token = found.ui_token
            scope = await sync_to_async(scope_for)(cluster, user, port)
            browser, task = await connect(scope)
            greeting = await browser.next("websocket.send")
            started = asyncio.get_running_loop().time()
            if revoke is not None:
                await asyncio.sleep(
                    django_settings.PROXY_WS_RECHECK_SECONDS * 1.5
                )  # a check passed
                assert task.done() is False, "closed while access still held"
                await sync_to_async(revoke)(cluster)
            while traffic and not task.done():
                await browser.inbox.put({"type": "websocket.receive", "text": "busy"})
                await asyncio.sleep(0.2)
            closed = await browser.next("websocket.close")
            await asyncio.wait_for(task, WAIT)
            return {
                "closed": closed,
                "after": asyncio.get_running_loop().time() - started,
                "greeting": greeting.get("text"),
                "token": upstream.token,
                "handshake": upstream.handshakes[0],
            }

    return asyncio.run(scenario())


def test_the_token_goes_upstream_on_the_handshake_and_never_comes_back(
    token_cluster, alice, settings
):
    settings.PROXY_WS_MAX_LIFE_SECONDS = 1
    seen = run_through_proxy(token_cluster, alice)
    assert seen["handshake"]["authorization"] == f"token {seen['token']}"
    assert "cookie" not in seen["handshake"]
    assert seen["greeting"] == "hello !"  # the token cut out of the UI's message


def destroy(cluster: Cluster) -> None:
    Cluster.objects.filter(id=cluster.id).update(state=Cluster.State.DESTROYING)


def give_away(cluster: Cluster) -> None:
    from django.contrib.auth import get_user_model

    carol = get_user_model().objects.create_user("carol", "carol@example.org", "carol-pass-1")
    Cluster.objects.filter(id=cluster.id).update(owner=carol)


def deactivate(cluster: Cluster) -> None:
    cluster.owner.is_active = False
    cluster.owner.save()


def new_password(cluster: Cluster) -> None:
    cluster.owner.set_password("another-pass-456")
    cluster.owner.save()


def release_ui(cluster: Cluster) -> None:
    cluster.instances.filter(role="master").update(active=False)


@pytest.mark.parametrize(
    ("revoke", "reason"),
    [
        (destroy, "no access to this cluster"),
        (give_away, "no access to this cluster"),
        (deactivate, "signed out"),
        (new_password, "signed out"),
        (release_ui, "this web UI is gone"),
    ],
)
def test_a_line_whose_user_lost_access_is_closed_at_the_next_check(
    token_cluster, alice, settings, revoke, reason
):
    settings.PROXY_WS_RECHECK_SECONDS = 1
    seen = run_through_proxy(token_cluster, alice, revoke)
    assert seen["closed"]["code"] == 4403
    assert seen["closed"]["reason"].startswith(reason)
    assert seen["after"] < 1.5 + 1 + 2  # the first check, the revocation, then one more


def test_staff_keep_a_line_to_a_cluster_given_away(token_cluster, admin_user, settings):
    settings.PROXY_WS_RECHECK_SECONDS = 1
    settings.PROXY_WS_MAX_LIFE_SECONDS = 4
    seen = run_through_proxy(token_cluster, admin_user, give_away)
    assert seen["closed"]["code"] == 1001  # only its maximum life ended it


def test_a_busy_line_is_closed_at_its_maximum_life(token_cluster, alice, settings):
    settings.PROXY_WS_MAX_LIFE_SECONDS = 2
    seen = run_through_proxy(token_cluster, alice, traffic=True)
    assert seen["closed"] == {
        "type": "websocket.close",
        "code": 1001,
        "reason": "maximum life reached: reconnect",
    }
    assert 1.5 <= seen["after"] < 4  # from the greeting, a moment after it opened


def test_a_check_leaves_no_database_connection_open(token_cluster, alice):
    cluster = token_cluster(8888)
    target = websocket.services.find_target(cluster, "master-0", 8888)
    assert target is not None
    access = websocket.Access(alice.pk, target, tickets.user_check(alice))
    assert websocket.access_lost(access) is None
    assert connection.connection is None
    destroy(cluster)
    assert websocket.access_lost(access) == "no access to this cluster any more"
    assert connection.connection is None
