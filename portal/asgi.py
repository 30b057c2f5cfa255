"""The portal as an ASGI application (deploy/gunicorn.conf.py serves `application`).

Django's own ASGI handler runs a synchronous middleware's hooks and a synchronous view each in
a trip of its own from the event loop to the request's thread and back: with this project's
middleware that made about 30 trips a request, a quarter of an API call's CPU (bench/api).
Every middleware and view here is synchronous (streams are async iterators a view returns,
sent by the handler on the loop), so `OneTripASGIHandler` runs each request's middleware and
view in one trip instead, as the WSGI handler runs them; an async view would still work
(Django runs it with async_to_sync), holding its thread while it runs.
"""

import os

import django
from asgiref.sync import sync_to_async
from django.core.handlers.asgi import ASGIHandler
from django.http import HttpRequest
from django.http.response import HttpResponseBase

from portal.body_limit import bounded_bodies
from portal.streams import release_connections

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "portal.settings.dev")


class OneTripASGIHandler(ASGIHandler):
    def load_middleware(self, is_async: bool = False) -> None:
        super().load_middleware(is_async=False)  # the synchronous chain, as under WSGI

    async def get_response_async(self, request: HttpRequest) -> HttpResponseBase:
        # thread_sensitive: the request's own thread (ThreadSensitiveContext, per request),
        # the one that later closes the response, and with it its database connection.
        return await sync_to_async(self._respond, thread_sensitive=True)(request)

    def _respond(self, request: HttpRequest) -> HttpResponseBase:
        response = self.get_response(request)
        if response.streaming:  # a stream may last minutes: its connections go back now
            release_connections()
        return response


def django_application() -> OneTripASGIHandler:
    """Django set up, and its HTTP handler (django.core.asgi.get_asgi_application's, with ours)."""
    django.setup(set_prefix=False)
    return OneTripASGIHandler()


def with_websockets(http_application):
    """Django serves HTTP (and lifespan); its handler takes no websocket, so those go to the
    proxy's, which serves them on a cluster's UI host only (Jupyter's kernels)."""
    from apps.proxy import websocket  # after Django is set up

    async def application(scope, receive, send) -> None:
        if scope["type"] == "websocket":
            await websocket.application(scope, receive, send)
        else:
            await http_application(scope, receive, send)

    return application


# Bodies are bounded in front of Django's handler, which reads them whole before any middleware.
application = with_websockets(bounded_bodies(django_application()))
