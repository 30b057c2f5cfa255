"""The admin never shows a secret or digest; the token page creates, shows once, revokes."""

import re

import pytest

from apps.tokens.models import ApiToken
from apps.tokens.services import check_token, issue_token

pytestmark = pytest.mark.django_db


def test_the_admin_lists_tokens_without_secret_or_digest(client, admin_user, alice):
    issued = issue_token(alice, "laptop")
    client.force_login(admin_user)
    listing = client.get("/admin/tokens/apitoken/").content.decode()
    assert issued.token.prefix in listing and "laptop" in listing
    page = client.get(f"/admin/tokens/apitoken/{issued.token.id}/change/").content.decode()
    for page_text in (listing, page):
        assert issued.token.digest not in page_text
        assert issued.secret not in page_text
    assert "digest" not in page


def test_the_admin_issues_a_token_and_shows_it_once(client, admin_user, alice):
    client.force_login(admin_user)
    response = client.post(
        "/admin/tokens/apitoken/add/",
        {
            "user": alice.id,
            "name": "from-admin",
            "read_only": "on",
            "expires_at_0": "",
            "expires_at_1": "",
        },
        follow=True,
    )
    assert response.status_code == 200
    shown = re.search(r"plt_[0-9a-f]{8}_[A-Za-z0-9_-]{43}", response.content.decode())
    assert shown, "the new token is shown in the admin's message"
    token = check_token(shown.group(0))
    assert token.name == "from-admin" and token.read_only and token.user == alice


def test_the_admin_revokes_with_an_action(client, admin_user, alice):
    issued = issue_token(alice, "laptop")
    client.force_login(admin_user)
    client.post(
        "/admin/tokens/apitoken/",
        {"action": "revoke_tokens", "_selected_action": [issued.token.id]},
    )
    assert ApiToken.objects.get(id=issued.token.id).is_revoked


def test_the_page_needs_a_sign_in(client):
    response = client.get("/tokens/")
    assert response.status_code == 302 and "/accounts/login/" in response["Location"]


def test_the_page_creates_shows_once_and_revokes(client, alice, bob):
    client.force_login(alice)
    created = client.post("/tokens/", {"name": "notebook", "expires_in_days": "30"})
    html = created.content.decode()
    secret = re.search(r"plt_[0-9a-f]{8}_[A-Za-z0-9_-]{43}", html).group(0)
    token = check_token(secret)
    assert token.user == alice and token.expires_at is not None
    again = client.get("/tokens/").content.decode()
    assert secret not in again and token.prefix in again

    theirs = issue_token(bob, "bobs").token
    assert client.post(f"/tokens/{theirs.id}/revoke").status_code == 404
    assert client.post(f"/tokens/{token.id}/revoke").status_code == 302
    token.refresh_from_db()
    assert token.is_revoked
