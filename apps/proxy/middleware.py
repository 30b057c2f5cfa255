"""With PROXY_ORIGIN set, web UIs and the portal never share an origin: the UI host serves
only proxy paths, and the portal's own host serves none."""

import re
from urllib.parse import urlsplit

from django.conf import settings
from django.http import HttpRequest, HttpResponse, HttpResponseNotFound

PROXY_PATH = re.compile(r"^/clusters/\d+/ui/")


class SeparateOriginMiddleware:
    def __init__(self, get_response) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        if settings.PROXY_ORIGIN:
            on_ui_host = request.get_host() == urlsplit(settings.PROXY_ORIGIN).netloc
            if on_ui_host != bool(PROXY_PATH.match(request.path_info)):
                return HttpResponseNotFound("Not found")
        return self.get_response(request)
