"""The web UIs a cluster offers through the portal, and forwarding a request to one of them.

A UI is a port the catalog version declares with "ui": true, on an instance of that port's
role. Anything else (another port, a hostname that is no member, a released instance) is
unknown, so the view answers 404 exactly as for a cluster the user may not see.
"""

import logging
from collections.abc import Iterator
from dataclasses import dataclass
from urllib.parse import quote

import httpx
from django.conf import settings
from django.http import HttpRequest, StreamingHttpResponse

from apps.clusters.models import Cluster, Instance

from . import headers, origins
from .rewrite import LinkRewriter, link_pattern, rewrite_location

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


class UpstreamError(Exception):
    """The UI did not answer usefully; the message is shown on the 502 page."""


@dataclass(frozen=True)
class Target:
    """One UI of one cluster member, and where the portal serves it."""

    cluster_id: int
    hostname: str
    port: int
    address: str
    members: dict[str, str]  # hostnames and addresses (lower case) -> hostname

    @property
    def prefix(self) -> str:
        """This UI's path on the portal, without a trailing slash."""
        return f"{cluster_root_path(self.cluster_id)}/{self.hostname}/{self.port}"


def cluster_root_path(cluster_id: int) -> str:
    return f"/clusters/{cluster_id}/ui"


def ui_ports(cluster: Cluster) -> list[dict]:
    """The version's ports declared as web UIs."""
    return [p for p in cluster.definition.ports or [] if p.get("ui") is True]


def live_instances(cluster: Cluster) -> list[Instance]:
    return list(
        cluster.instances.filter(active=True, address__isnull=False)
        .select_related("address")
        .order_by("role", "index")
    )


def web_uis(cluster: Cluster) -> list[dict]:
    """[{"name", "hostname", "port", "url"}] of every UI of the cluster's placed members. The
    url is the UI's path on the portal, which checks access and sends the browser on to the
    cluster's own UI origin (views.portal_web_ui)."""
    ports = ui_ports(cluster)
    if not ports:
        return []
    root = cluster_root_path(cluster.id)
    return [
        {
            "name": port["name"],
            "hostname": instance.hostname,
            "port": port["port"],
            "url": f"{root}/{instance.hostname}/{port['port']}/",
        }
        for instance in live_instances(cluster)
        for port in ports
        if port["role"] == instance.role
    ]


def find_target(cluster: Cluster, hostname: str, port: int) -> Target | None:
    """The UI at hostname:port of the cluster, or None when there is no such UI."""
    roles = {p["role"] for p in ui_ports(cluster) if p["port"] == port}
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
            return Target(cluster.id, hostname, port, instance.address.ip, members)
    return None


def upstream_url(target: Target, path: str, query: str) -> str:
    # Django hands the path decoded: quote it again, keeping what is legal in a path.
    url = f"http://{target.address}:{target.port}/{quote(path, safe=PATH_SAFE)}"
    return f"{url}?{query}" if query else url


def request_headers(request: HttpRequest) -> dict[str, str]:
    headers = {k: v for k, v in request.headers.items() if k.lower() in FORWARDED_REQUEST_HEADERS}
    # Plain bodies: the rewriter reads HTML and CSS as bytes, and nothing is decoded twice.
    headers["Accept-Encoding"] = "identity"
    return headers


def forward(
    request: HttpRequest, target: Target, path: str, *, sandbox: bool = False
) -> StreamingHttpResponse:
    """Send the request to the UI and stream its answer back, rewritten for the proxy
    (sandbox: the answer is served on the portal's own origin)."""
    timeout = httpx.Timeout(
        settings.PROXY_READ_TIMEOUT, connect=settings.PROXY_CONNECT_TIMEOUT, pool=5
    )
    # trust_env=False: HTTP(S)_PROXY of the portal's environment never sees cluster traffic.
    client = httpx.Client(timeout=timeout, follow_redirects=False, trust_env=False)
    where = f"{target.hostname}:{target.port}"
    try:
        upstream = client.send(
            client.build_request(
                request.method or "GET",
                upstream_url(target, path, request.META.get("QUERY_STRING", "")),
                headers=request_headers(request),
                content=request.body,
            ),
            stream=True,
        )
    except httpx.TimeoutException as error:
        client.close()
        raise UpstreamError(f"{where} did not answer in time ({type(error).__name__})") from None
    except httpx.HTTPError as error:
        client.close()
        raise UpstreamError(f"{where} is not answering: {type(error).__name__}") from None
    try:
        return _response(upstream, client, target, request, sandbox)
    except Exception:
        upstream.close()
        client.close()
        raise


def _response(
    upstream: httpx.Response,
    client: httpx.Client,
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
    content_type = upstream.headers.get("content-type", "").split(";")[0].strip().lower()
    rewriting = content_type in REWRITTEN_TYPES
    if rewriting:
        chunks = LinkRewriter(
            link_pattern(cluster_root_path(target.cluster_id)), target.prefix
        ).rewrite(upstream.iter_bytes())
    else:
        chunks = upstream.iter_raw()
    response = StreamingHttpResponse(
        _closing(chunks, upstream, client, target), status=upstream.status_code
    )
    for name, value in headers.response_headers(
        upstream.headers.multi_items(), rewriting=rewriting, sandbox=sandbox, location=location
    ):
        response.headers[name] = value
    return response


def _closing(
    chunks: Iterator[bytes], upstream: httpx.Response, client: httpx.Client, target: Target
) -> Iterator[bytes]:
    """The body; the upstream connection is closed when the body ends or the client leaves."""
    try:
        yield from chunks
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
        upstream.close()
        client.close()
