"""No input makes the API answer 5xx: oversized integers, NUL bytes, bodies too large or
nested too deep each get a 4xx that says what is wrong (a 400 names the field)."""

import io
from typing import Any

import pytest
from django.test import Client, RequestFactory

DIGITS = "9" * 5000


@pytest.fixture
def raw():
    """A client that answers a server error as a 500 instead of raising it in the test."""
    return Client(raise_request_exception=False)


def bearer(tokens, persona: str = "owner") -> dict:
    return {"HTTP_AUTHORIZATION": f"Bearer {tokens[persona]}"}


def launch(raw, tokens, body: dict | str, **headers):
    body = body if isinstance(body, str) else {"product": "demo", "version": "1.0", **body}
    return raw.post(
        "/api/v1/clusters", body, content_type="application/json", **bearer(tokens), **headers
    )


def test_it_refuses_an_integer_option_of_five_thousand_digits(raw, tokens, demo):
    response = launch(raw, tokens, {"size": DIGITS})
    assert response.status_code == 400
    body = response.json()
    assert "size" in body["fields"] and "must be an integer" in body["fields"]["size"]
    assert len(body["fields"]["size"]) < 200  # the value is not echoed back whole


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("reuse_data_from", DIGITS),
        ("reuse_data_from", 2**70),
        ("lease", DIGITS),
        ("lease", 1e300),
        ("size", 2**70),
        ("size", -(2**70)),
    ],
)
def test_it_refuses_numbers_out_of_range_naming_the_field(raw, tokens, demo, field, value):
    response = launch(raw, tokens, {field: value})
    assert response.status_code == 400, response.content
    assert field in response.json()["fields"]


def test_a_lease_beyond_any_date_is_a_400_even_without_a_lease_cap(raw, tokens, demo, settings):
    settings.SCHEDULER_MAX_LEASE_HOURS = 0
    response = launch(raw, tokens, {"lease": 1e300})
    assert response.status_code == 400 and "lease" in response.json()["fields"]


@pytest.mark.parametrize(
    "path",
    [
        "/bigdata/api/v1/products/%00",
        "/api/v1/products/%00/1.0",
        "/api/v1/clusters/a%00b/demo/1.0/1",
        "/bigdata/api/v1/clusters/%00",
    ],
)
def test_a_nul_byte_in_the_path_is_a_400(raw, tokens, demo, path):
    response = raw.get(path, **bearer(tokens))
    assert response.status_code == 400
    assert "NUL" in response.json()["message"]


def test_an_anonymous_nul_byte_in_the_path_is_a_400(raw, demo):
    response = raw.get("/bigdata/api/v1/products/%00")
    assert response.status_code == 400 and response.json()["status"] == 400


def test_a_nul_byte_in_the_query_is_a_400_naming_the_parameter(raw, tokens, demo):
    response = raw.get("/api/v1/products?x=%00", **bearer(tokens))
    assert response.status_code == 400
    assert response.json()["fields"] == {"x": "contains a NUL byte"}


@pytest.mark.parametrize("header", ["HTTP_AUTHORIZATION", "HTTP_X_AUTH_TOKEN"])
def test_a_nul_byte_in_a_token_is_a_401(raw, demo, header):
    value = "Bearer plt_\x00abc" if header == "HTTP_AUTHORIZATION" else "plt_\x00abc"
    path = "/api/v1/products" if header == "HTTP_AUTHORIZATION" else "/bigdata/api/v1/products"
    assert raw.get(path, **{header: value}).status_code == 401


def test_a_body_over_the_limit_is_a_413(raw, tokens, demo, settings):
    settings.DATA_UPLOAD_MAX_MEMORY_SIZE = 10_000
    response = launch(raw, tokens, {"name": "x" * 20_000})
    assert response.status_code == 413
    assert "10000 bytes" in response.json()["message"]


def test_a_cesga_body_over_the_limit_is_a_413(raw, tokens, demo, settings):
    settings.DATA_UPLOAD_MAX_MEMORY_SIZE = 10_000
    response = raw.post(
        "/bigdata/api/v1/products/demo/1.0",
        "{" + " " * 20_000 + "}",
        content_type="application/json",
        HTTP_X_AUTH_TOKEN=tokens["owner"],
    )
    assert response.status_code == 413 and response.json()["error"] == "payload too large"


def test_a_chunked_body_is_held_to_the_same_limit(settings):
    """A server that hands chunked bodies through (gunicorn: wsgi.input_terminated) gives no
    Content-Length: the middleware reads at most the limit and refuses the rest."""
    from portal.limits import RequestLimitsMiddleware

    settings.DATA_UPLOAD_MAX_MEMORY_SIZE = 100
    seen = []
    middleware = RequestLimitsMiddleware(lambda request: seen.append(request.body) or "passed")

    def chunked(body: bytes):
        environ: dict[str, Any] = {"wsgi.input": io.BytesIO(body), "wsgi.input_terminated": True}
        request = RequestFactory().generic(
            "POST", "/api/v1/clusters", b"", content_type="application/json", **environ
        )
        request.META.pop("CONTENT_LENGTH", None)
        request._stream = io.BytesIO(body)  # as WSGIRequest sets it for a terminated input
        return middleware(request)

    assert chunked(b"{}" + b" " * 90) == "passed" and seen == [b"{}" + b" " * 90]
    refused = chunked(b"{}" + b" " * 200)
    assert refused.status_code == 413 and len(seen) == 1


def test_json_nested_too_deep_is_a_400(raw, tokens, demo):
    response = launch(raw, tokens, "[" * 100_000 + "]" * 100_000)
    assert response.status_code == 400
    assert "JSON" in response.json()["message"]
