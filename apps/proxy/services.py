"""Forwarding a request to one of the web UIs a cluster offers through the portal.

A UI is a port the catalog version declares with "ui": true, on an instance of that port's
role (apps/clusters/web_ui.py). Anything else (another port, a hostname that is no member, a
released instance) is unknown, so the view answers 404 exactly as for a cluster the user may
not see.

A UI that authenticates (the port's "token": JupyterLab) gets the cluster's UI token on every
request, ``Authorization: token <t>``, from the proxy alone: a browser's own Authorization or
``token`` parameter never passes, and the token is cut out of whatever the UI answers
(headers and bodies), so it never reaches a browser, the owner's included.
"""

import logging
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from urllib.parse import parse_qsl, quote, urlencode

import httpx
from django.http import HttpRequest, StreamingHttpResponse

from apps.clusters.credentials import credentials_of
from apps.clusters.models import Cluster
from apps.clusters.web_ui import cluster_root_path, live_instances, ui_ports
from portal import streams

from . import headers, origins, transport
from .rewrite import LinkRewriter, Scrubber, link_pattern, rewrite_location, without
from .transport import UpstreamError

log = logging.getLogger(__name__)

# Request headers a UI gets from the browser; everything else (the portal's cookies,
# Authorization, CSRF tokens, X-Forwarded-*, Referer naming portal pages) stays behind.
FORWARDED_REQUEST_HEADERS = {
    "accept",
    "accept-language",
    "cache-control",
    "content-type",
    "if-match",
    "if-modified-since",
    "if-none-match",
    "if-range",
    "if-unmodified-since",
    "pragma",
    "range",
    "user-agent",
    "x-requested-with",
}
REWRITTEN_TYPES = ("text/html", "text/css", "application/xhtml+xml")
PATH_SAFE = "/:@!$&'()*+,;=-._~"


@dataclass(frozen=True)
class Target:
    """One UI of one cluster member, and where the portal serves it."""

    cluster_id: int
    hostname: str
    port: int
    address: str
    members: dict[str, str]  # hostnames and addresses (lower case) -> hostname
    prefixed: bool = False  # the UI serves itself under `prefix` (the port's "prefixed")
    token: str = field(default="", repr=False)  # the cluster's UI token, for a UI requiring it
    # The address the proxy connects from on the member's network ("": the host's route); the
    # perimeter lets it in (apps/clusters/perimeter.py).
    source: str = ""

    @property
    def prefix(self) -> str:
        """This UI's path on the portal, without a trailing slash."""
        return f"{cluster_root_path(self.cluster_id)}/{self.hostname}/{self.port}"


def find_target(cluster: Cluster, hostname: str, port: int) -> Target | None:
    """The UI at hostname:port of the cluster, or None when there is no such UI."""
    ports = [p for p in ui_ports(cluster) if p["port"] == port]
    roles = {p["role"] for p in ports}
    if not roles:
        return None
    instances = live_instances(cluster)
    for instance in instances:
        if instance.hostname == hostname and instance.role in roles and instance.address:
            members = {}
            for member in instances:
                members[member.hostname.lower()] = member.hostname
                if member.address is not None:
                    members[member.address.ip] = member.hostname
            mine = [p for p in ports if p["role"] == instance.role]
            prefixed = any(p.get("prefixed") for p in mine)
            token = _ui_token(cluster) if any(p.get("token") is True for p in mine) else ""
            source = instance.address.network.portal_source or ""
            return Target(
                cluster.id, hostname, port, instance.address.ip, members, prefixed, token, source
            )
    return None


def _ui_token(cluster: Cluster) -> str:
    """The cluster's UI token; "" before its first placement (its UI refuses then, as it
    does not start without one)."""
    found = credentials_of(cluster)
    return found.ui_token if found is not None else ""


def upstream_headers(target: Target) -> dict[str, str]:
    """What the proxy adds to every request to the UI (HTTP and websocket)."""
    return {"Authorization": f"token {target.token}"} if target.token else {}


def upstream_query(target: Target, query: str) -> str:
    """The browser's query, without a ``token`` parameter for a UI that takes the portal's:
    Jupyter reads that parameter before the header, so a browser's could only stand in."""
    if not target.token or "token" not in query:
        return query
    kept = [(k, v) for k, v in parse_qsl(query, keep_blank_values=True) if k != "token"]
    return urlencode(kept)


def upstream_url(target: Target, path: str, query: str) -> str:
    if target.prefixed:
        path = f"{target.prefix.lstrip('/')}/{path}"
    # Django hands the path decoded: quote it again, keeping what is legal in a path.
    url = f"http://{target.address}:{target.port}/{quote(path, safe=PATH_SAFE)}"
    query = upstream_query(target, query)
    return f"{url}?{query}" if query else url


def request_headers(request: HttpRequest, target: Target | None = None) -> dict[str, str]:
    headers = {k: v for k, v in request.headers.items() if k.lower() in FORWARDED_REQUEST_HEADERS}
    # Plain bodies: the rewriter reads HTML and CSS as bytes, and nothing is decoded twice.
    headers["Accept-Encoding"] = "identity"
    if target is not None:
        headers.update(upstream_headers(target))
    return headers


def forward(
    request: HttpRequest,
    target: Target,
    path: str,
    *,
    sandbox: bool = False,
    user_id: int | None = None,
) -> StreamingHttpResponse:
    """Send the request to the UI and stream its answer back, rewritten for the proxy
    (sandbox: the answer is served on the portal's own origin).

    The exchange runs on an event loop with httpx's async client (transport.py): under ASGI
    the server's own, so the body streams without holding a thread; the whole of it ends by
    PROXY_DEADLINE_SECONDS. With user_id it holds one of that user's stream slots
    (portal.streams: TooManyStreams when they have the most open)."""
    slot = streams.claim(user_id, "proxy") if user_id is not None else None
    exchange = transport.Exchange(
        request.method or "GET",
        upstream_url(target, path, request.META.get("QUERY_STRING", "")),
        request_headers(request, target),
        request.body,
        f"{target.hostname}:{target.port}",
        source=target.source,
    )
    runner = transport.runner_for(request)
    streams.release_connections()  # no database connection waits for the UI's headers
    try:
        upstream = runner.run(exchange.open())
        response = _response(upstream, exchange, target, request, sandbox)
    except BaseException:
        runner.run(exchange.close())
        runner.stop()
        if slot is not None:
            slot.release()
        raise
    body = streams.held(slot, _body(upstream, exchange, target), deadline=exchange.remaining())
    response.streaming_content = runner.stream(body)
    return response


def _response(
    upstream: httpx.Response,
    exchange: "transport.Exchange",
    target: Target,
    request: HttpRequest,
    sandbox: bool,
) -> StreamingHttpResponse:
    location = None
    if "location" in upstream.headers:
        location = rewrite_location(
            upstream.headers["location"],
            target.prefix,
            cluster_root_path(target.cluster_id),
            target.members,
            origins.request_origin(request),
            request.path,
        )
        if location is None:
            raise UpstreamError(
                f"{target.hostname}:{target.port} redirected outside the cluster; "
                "the portal does not follow it"
            )
    response = StreamingHttpResponse(status=upstream.status_code)
    for name, value in headers.response_headers(
        upstream.headers.multi_items(),
        rewriting=_rewriting(upstream),
        sandbox=sandbox,
        location=location,
    ):
        response.headers[name] = without(value, target.token)
    return response


def _rewriting(upstream: httpx.Response) -> bool:
    content_type = upstream.headers.get("content-type", "").split(";")[0].strip().lower()
    return content_type in REWRITTEN_TYPES


async def _body(
    upstream: httpx.Response, exchange: "transport.Exchange", target: Target
) -> AsyncIterator[bytes]:
    """The body as it comes, each socket read at most 64 KiB (httpcore's read size; asking
    httpx for a chunk size would hold bytes back until it fills), links rewritten in HTML and CSS;
    the upstream connection is closed when it ends, the client leaves or the deadline
    passes. The UI token is masked in it (JupyterLab's page writes it into its config; the
    browser's "*" then comes back as a token parameter, which upstream_query drops)."""
    try:
        if _rewriting(upstream):
            rewriter = LinkRewriter(
                link_pattern(cluster_root_path(target.cluster_id)), target.prefix
            )
            scrub = Scrubber(target.token)
            async for chunk in upstream.aiter_bytes():
                if out := scrub.feed(rewriter.feed(chunk)):
                    yield out
            if out := scrub.feed(rewriter.flush()) + scrub.flush():
                yield out
        else:
            scrub = Scrubber(target.token)
            async for chunk in upstream.aiter_raw():
                if out := scrub.feed(chunk):
                    yield out
            if out := scrub.flush():
                yield out
    except httpx.HTTPError as error:
        # Headers are sent already: the browser sees a cut-off body, the log says why.
        log.warning(
            "web UI %s:%s of cluster %s broke off: %s",
            target.hostname,
            target.port,
            target.cluster_id,
            type(error).__name__,
        )
    finally:
        await exchange.close()
