"""Who may scrape /metrics: staff, or a scraper with the token; nobody else sees data."""

import pytest

from .conftest import parse

pytestmark = pytest.mark.django_db

TOKEN = "scrape-" + "x" * 40


@pytest.fixture(autouse=True)
def metrics_token(settings):
    settings.METRICS_TOKEN = TOKEN


def assert_no_data(response) -> None:
    assert b"platter_" not in response.content


def test_it_asks_anonymous_callers_for_credentials(client):
    response = client.get("/metrics")
    assert response.status_code == 401
    assert response["WWW-Authenticate"] == 'Bearer realm="metrics"'
    assert_no_data(response)


def test_it_refuses_a_signed_in_user_who_is_not_staff(client, alice):
    client.force_login(alice)
    response = client.get("/metrics")
    assert response.status_code == 403
    assert_no_data(response)


def test_it_refuses_a_wrong_token(client):
    response = client.get("/metrics", HTTP_AUTHORIZATION="Bearer " + TOKEN[:-1] + "y")
    assert response.status_code == 401
    assert_no_data(response)


def test_it_refuses_every_token_when_none_is_configured(client, settings):
    settings.METRICS_TOKEN = ""
    for given in ("", " ", TOKEN):
        response = client.get("/metrics", HTTP_AUTHORIZATION=f"Bearer {given}")
        assert response.status_code == 401
        assert_no_data(response)


def test_it_serves_staff(client, admin_user):
    client.force_login(admin_user)
    response = client.get("/metrics")
    assert response.status_code == 200
    assert response["Content-Type"].startswith("text/plain; version=")
    assert "no-cache" in response["Cache-Control"]
    assert ("platter_clusters", (("state", "running"),)) in parse(response.content.decode())


def test_it_serves_a_scraper_with_the_token(client):
    response = client.get("/metrics", HTTP_AUTHORIZATION=f"Bearer {TOKEN}")
    assert response.status_code == 200
    assert ("platter_admission_queue_length", ()) in parse(response.content.decode())


def test_it_only_answers_get(client, admin_user):
    client.force_login(admin_user)
    assert client.post("/metrics").status_code == 405
