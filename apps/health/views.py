from django.http import HttpRequest, JsonResponse
from django.views.decorators.cache import never_cache

from .checks import node_health, portal_checks


@never_cache
def healthz(request: HttpRequest) -> JsonResponse:
    """200 when the portal's database and broker answer, 503 otherwise. Anyone (a load
    balancer) gets only which of them is up; staff also get why one is not, and each node's
    health from the reconciler's last survey. Nodes never decide the status: the portal
    serves with a node down."""
    checks = portal_checks()
    staff = request.user.is_authenticated and request.user.is_staff
    healthy = all(check.ok for check in checks)
    body: dict = {
        "status": "ok" if healthy else "failing",
        "checks": {
            check.name: {"ok": check.ok, **({"detail": check.detail} if staff else {})}
            for check in checks
        },
    }
    if staff:
        body["nodes"] = node_health()
    return JsonResponse(body, status=200 if healthy else 503)
