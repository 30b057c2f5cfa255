"""Sign-in protection: lock-out per (username, client address) after N failures on the sign-in
page and the admin's, a clear 429 while locked, unlocked by the cool-off or an admin; password
rules wherever a password is chosen through the portal; the admin site for staff only."""

from datetime import timedelta

import pytest
from axes.models import AccessAttempt
from django.conf import settings

LOGIN = "/accounts/login/"
ADMIN_LOGIN = "/admin/login/"


def sign_in(client, url: str, username: str, password: str, address: str = "127.0.0.1", **extra):
    return client.post(
        url, {"username": username, "password": password}, REMOTE_ADDR=address, **extra
    )


def fail_until_locked(client, url: str, username: str, **extra):
    """N wrong passwords in a row; returns the answer to the last one."""
    for attempt in range(1, settings.AXES_FAILURE_LIMIT + 1):
        response = sign_in(client, url, username, f"wrong-{attempt}", **extra)
        if attempt < settings.AXES_FAILURE_LIMIT:
            assert response.status_code == 200, attempt  # the form again, with its error
    return response


def assert_locked(response) -> None:
    assert response.status_code == 429
    assert b"Too many failed sign-ins" in response.content
    minutes = int(settings.AXES_COOLOFF_TIME.total_seconds() // 60)
    assert f"try again in {minutes} minutes".encode() in response.content
    assert int(response["Retry-After"]) == settings.AXES_COOLOFF_TIME.total_seconds()


def signed_in_as(client) -> str | None:
    response = client.get("/")
    return response.context["user"].username if response.context["user"].is_authenticated else None


def test_it_locks_a_user_out_after_n_failures_and_refuses_even_the_right_password(client, alice):
    assert_locked(fail_until_locked(client, LOGIN, "alice"))
    assert_locked(sign_in(client, LOGIN, "alice", "alice-pass-123"))
    assert signed_in_as(client) is None


def test_the_lock_holds_one_user_at_one_address_only(client, alice, bob):
    fail_until_locked(client, LOGIN, "alice")
    # Another user from the same address, and the same user from elsewhere, sign in.
    assert sign_in(client, LOGIN, "bob", "bob-pass-123").status_code == 302
    client.logout()
    assert sign_in(client, LOGIN, "alice", "alice-pass-123", address="10.9.8.7").status_code == 302


def test_the_lock_lifts_after_the_cool_off(client, alice):
    fail_until_locked(client, LOGIN, "alice")
    long_ago = AccessAttempt.objects.get(username="alice").attempt_time - (
        settings.AXES_COOLOFF_TIME + timedelta(seconds=1)
    )
    AccessAttempt.objects.filter(username="alice").update(attempt_time=long_ago)
    assert sign_in(client, LOGIN, "alice", "alice-pass-123").status_code == 302
    assert signed_in_as(client) == "alice"


def test_a_success_before_the_limit_starts_the_count_again(client, alice):
    for _ in range(settings.AXES_FAILURE_LIMIT - 1):
        sign_in(client, LOGIN, "alice", "wrong")
    assert sign_in(client, LOGIN, "alice", "alice-pass-123").status_code == 302
    client.logout()
    for _ in range(settings.AXES_FAILURE_LIMIT - 1):
        assert sign_in(client, LOGIN, "alice", "wrong").status_code == 200


def test_the_admin_login_locks_too_and_an_admin_lifts_the_lock(client, admin_user, alice):
    alice.is_staff = True
    alice.save()
    assert_locked(fail_until_locked(client, ADMIN_LOGIN, "alice"))
    assert_locked(sign_in(client, ADMIN_LOGIN, "alice", "alice-pass-123"))
    # ... which also holds on the portal's own sign-in page.
    assert_locked(sign_in(client, LOGIN, "alice", "alice-pass-123"))

    client.force_login(admin_user)
    attempts = client.get("/admin/axes/accessattempt/")
    assert attempts.status_code == 200 and b"alice" in attempts.content
    attempt = AccessAttempt.objects.get(username="alice")
    client.post(
        "/admin/axes/accessattempt/",
        {"action": "delete_selected", "_selected_action": [attempt.pk], "post": "yes"},
    )
    assert not AccessAttempt.objects.filter(username="alice").exists()
    client.logout()
    assert sign_in(client, ADMIN_LOGIN, "alice", "alice-pass-123").status_code == 302


def test_behind_a_proxy_the_lock_is_per_forwarded_client_address(client, settings, alice):
    settings.TRUSTED_PROXY_HOPS = 1
    proxy = "10.0.0.1"
    first = {
        "HTTP_X_FORWARDED_FOR": "198.51.100.7, 203.0.113.5"
    }  # the left one is the client's word
    fail_until_locked(client, LOGIN, "alice", address=proxy, **first)
    assert AccessAttempt.objects.get(username="alice").ip_address == "203.0.113.5"
    assert_locked(sign_in(client, LOGIN, "alice", "alice-pass-123", address=proxy, **first))
    other = {"HTTP_X_FORWARDED_FOR": "198.51.100.7, 203.0.113.6"}
    assert (
        sign_in(client, LOGIN, "alice", "alice-pass-123", address=proxy, **other).status_code == 302
    )


@pytest.mark.parametrize("weak", ["alice1234", "12345678", "password", "short1"])
def test_a_new_password_must_pass_the_validators(client, alice, weak):
    client.force_login(alice)
    response = client.post(
        "/accounts/password_change/",
        {"old_password": "alice-pass-123", "new_password1": weak, "new_password2": weak},
    )
    assert response.status_code == 200  # the form again, with the validators' reasons
    assert response.context["form"].errors["new_password2"]
    alice.refresh_from_db()
    assert alice.check_password("alice-pass-123")


def test_an_admin_cannot_give_a_user_a_weak_password_either(client, admin_user):
    client.force_login(admin_user)
    response = client.post(
        "/admin/auth/user/add/",
        {
            "username": "carol",
            "password1": "carol",
            "password2": "carol",
            "usable_password": "true",
        },
    )
    assert response.status_code == 200
    assert "password2" in response.context["adminform"].form.errors


def test_the_admin_site_shows_nothing_to_a_signed_in_user_who_is_not_staff(client, alice):
    client.force_login(alice)
    for url in ("/admin/", "/admin/tokens/apitoken/", "/admin/auth/user/", "/admin/axes/"):
        response = client.get(url, follow=True)
        assert response.redirect_chain[-1][0].startswith(f"{ADMIN_LOGIN}?next="), url
        assert b"You are authenticated as alice, but are not authorized" in response.content
        assert b"alice@example.org" not in response.content
