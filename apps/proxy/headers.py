"""The response headers a proxied UI answer carries: what of the upstream's passes, and the
policy the portal adds. A transport (sync or async) hands the upstream's headers to
response_headers() and sets what it returns."""

from collections.abc import Iterable, Sequence

# Response headers never passed back: hop-by-hop ones (RFC 9110 7.6.1); cookies (the UI
# host's only cookie is the portal's); policies the portal sets itself; and headers that act
# on the browser beyond the page: Refresh (a redirect no Location check sees),
# Clear-Site-Data (wipes the origin's cookies and storage), Service-Worker-Allowed (a worker
# scope above its script's path), Alt-Svc (the origin's traffic to another host), and the
# reporting headers (reports sent to an address of the UI's choice).
DROPPED_RESPONSE_HEADERS = frozenset(
    {
        "connection",
        "keep-alive",
        "proxy-authenticate",
        "proxy-authorization",
        "proxy-connection",
        "te",
        "trailer",
        "transfer-encoding",
        "upgrade",
        "set-cookie",
        "set-cookie2",
        "content-security-policy",
        "content-security-policy-report-only",
        "strict-transport-security",
        "x-frame-options",
        "cache-control",
        "location",
        "refresh",
        "clear-site-data",
        "service-worker-allowed",
        "alt-svc",
        "nel",
        "report-to",
        "reporting-endpoints",
        "cross-origin-resource-policy",
    }
)

# The products' pages use inline scripts and styles (Spark sets its UI root in one) and eval
# (jQuery plugins): allowed, but everything they load, fetch, post or frame stays on this
# origin, which is the cluster's own, so a proxied page cannot pull code from or send data
# to anywhere else, the portal and other clusters included.
PROXIED_POLICY = {
    "default-src": "'self'",
    "script-src": "'self' 'unsafe-inline' 'unsafe-eval'",
    "style-src": "'self' 'unsafe-inline'",
    "img-src": "'self' data: blob:",
    "font-src": "'self' data:",
    "connect-src": "'self'",
    "worker-src": "'self' blob:",
    "object-src": "'none'",
    "base-uri": "'self'",
    "form-action": "'self'",
    "frame-ancestors": "'self'",
}
# On the portal's own origin (PROXY_ON_PORTAL_ORIGIN): an opaque origin for the page's
# scripts, so they cannot use the portal's session at all.
SANDBOX = "sandbox allow-scripts allow-forms allow-popups allow-downloads"


def proxied_policy(upstream: Sequence[str] = (), sandbox: bool = False) -> str:
    """The Content-Security-Policy of a proxied response: ours, plus the UI's own (Spark 4
    sends a strict one with nonces) as a second policy, which browsers enforce as well; its
    report-uri/report-to go, so violation reports never leave for an address of its choice."""
    policy = "; ".join(f"{name} {value}" for name, value in PROXIED_POLICY.items())
    policies = [f"{policy}; {SANDBOX}" if sandbox else policy]
    for value in upstream:
        for one in value.split(","):
            kept = [
                d.strip()
                for d in one.split(";")
                if d.strip() and d.split()[0].lower() not in ("report-uri", "report-to")
            ]
            if kept:
                policies.append("; ".join(kept))
    return ", ".join(policies)


def response_headers(
    upstream: Iterable[tuple[str, str]], *, rewriting: bool, sandbox: bool, location: str | None
) -> list[tuple[str, str]]:
    """The headers of the proxied response, from the upstream's (name, value) pairs.

    rewriting: the body is rewritten (its length and encoding change); location: the
    Location already checked by rewrite_location, or None for none."""
    items = list(upstream)
    named = {
        token.strip().lower()
        for name, value in items
        if name.lower() == "connection"
        for token in value.split(",")
    }
    kept = []
    for name, value in items:
        lower = name.lower()
        if lower in DROPPED_RESPONSE_HEADERS or lower in named:
            continue
        if lower.startswith("access-control-"):
            continue  # CORS grants for other origins: none
        if rewriting and lower in ("content-length", "content-encoding"):
            continue  # the body changes length, and it is read decoded
        kept.append((name, value))
    if location is not None:
        kept.append(("Location", location))
    policies = [v for n, v in items if n.lower() == "content-security-policy"]
    kept.append(("Content-Security-Policy", proxied_policy(policies, sandbox)))
    # No other origin (a sibling cluster's page included) may embed what the UI serves.
    kept.append(("Cross-Origin-Resource-Policy", "same-origin"))
    # Pages of one user's cluster: no shared cache keeps them.
    kept.append(("Cache-Control", "private, no-cache"))
    return kept
