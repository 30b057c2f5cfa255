from django.http import HttpRequest, HttpResponse
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_GET
from prometheus_client import CONTENT_TYPE_LATEST

from .access import bearer_token, may_scrape
from .collector import exposition


@require_GET
@never_cache
def metrics(request: HttpRequest) -> HttpResponse:
    """Prometheus text format for staff or a scraper with PLATTER_METRICS_TOKEN; no data to
    anyone else (401 without credentials or with a wrong token, 403 for a signed-in user)."""
    if may_scrape(request):
        return HttpResponse(exposition(), content_type=CONTENT_TYPE_LATEST)
    if request.user.is_authenticated and bearer_token(request) is None:
        return HttpResponse("staff only\n", status=403, content_type="text/plain")
    response = HttpResponse("credentials needed\n", status=401, content_type="text/plain")
    response["WWW-Authenticate"] = 'Bearer realm="metrics"'
    return response
