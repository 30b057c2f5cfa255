"""Streams on the real web server, started as `./platter run` starts it (gunicorn with uvicorn
workers): one user over the stream limit gets 429 naming it while another is served, and a web
UI that drips a byte now and then is cut at the deadline, freeing the slot. Each worker has one
database connection: the open streams hold none of it."""

import asyncio
import os
import threading

import httpx
import pytest
from django.conf import settings
from django.contrib.auth import BACKEND_SESSION_KEY, HASH_SESSION_KEY, SESSION_KEY
from django.contrib.sessions.backends.db import SessionStore

from apps.lab import devservers
from apps.lab.tests.test_devservers import free_port
from apps.proxy.tests.test_streams import Drip, DripServer
from apps.proxy.tests.upstream import cluster_on
from conftest import _database_url

# The deadline leaves the test ample time to open its streams on a busy machine.
LIMIT, DEADLINE = 3, 15


@pytest.fixture
def drip():
    server = DripServer(("127.0.0.1", 0), Drip)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield server
    server.shutdown()


@pytest.fixture
def web_server(django_db_setup, tmp_path):
    address = f"127.0.0.1:{free_port()}"
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "portal.settings.test",
        "DATABASE_URL": _database_url(settings.DATABASES["default"]),
        "GUNICORN_WORKERS": "2",  # the limit is shared across processes
        # One database connection per worker: a stream gives its connection back before its
        # body (portal.asgi), or the streams held here would leave none for the other calls.
        "PLATTER_DB_POOL": "1",
        "PLATTER_DB_POOL_TIMEOUT": "5",
        "PLATTER_STREAMS_PER_USER": str(LIMIT),
        "PLATTER_PROXY_DEADLINE_SECONDS": str(DEADLINE),
        "PLATTER_UI_DOMAIN": "",  # UIs on the portal's origin: no ticket round trip here
        "PLATTER_PROXY_ON_PORTAL_ORIGIN": "1",
    }
    log = (tmp_path / "web.log").open("w")
    server = devservers.start_web(address, env, log)
    try:
        devservers.wait_for_web(address, server)
        yield f"http://{address}"
    finally:
        devservers.stop_process(server)
        log.close()


def session_of(user) -> str:
    session = SessionStore()
    session[SESSION_KEY] = str(user.pk)
    session[BACKEND_SESSION_KEY] = "django.contrib.auth.backends.ModelBackend"
    session[HASH_SESSION_KEY] = user.get_session_auth_hash()
    session.create()
    return session.session_key or ""


async def scenario(url: str, ui: str, alice: str, staff: str) -> dict:
    as_alice = httpx.AsyncClient(base_url=url, cookies={"sessionid": alice}, timeout=30)
    as_staff = httpx.AsyncClient(base_url=url, cookies={"sessionid": staff}, timeout=30)
    seen: dict = {}
    try:
        opening = (
            as_alice.send(as_alice.build_request("GET", ui), stream=True) for _ in range(LIMIT)
        )
        held = await asyncio.gather(*opening)
        seen["held"] = [r.status_code for r in held]
        refused = await as_alice.get(ui)
        seen["refused"] = (refused.status_code, refused.text)
        other = await as_staff.send(as_staff.build_request("GET", ui), stream=True)
        seen["other"] = other.status_code
        bodies = await asyncio.gather(*(r.aread() for r in held))  # end at the deadline
        seen["bodies"] = {bytes(set(body)) for body in bodies}
        await other.aclose()
        await asyncio.sleep(0.5)  # the server releases the slots as the bodies end
        again = await as_alice.send(as_alice.build_request("GET", ui), stream=True)
        seen["again"] = again.status_code
        await again.aclose()
    finally:
        await as_alice.aclose()
        await as_staff.aclose()
    return seen


@pytest.mark.django_db(transaction=True)
def test_one_user_over_the_limit_gets_429_others_are_served_and_drips_end(
    web_server, drip, alice, admin_user
):
    cluster = cluster_on(alice, drip.server_port, drip.server_port + 1)
    ui = f"/clusters/{cluster.id}/ui/master-0/{drip.server_port}/drip"
    seen = asyncio.run(scenario(web_server, ui, session_of(alice), session_of(admin_user)))
    assert seen["held"] == [200] * LIMIT
    status, text = seen["refused"]
    assert status == 429 and f"at most {LIMIT} per user" in text
    assert seen["other"] == 200
    assert seen["bodies"] == {b"."}  # every held body ended (the deadline cut it)
    assert seen["again"] == 200  # and its slot came back
