from django.http import HttpRequest, JsonResponse
from django.views.decorators.cache import never_cache

from .checks import run_all


@never_cache
def healthz(request: HttpRequest) -> JsonResponse:
    """200 when every dependency answers, 503 otherwise; the body says which failed."""
    checks = run_all()
    healthy = all(check.ok for check in checks)
    body = {
        "status": "ok" if healthy else "failing",
        "checks": {check.name: {"ok": check.ok, "detail": check.detail} for check in checks},
    }
    return JsonResponse(body, status=200 if healthy else 503)
