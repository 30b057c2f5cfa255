"""Django-level 404s (no URL matched) under the API prefixes answer the API's JSON error
body instead of the HTML page, so clients parse every answer the same way."""

from django.http import HttpRequest, HttpResponse, JsonResponse
from django.views import defaults

API_PREFIXES = ("/api/", "/bigdata/api/")


def not_found(request: HttpRequest, exception: Exception) -> HttpResponse:
    if request.path.startswith(API_PREFIXES):
        error = "not found" if request.path.startswith("/bigdata/") else "not_found"
        body = {"status": 404, "error": error, "message": "no such path"}
        return JsonResponse(body, status=404)
    return defaults.page_not_found(request, exception)
