"""Requests for a UI host (cN.<UI_DOMAIN>) go to the proxy's own URLconf and nothing else: no
portal page, API, admin or static file is ever served on a tenant's origin."""

from collections.abc import Callable

from django.http import HttpRequest, HttpResponseBase, HttpResponseNotFound

from . import origins

HOST_URLCONF = "apps.proxy.host_urls"


class UIHostMiddleware:
    def __init__(self, get_response: Callable[[HttpRequest], HttpResponseBase]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponseBase:
        host = origins.host_of(request)  # DisallowedHost (400) for a host ALLOWED_HOSTS lacks
        if origins.is_ui_host(host):
            if origins.cluster_of_host(host) is None:
                return HttpResponseNotFound("Not found", content_type="text/plain")
            request.urlconf = HOST_URLCONF
        return self.get_response(request)
