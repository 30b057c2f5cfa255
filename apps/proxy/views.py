"""The proxy's one view: a cluster member's web UI, for the cluster's owner and staff."""

from urllib.parse import urlsplit

from django.contrib.auth.views import redirect_to_login
from django.http import Http404, HttpRequest, HttpResponseBase, HttpResponseForbidden
from django.shortcuts import get_object_or_404, render
from django.views.decorators.csrf import csrf_exempt

from apps.api.permissions import visible_clusters

from . import services

SAFE_METHODS = {"GET", "HEAD", "OPTIONS"}


# The products' own forms (Spark's "kill" buttons) carry no portal CSRF token, so Django's
# check cannot apply; a write must come from a page on this origin instead (Origin, or
# Referer for browsers that send no Origin), and the session cookie is SameSite=Lax besides.
@csrf_exempt
def web_ui(
    request: HttpRequest, cluster_id: int, hostname: str, port: int, path: str = ""
) -> HttpResponseBase:
    if not request.user.is_authenticated:
        return redirect_to_login(request.build_absolute_uri())
    cluster = get_object_or_404(
        visible_clusters(request.user).select_related("version"), id=cluster_id
    )
    target = services.find_target(cluster, hostname, port)
    if target is None:
        raise Http404("no such web UI")
    if request.method not in SAFE_METHODS and not _same_origin(request):
        return HttpResponseForbidden("writes through the proxy must come from its own pages")
    try:
        return services.forward(request, target, path)
    except services.UpstreamError as error:
        context = {"cluster": cluster, "target": target, "reason": str(error)}
        return render(request, "proxy/unreachable.html", context, status=502)


def _same_origin(request: HttpRequest) -> bool:
    source = request.headers.get("Origin") or request.headers.get("Referer") or ""
    parts = urlsplit(source)
    return f"{parts.scheme}://{parts.netloc}" == f"{request.scheme}://{request.get_host()}"
