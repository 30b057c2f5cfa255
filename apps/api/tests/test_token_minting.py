"""POST /api/v1/tokens with a token: the new token never outlives the one the request uses,
so a leaked short-lived token cannot be turned into a permanent one. A signed-in browser
session keeps every choice (it is the person, not a token)."""

from datetime import timedelta

import pytest
from django.utils import timezone

from apps.tokens.models import ApiToken
from apps.tokens.services import issue_token

from .conftest import bearer

pytestmark = pytest.mark.django_db


@pytest.fixture
def short_lived(alice):
    """A token of alice's that expires in a day (the kind a CI job is given, and leaks)."""
    return issue_token(alice, "ci", expires_in_days=1)


@pytest.mark.parametrize("asked", [{}, {"expires_in_days": None}, {"expires_in_days": 30}])
def test_a_token_cannot_mint_one_that_outlives_it(short_lived, asked):
    before = ApiToken.objects.count()

    response = bearer(short_lived.secret).post(
        "/api/v1/tokens", {"name": "forever", **asked}, format="json"
    )

    assert response.status_code == 400
    body = response.json()
    assert body["error"] == "token_outlives_its_maker"
    assert short_lived.token.expires_at.isoformat() in body["message"]
    assert "expires_in_days at most 1.000" in body["fields"]["expires_in_days"]
    assert ApiToken.objects.count() == before


def test_a_token_mints_one_that_expires_no_later(short_lived):
    response = bearer(short_lived.secret).post(
        "/api/v1/tokens", {"name": "child", "expires_in_days": 0.5}, format="json"
    )

    assert response.status_code == 201
    child = ApiToken.objects.get(id=response.json()["id"])
    assert child.expires_at <= short_lived.token.expires_at
    assert bearer(response.json()["token"]).get("/api/v1/quota").status_code == 200


def test_a_minted_token_passes_the_limit_on(short_lived):
    child = bearer(short_lived.secret).post(
        "/api/v1/tokens", {"name": "child", "expires_in_days": 0.5}, format="json"
    )

    grandchild = bearer(child.json()["token"]).post(
        "/api/v1/tokens", {"name": "grandchild", "expires_in_days": 0.9}, format="json"
    )

    assert grandchild.status_code == 400
    assert grandchild.json()["error"] == "token_outlives_its_maker"


def test_a_nearly_expired_token_names_a_limit_of_zero(alice):
    dying = issue_token(alice, "dying", expires_in_days=1)
    ApiToken.objects.filter(id=dying.token.id).update(
        expires_at=timezone.now() + timedelta(seconds=30)
    )

    response = bearer(dying.secret).post(
        "/api/v1/tokens", {"name": "x", "expires_in_days": 0.01}, format="json"
    )

    assert response.status_code == 400
    assert "expires_in_days at most 0.000" in response.json()["message"]


def test_a_token_without_expiry_still_mints_any(alice):
    forever = issue_token(alice, "forever")

    response = bearer(forever.secret).post("/api/v1/tokens", {"name": "also"}, format="json")

    assert response.status_code == 201 and response.json()["expires_at"] is None


def test_a_signed_in_session_keeps_every_choice(client, alice):
    client.force_login(alice)

    response = client.post("/api/v1/tokens", {"name": "laptop"}, content_type="application/json")

    assert response.status_code == 201 and response.json()["expires_at"] is None
