"""WebSockets to a cluster's web UIs (Jupyter's kernels), on the cluster's own UI host.

Django's ASGI handler serves HTTP only; portal/asgi.py hands every websocket connection here.
A connection is accepted on a UI host only, for the path of one of the cluster's UIs
(/clusters/N/ui/<hostname>/<port>/...), with the same checks as the HTTP views: the host's
cookie names a user who may see the cluster, and the page that opens it is of this same
origin (a sibling cluster's page is the same *site*, so the cookie alone would not tell).
Refusals are HTTP answers (404, 403, 429, 502) where the server offers the ASGI
"websocket.http.response" extension, else a close before the handshake (403).

An accepted connection holds one of the user's stream slots (portal/streams.py) and relays
messages both ways, each at most PROXY_WS_MAX_MESSAGE_BYTES (close 1009 past it), until
either side closes or no message passed for PROXY_WS_IDLE_SECONDS (close 1001). Every
PROXY_WS_RECHECK_SECONDS it asks the database again whether the user may still use it (still
active, same password, the cluster still theirs or they still staff, not being destroyed, the
UI still there): close 4403 with the reason when not; and it ends at PROXY_WS_MAX_LIFE_SECONDS
whatever happens (close 1001). The checks run in a thread and give their database connection
back each time: none is held while the line waits.

A UI that takes the cluster's UI token (JupyterLab) gets it on the upstream handshake
(services.upstream_headers), and it is cut out of every message the UI sends back.
"""

import asyncio
import logging
import re
from dataclasses import dataclass
from typing import Any

import websockets
from asgiref.sync import sync_to_async
from django.conf import settings
from django.db import close_old_connections, connections
from django.http.cookie import parse_cookie
from django.http.request import split_domain_port, validate_host
from websockets.asyncio.client import ClientConnection
from websockets.asyncio.client import connect as ws_connect

from apps.clusters.models import Cluster
from portal import streams

from . import origins, services, tickets
from .rewrite import without

log = logging.getLogger(__name__)

Scope = dict[str, Any]
UI_PATH = re.compile(r"/clusters/([1-9][0-9]{0,17})/ui/([^/]+)/([0-9]{1,5})/(.*)", re.DOTALL)
# Close codes a proxy may pass on from the upstream (RFC 6455 7.4: 1005, 1006 and 1015 are
# never sent on the wire).
RELAYED_CODES = frozenset({1000, 1001, 1003, 1007, 1008, 1009, 1010, 1011, *range(3000, 5000)})


class Refused(Exception):
    def __init__(self, status: int, text: str) -> None:
        self.status, self.text = status, text
        super().__init__(text)


@dataclass(frozen=True)
class Access:
    user_id: int
    target: services.Target
    user_check: str = ""  # tickets.user_check of the user when the connection opened


class _Cookies:
    """What tickets.grant_of reads of a request: its cookies."""

    def __init__(self, header: str) -> None:
        self.COOKIES = parse_cookie(header)


async def application(scope: Scope, receive, send) -> None:
    """The ASGI application for every websocket connection to the web process."""
    message = await receive()
    if message["type"] != "websocket.connect":
        return
    try:
        access, subprotocols = await _check(scope)
        async with streams.stream_slot(access.user_id, "websocket"):
            upstream = await _open_upstream(access.target, scope, subprotocols)
            try:
                await send({"type": "websocket.accept", "subprotocol": upstream.subprotocol})
                await _relay(receive, send, upstream, access)
            finally:
                await upstream.close()
    except streams.TooManyStreams as error:
        await _refuse(scope, send, 429, str(error))
    except Refused as refusal:
        await _refuse(scope, send, refusal.status, refusal.text)


async def _check(scope: Scope) -> tuple[Access, list[str]]:
    headers = _headers(scope)
    host_header = headers.get("host", "")
    host = split_domain_port(host_header)[0]
    if not host or not validate_host(host, settings.ALLOWED_HOSTS) or not origins.is_ui_host(host):
        raise Refused(404, "Not found")
    cluster_id = origins.cluster_of_host(host)
    found = UI_PATH.fullmatch(scope.get("path", ""))
    if cluster_id is None or found is None or int(found.group(1)) != cluster_id:
        raise Refused(404, "Not found")
    # Browsers always send Origin with a websocket: it must be this very host's.
    scheme = "https" if scope.get("scheme") == "wss" else "http"
    if headers.get("origin", "").lower() != f"{scheme}://{host_header}".lower():
        raise Refused(403, "Only this web UI's own pages may open its websockets.")
    access = await sync_to_async(_authorize)(
        headers.get("cookie", ""), host, cluster_id, found.group(2), int(found.group(3))
    )
    if access is None:
        raise Refused(403, "Open this web UI from its cluster page on the portal.")
    protocols = headers.get("sec-websocket-protocol", "")
    return access, [p.strip() for p in protocols.split(",") if p.strip()]


def _authorize(cookie: str, host: str, cluster_id: int, hostname: str, port: int) -> Access | None:
    """The user the host's cookie vouches for, and the UI, when they may see the cluster."""
    close_old_connections()  # this runs outside Django's request cycle
    try:
        grant = tickets.grant_of(_Cookies(cookie), host, cluster_id)  # type: ignore[arg-type]
        if grant is None:
            return None
        visible = Cluster.objects.visible_to(grant.user)
        cluster = visible.select_related("version").filter(id=cluster_id)
        found = cluster.first()
        target = services.find_target(found, hostname, port) if found is not None else None
        if target is None:
            raise Refused(404, "no such web UI")
        return Access(grant.user.pk, target, tickets.user_check(grant.user))
    finally:
        close_old_connections()


def access_lost(access: Access) -> str | None:
    """Why the connection's user may no longer use it (the close reason), or None while
    they may. Leaves no database connection open behind it."""
    close_old_connections()
    try:
        user = tickets.still_granted(access.user_id, access.user_check)
        if user is None:
            return "signed out: open the web UI again from its cluster page"
        target = access.target
        cluster = (
            Cluster.objects.visible_to(user)
            .select_related("version")
            .exclude(state__in=(Cluster.State.DESTROYING, Cluster.State.DESTROYED))
            .filter(id=target.cluster_id)
            .first()
        )
        if cluster is None:
            return "no access to this cluster any more"
        if services.find_target(cluster, target.hostname, target.port) is None:
            return "this web UI is gone"
        return None
    finally:
        connections.close_all()  # nothing held until the next check


def _from_source(target: services.Target) -> dict[str, Any]:
    """The connection's local address: the portal's own on the member's network, which the
    perimeter lets in (apps/clusters/perimeter.py); none given, the host's route decides."""
    return {"local_addr": (target.source, 0)} if target.source else {}


def _headers(scope: Scope) -> dict[str, str]:
    """The request's headers, lower-case names; repeated ones joined with commas."""
    joined: dict[str, str] = {}
    for name, value in scope.get("headers", []):
        key, text = name.decode("latin-1").lower(), value.decode("latin-1")
        joined[key] = f"{joined[key]}, {text}" if key in joined else text
    return joined


def upstream_ws_url(target: services.Target, scope: Scope) -> str:
    path = UI_PATH.fullmatch(scope["path"]).group(4)  # type: ignore[union-attr]  # checked
    http = services.upstream_url(target, path, scope.get("query_string", b"").decode("latin-1"))
    return "ws://" + http.removeprefix("http://")


async def _open_upstream(
    target: services.Target, scope: Scope, subprotocols: list[str]
) -> ClientConnection:
    where = f"{target.hostname}:{target.port}"
    try:
        return await ws_connect(
            upstream_ws_url(target, scope),
            subprotocols=subprotocols or None,  # type: ignore[arg-type]  # the browser's offer
            max_size=settings.PROXY_WS_MAX_MESSAGE_BYTES,
            # Jupyter completes a kernel's handshake once the kernel answers (its own wait
            # for that is 60 s): a connect and a read's time, not a connect's alone.
            open_timeout=settings.PROXY_CONNECT_TIMEOUT + settings.PROXY_READ_TIMEOUT,
            compression=None,
            proxy=None,  # the portal's HTTP(S)_PROXY never sees cluster traffic
            user_agent_header=None,
            additional_headers=services.upstream_headers(target),
            **_from_source(target),
        )
    except (OSError, TimeoutError, websockets.InvalidHandshake) as error:
        raise Refused(502, f"{where} did not take the websocket: {type(error).__name__}") from None


async def _relay(receive, send, upstream: ClientConnection, access: Access) -> None:
    """Messages both ways until a side closes, a message is too big, the line is idle, the
    user lost access or the connection reached its maximum life."""
    target = access.target
    loop = asyncio.get_running_loop()
    last = started = loop.time()
    limit = settings.PROXY_WS_MAX_MESSAGE_BYTES
    ending: dict[str, Any] = {"code": 1000, "reason": ""}

    async def from_browser() -> None:
        nonlocal last
        while True:
            message = await receive()
            if message["type"] == "websocket.disconnect":
                ending["code"] = None  # the browser is gone: nothing to send it
                return
            data = message.get("bytes")
            if data is None:
                data = message.get("text") or ""
            size = len(data.encode() if isinstance(data, str) else data)
            if size > limit:
                ending.update(code=1009, reason=f"a message is at most {limit} bytes")
                return
            await upstream.send(data)
            last = loop.time()

    async def from_upstream() -> None:
        nonlocal last
        try:
            async for data in upstream:
                data = _scrubbed(data, target.token)
                key = "text" if isinstance(data, str) else "bytes"
                await send({"type": "websocket.send", key: data})
                last = loop.time()
        except websockets.ConnectionClosedError as error:
            if error.rcvd is None and error.sent is not None and error.sent.code == 1009:
                ending.update(code=1009, reason=f"a message is at most {limit} bytes")
                return
        if upstream.close_code in RELAYED_CODES:
            ending.update(code=upstream.close_code, reason=upstream.close_reason or "")

    async def idle() -> None:
        while (wait := last + settings.PROXY_WS_IDLE_SECONDS - loop.time()) > 0:
            await asyncio.sleep(wait)
        ending.update(code=1001, reason="idle")
        log.info("websocket to %s:%s idle: closed", target.hostname, target.port)

    async def still_allowed() -> None:
        end = started + settings.PROXY_WS_MAX_LIFE_SECONDS
        while (left := end - loop.time()) > 0:
            await asyncio.sleep(min(settings.PROXY_WS_RECHECK_SECONDS, left))
            if loop.time() >= end:
                break
            if lost := await sync_to_async(access_lost)(access):
                ending.update(code=4403, reason=lost)
                log.info("websocket to %s:%s: %s", target.hostname, target.port, lost)
                return
        ending.update(code=1001, reason="maximum life reached: reconnect")
        log.info("websocket to %s:%s at its maximum life: closed", target.hostname, target.port)

    jobs = (from_browser, from_upstream, idle, still_allowed)
    tasks = [asyncio.create_task(job()) for job in jobs]
    try:
        await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
    if ending["code"] is not None:
        await send({"type": "websocket.close", "code": ending["code"], "reason": ending["reason"]})


def _scrubbed(data: str | bytes, token: str) -> str | bytes:
    """A message with the UI token cut out (a kernel could print it: never to the browser)."""
    if not token:
        return data
    if isinstance(data, str):
        return without(data, token)
    secret = token.encode()
    while secret in data:
        data = data.replace(secret, b"")
    return data


async def _refuse(scope: Scope, send, status: int, text: str) -> None:
    if "websocket.http.response" in scope.get("extensions", {}):
        body = text.encode()
        await send(
            {
                "type": "websocket.http.response.start",
                "status": status,
                "headers": [
                    (b"content-type", b"text/plain; charset=utf-8"),
                    (b"content-length", str(len(body)).encode()),
                ],
            }
        )
        await send({"type": "websocket.http.response.body", "body": body})
    else:
        await send({"type": "websocket.close", "code": 1008, "reason": text[:120]})
