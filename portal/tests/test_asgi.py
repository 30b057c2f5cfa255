"""portal.asgi's handler runs a request's middleware and view in one trip from the event loop
to the request's thread (Django's made one a hook, about 30 for an API call: bench/api), and a
streaming answer gives its database connection back before its body."""

import asyncio
from inspect import iscoroutinefunction

import pytest
from asgiref.sync import SyncToAsync
from django.db import connection
from django.http import HttpResponse, StreamingHttpResponse
from django.test import RequestFactory

from apps.api.tests.conftest import token_for
from portal.asgi import OneTripASGIHandler, application
from portal.asgi_probe import asgi_get


def test_the_middleware_chain_is_synchronous():
    assert not iscoroutinefunction(OneTripASGIHandler()._middleware_chain)


@pytest.mark.django_db(transaction=True)
def test_an_api_call_takes_three_trips_to_a_thread(alice, monkeypatch):
    trips = []
    original = SyncToAsync.__call__

    async def counted(self, *args, **kwargs):
        trips.append(getattr(self.func, "__name__", repr(self.func)))
        return await original(self, *args, **kwargs)

    monkeypatch.setattr(SyncToAsync, "__call__", counted)
    headers = {"Authorization": f"Bearer {token_for(alice)}"}
    status, sent_headers, body = asyncio.run(asgi_get(application, "/api/v1/clusters", headers))
    assert status == 200 and body.startswith(b'{"count":0,')
    assert b"X-Request-ID" in sent_headers  # the whole middleware chain ran
    # request_started's receivers, the middleware and view, the response's close.
    assert len(trips) == 3, trips


@pytest.mark.django_db(transaction=True)
def test_a_stream_gives_its_connection_back_before_its_body():
    handler = OneTripASGIHandler()

    def answer(body):
        def get_response(request):
            connection.ensure_connection()  # the view read the database
            return body

        return get_response

    handler.get_response = answer(StreamingHttpResponse(iter([b"line\n"])))
    handler._respond(RequestFactory().get("/"))
    assert connection.connection is None
    handler.get_response = answer(HttpResponse(b"done"))
    handler._respond(RequestFactory().get("/"))
    assert connection.connection is not None  # a plain answer keeps it to the request's end
