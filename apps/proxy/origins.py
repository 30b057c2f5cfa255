"""Which origin serves which cluster's web UIs.

Cluster N's UIs are served on a host of their own, ``cN.<UI_DOMAIN>`` (c42.ui.example.org;
in development and tests c42.ui.localhost, which browsers resolve to loopback), on the portal's
scheme and port. No two clusters and not the portal share an origin, so a tenant's page can
neither read the portal nor another cluster's UI, and the portal's host-only session cookie
never reaches it. The paths stay those of the portal (/clusters/N/ui/<hostname>/<port>/...),
so a product told its public root (Spark's reverse proxy URL) works on either host.
"""

import re
from urllib.parse import urlsplit

from django.conf import settings
from django.http import HttpRequest
from django.http.request import split_domain_port

# Request methods that change nothing upstream (by the products' own conventions).
SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})


def ui_domain() -> str:
    """The parent domain of the UI hosts, lower case; "" when the site has none."""
    return settings.UI_DOMAIN.strip(".").lower()


def host_of(request: HttpRequest) -> str:
    """The request's host name, lower case, without its port (checked by ALLOWED_HOSTS)."""
    return split_domain_port(request.get_host())[0]


def is_ui_host(host: str) -> bool:
    """True for the UI domain and every name under it: such hosts serve no portal page."""
    domain = ui_domain()
    return bool(domain) and (host == domain or host.endswith("." + domain))


def cluster_of_host(host: str) -> int | None:
    """N for the host cN.<UI_DOMAIN>, else None."""
    domain = ui_domain()
    if not domain:
        return None
    found = re.fullmatch(rf"c([1-9][0-9]{{0,17}})\.{re.escape(domain)}", host)
    return int(found.group(1)) if found else None


def ui_host(cluster_id: int) -> str:
    return f"c{cluster_id}.{ui_domain()}"


def request_origin(request: HttpRequest) -> str:
    """scheme://host[:port] the browser used for this request."""
    return f"{request.scheme}://{request.get_host()}"


def ui_origin(request: HttpRequest, cluster_id: int) -> str:
    """The origin of cluster_id's UIs, as seen from a request to the portal: same scheme and
    port as the portal, host cN.<UI_DOMAIN>."""
    port = split_domain_port(request.get_host())[1]
    return f"{request.scheme}://{ui_host(cluster_id)}" + (f":{port}" if port else "")


def same_origin(request: HttpRequest) -> bool:
    """Whether a write comes from a page of the request's own origin: its Origin header, or
    its Referer for browsers that send no Origin. Neither is a refusal."""
    source = request.headers.get("Origin") or request.headers.get("Referer") or ""
    parts = urlsplit(source)
    return f"{parts.scheme}://{parts.netloc}".lower() == request_origin(request).lower()


def from_another_site_script(request: HttpRequest) -> bool:
    """A request another origin's page made that is not a top-level navigation (fetch,
    <script src>, <img>, an iframe), by the browser's Sec-Fetch-* headers. Sibling UI hosts
    are the same *site*, so SameSite cookies alone would not keep them apart."""
    site = request.headers.get("Sec-Fetch-Site", "")
    if site in ("", "same-origin", "none"):
        return False
    navigating = request.headers.get("Sec-Fetch-Mode") == "navigate"
    document = request.headers.get("Sec-Fetch-Dest", "document") == "document"
    return not (navigating and document and request.method in ("GET", "HEAD"))
