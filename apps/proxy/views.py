"""The proxy's views: a cluster member's web UI, for the cluster's owner and staff.

On the portal's host, portal_web_ui checks access with the portal's session and sends the
browser to the cluster's own UI host for a one-time ticket (or, only where the site allows
it, serves the UI right there, sandboxed): bind_browser gives the browser a nonce there,
issue_ticket on the portal mints a ticket bound to it (apps.proxy.tickets says how), and
redeem_ticket turns the ticket into that host's cookie; ui_host_web_ui serves the UI to the
cookie's user.
"""

from urllib.parse import quote, urlencode

from django.conf import settings
from django.contrib.auth import get_user_model
from django.contrib.auth.views import redirect_to_login
from django.http import (
    Http404,
    HttpRequest,
    HttpResponse,
    HttpResponseBase,
    HttpResponseNotAllowed,
    HttpResponseRedirect,
)
from django.shortcuts import get_object_or_404, render
from django.urls import reverse
from django.views.decorators.csrf import csrf_exempt
from django.views.decorators.http import require_safe

from apps.clusters import idle
from apps.clusters.models import Cluster
from portal import streams

from . import origins, services, tickets


def portal_web_ui(
    request: HttpRequest, cluster_id: int, hostname: str, port: int, path: str = ""
) -> HttpResponseBase:
    if not request.user.is_authenticated:
        return redirect_to_login(request.build_absolute_uri())
    cluster, target = _find(request.user, cluster_id, hostname, port)
    if origins.ui_domain():
        if request.method not in ("GET", "HEAD"):
            return HttpResponseNotAllowed(["GET", "HEAD"])
        # Only a navigation gets a ticket: a script's fetch would only carry it elsewhere.
        if request.headers.get("Sec-Fetch-Mode", "navigate") != "navigate":
            return _message(request, "Open web UIs from a link, not from a script.", 403)
        return HttpResponseRedirect(_bind_url(request, cluster.id))
    if settings.PROXY_ON_PORTAL_ORIGIN:
        # Sandboxed pages post with "Origin: null" and no portal CSRF token: read-only.
        if request.method not in origins.SAFE_METHODS and not origins.same_origin(request):
            return _message(request, "Writes to a web UI must come from its own pages.", 403)
        return _serve(request, cluster, target, path, sandbox=True, user_id=request.user.pk)
    return _message(
        request,
        "This site serves no web UIs: its administrator has not set PLATTER_UI_DOMAIN.",
        404,
    )


def _bind_url(request: HttpRequest, cluster_id: int) -> str:
    state = tickets.request_state(
        request.user,  # type: ignore[arg-type]  # signed in: checked by the caller
        cluster_id,
        origins.ui_host(cluster_id),
        request.get_full_path(),
        origins.request_origin(request),
    )
    return f"{origins.ui_origin(request, cluster_id)}{tickets.BIND_PATH}?s={quote(state)}"


EXPIRED = (
    "This link to a web UI has expired, was used already or was opened in another browser: "
    "open the UI again from its cluster page."
)


@require_safe
def bind_browser(request: HttpRequest) -> HttpResponseBase:
    """On a UI host: give the browser its nonce and send it back to the portal for a ticket
    bound to it."""
    host = origins.host_of(request)
    cluster_id = origins.cluster_of_host(host)
    state = request.GET.get("s", "")
    asked = tickets.read_state(state, host, cluster_id) if cluster_id is not None else None
    if asked is None:
        return _message(request, EXPIRED, 404)
    nonce = tickets.browser_nonce(request)
    path = reverse("proxy:ticket", args=[asked.cluster_id], urlconf=settings.ROOT_URLCONF)
    query = urlencode({"s": state, "b": tickets.binding_of(nonce)})
    response = HttpResponseRedirect(f"{asked.portal_origin}{path}?{query}")
    tickets.set_bind_cookie(response, nonce)
    response["Cache-Control"] = "no-store"
    response["Referrer-Policy"] = "no-referrer"
    return response


@require_safe
def issue_ticket(request: HttpRequest, cluster_id: int) -> HttpResponseBase:
    """On the portal: the session's user, the same the state names, gets a ticket bound to the
    nonce whose hash the UI host sent along."""
    asked = tickets.read_state(request.GET.get("s", ""), origins.ui_host(cluster_id), cluster_id)
    binding = request.GET.get("b", "")
    if asked is None or not tickets.is_binding(binding):
        return _message(request, EXPIRED, 404)
    if not request.user.is_authenticated:
        return redirect_to_login(asked.next_path)  # back to the UI's path once signed in
    if asked.user_id != request.user.pk:
        return _message(request, "This link to a web UI was made for someone else.", 403)
    if request.headers.get("Sec-Fetch-Mode", "navigate") != "navigate":
        return _message(request, "Open web UIs from a link, not from a script.", 403)
    get_object_or_404(Cluster.objects.visible_to(request.user), id=cluster_id)
    ticket = tickets.mint_ticket(
        request.user,
        cluster_id,
        origins.ui_host(cluster_id),
        asked.next_path,
        asked.portal_origin,
        binding,
    )
    response = HttpResponseRedirect(
        f"{origins.ui_origin(request, cluster_id)}{tickets.TICKET_PATH}?t={quote(ticket)}"
    )
    response["Cache-Control"] = "no-store"
    return response


@require_safe
def redeem_ticket(request: HttpRequest) -> HttpResponseBase:
    host = origins.host_of(request)
    cluster_id = origins.cluster_of_host(host)
    ticket = user = None
    if cluster_id is not None:
        nonce = request.COOKIES.get(tickets.bind_cookie_name(), "")
        ticket = tickets.redeem_ticket(request.GET.get("t", ""), host, cluster_id, nonce)
    if ticket is not None:
        user = get_user_model().objects.filter(pk=ticket.user_id, is_active=True).first()
    if ticket is None or user is None:
        return _message(request, EXPIRED, 404)
    response = HttpResponseRedirect(ticket.next_path)  # a path on this same host
    tickets.set_cookie(
        response, tickets.cookie_value(user, ticket.cluster_id, host, ticket.portal_origin)
    )
    response["Cache-Control"] = "no-store"
    response["Referrer-Policy"] = "no-referrer"  # the ticket stays out of the next Referer
    return response


# The products' own forms (Spark's "kill" links, the YARN UI) carry no portal CSRF token and
# need none: a UI host's requests carry only that cluster's cookie, so the portal cannot be
# reached through them, and a write must come from a page of this same origin (not a
# sibling cluster's, which is the same *site*: SameSite alone would let it through).
@csrf_exempt
def ui_host_web_ui(
    request: HttpRequest, cluster_id: int, hostname: str, port: int, path: str = ""
) -> HttpResponseBase:
    host = origins.host_of(request)
    if origins.cluster_of_host(host) != cluster_id:
        raise Http404("another cluster's UI")
    if origins.from_another_site_script(request):
        return _message(request, "Another site's page may not use this web UI.", 403)
    if request.headers.get("Service-Worker") == "script":
        return _message(request, "Web UIs may not install service workers.", 403)
    grant = tickets.grant_of(request, host, cluster_id)
    if grant is None:
        portal = tickets.portal_of(request, host, cluster_id) or settings.PORTAL_URL
        if request.method in ("GET", "HEAD") and portal:
            # Back to the portal for a new ticket (it checks the session again).
            return HttpResponseRedirect(portal.rstrip("/") + request.get_full_path())
        return _message(request, "Open this web UI from its cluster page on the portal.", 403)
    cluster, target = _find(grant.user, cluster_id, hostname, port)
    if request.method not in origins.SAFE_METHODS and not origins.same_origin(request):
        return _message(request, "Writes to a web UI must come from its own pages.", 403)
    return _serve(
        request,
        cluster,
        target,
        path,
        sandbox=False,
        portal=grant.portal_origin,
        user_id=grant.user.pk,
    )


def _find(user, cluster_id: int, hostname: str, port: int) -> tuple[Cluster, services.Target]:
    """The cluster (if the user may see it) and its UI, or 404."""
    visible = Cluster.objects.visible_to(user).select_related("version")
    cluster = get_object_or_404(visible, id=cluster_id)
    target = services.find_target(cluster, hostname, port)
    if target is None:
        raise Http404("no such web UI")
    return cluster, target


def _serve(
    request: HttpRequest,
    cluster: Cluster,
    target: services.Target,
    path: str,
    *,
    sandbox: bool,
    portal: str = "",
    user_id: int | None = None,
) -> HttpResponseBase:
    idle.record_request(cluster.id, f"its web UI {target.hostname}:{target.port} was opened")
    try:
        return services.forward(request, target, path, sandbox=sandbox, user_id=user_id)
    except streams.TooManyStreams as error:  # the user's open streams, counted per user
        return _message(request, str(error), 429)
    except services.UpstreamError as error:
        page = portal + reverse("web:cluster", args=[cluster.id], urlconf=settings.ROOT_URLCONF)
        context = {"cluster": cluster, "target": target, "reason": str(error), "page": page}
        return render(request, "proxy/unreachable.html", context, status=502)


def _message(request: HttpRequest, text: str, status: int) -> HttpResponse:
    """A one-line page that needs nothing of the portal's (it may be on a UI host)."""
    return render(request, "proxy/message.html", {"text": text}, status=status)
