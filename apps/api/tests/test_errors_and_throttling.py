"""The shared error body, and 429 with Retry-After per user and per token."""

import pytest
from rest_framework.test import APIClient
from rest_framework.throttling import SimpleRateThrottle

from .conftest import bearer, token_for


@pytest.fixture
def low_rates(monkeypatch):
    """Small budgets so a test can run out of them."""
    rates = {"anon": "3/min", "user": "4/min", "token": "2/min"}
    monkeypatch.setattr(SimpleRateThrottle, "THROTTLE_RATES", rates)
    return rates


def test_a_token_is_throttled_on_its_own_budget(alice, low_rates):
    first, second = bearer(token_for(alice)), bearer(token_for(alice))
    assert [first.get("/api/v1/quota").status_code for _ in range(2)] == [200, 200]
    refused = first.get("/api/v1/quota")
    assert refused.status_code == 429
    assert int(refused["Retry-After"]) > 0
    body = refused.json()
    assert body["status"] == 429 and body["error"] == "throttled" and body["retry_after"] > 0
    # Another token of the same user has its own budget, within the user's 4/min (the refused
    # request counted against the user too: only throttles that allow a request record it).
    assert second.get("/api/v1/quota").status_code == 200
    assert second.get("/api/v1/quota").status_code == 429


def test_a_user_is_throttled_across_tokens_and_session(alice, low_rates):
    browser = APIClient()
    browser.force_login(alice)
    assert all(browser.get("/api/v1/quota").status_code == 200 for _ in range(4))
    assert browser.get("/api/v1/quota").status_code == 429
    assert bearer(token_for(alice)).get("/api/v1/quota").status_code == 429


def test_anonymous_callers_are_throttled_by_address(catalog, low_rates):
    # Only open endpoints get that far: elsewhere the 401 comes before any throttle.
    codes = [APIClient().get("/bigdata/api/v1/products/demo").status_code for _ in range(4)]
    assert codes == [200, 200, 200, 429]


def test_errors_share_one_body():
    response = APIClient().get("/api/v1/clusters")
    assert response.status_code == 401
    assert response["WWW-Authenticate"] == 'Bearer realm="api"'
    assert response.json() == {
        "status": 401,
        "error": "not_authenticated",
        "message": "Authentication credentials were not provided.",
    }


@pytest.mark.parametrize(
    "header, message",
    [
        ("Bearer nonsense", "please provide a valid authentication token"),
        ("Bearer plt_00000000_xyz", "please provide a valid authentication token"),
        ("Bearer a b", "the Authorization header must be 'Bearer <token>'"),
    ],
)
def test_bad_tokens_answer_401(db, header, message):
    response = APIClient().get("/api/v1/quota", HTTP_AUTHORIZATION=header)
    assert response.status_code == 401
    assert response.json()["message"] == message
    assert response.json()["error"] == "token_invalid"


def test_expired_and_revoked_tokens_say_why(api):
    expired = api("expired").get("/api/v1/quota").json()
    assert (expired["error"], expired["message"]) == ("token_expired", "token has expired")
    assert api("revoked").get("/api/v1/quota").json()["error"] == "token_invalid"


def test_unknown_paths_and_objects_answer_404_with_the_body(api):
    body = api("owner").get("/api/v1/clusters/999999").json()
    assert body["status"] == 404 and body["error"] == "not_found"


def test_the_schema_and_docs_are_served_without_a_cdn(api, client):
    schema = api("owner").get("/api/v1/schema/", HTTP_ACCEPT="application/vnd.oai.openapi+json")
    assert schema.status_code == 200
    assert "/api/v1/clusters/{id}" in schema.json()["paths"]
    docs = api("owner").get("/api/v1/docs/")
    assert docs.status_code == 200
    html = docs.content.decode()
    assert "drf_spectacular_sidecar/swagger-ui-dist" in html
    assert "cdn" not in html.lower() and "unpkg" not in html.lower()
    assert api("owner").get("/api/v1/redoc/").status_code == 200
