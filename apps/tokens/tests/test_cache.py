"""Tokens found valid are kept a few seconds in the process (apps/tokens/cache.py): a second
call costs no query, and what must stop a token still stops it: its expiry to the second;
a revocation or a change of its user in this process at once; one elsewhere (another web
worker, seen here as a write that sends no signal) within TOKEN_CACHE_SECONDS."""

from datetime import timedelta

import pytest
from django.contrib.auth import get_user_model
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone
from rest_framework.test import APIClient

from apps.tokens import cache
from apps.tokens.models import ApiToken
from apps.tokens.services import TokenExpired, TokenInvalid, check_token, issue_token, revoke

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def fresh_cache(settings):
    settings.TOKEN_CACHE_SECONDS = 5
    cache.clear()
    yield
    cache.clear()


@pytest.fixture
def clock(monkeypatch):
    """The cache's clock, moved by hand: clock.now += 6."""

    class Clock:
        now = 1000.0

    monkeypatch.setattr(cache.time, "monotonic", lambda: Clock.now)
    return Clock


def queries_of(call) -> int:
    with CaptureQueriesContext(connection) as captured:
        call()
    return len(captured.captured_queries)


def test_a_second_call_within_the_seconds_reads_nothing(alice):
    secret = issue_token(alice, "laptop").secret
    assert queries_of(lambda: check_token(secret)) == 2  # the token, its last use written
    assert queries_of(lambda: check_token(secret)) == 0
    assert check_token(secret).user == alice


def test_the_exact_secret_is_needed_to_find_an_entry(alice):
    secret = issue_token(alice, "laptop").secret
    check_token(secret)
    other = secret[:-1] + ("A" if secret[-1] != "A" else "B")
    with pytest.raises(TokenInvalid):
        check_token(other)


def test_a_revoked_token_stops_at_once_in_this_process(alice):
    issued = issue_token(alice, "laptop")
    check_token(issued.secret)
    assert revoke(issued.token.id)
    with pytest.raises(TokenInvalid, match="revoked"):
        check_token(issued.secret)


def test_revoked_elsewhere_it_stops_within_the_seconds(alice, clock):
    issued = issue_token(alice, "laptop")
    check_token(issued.secret)
    # Another process revokes it: no signal reaches this one.
    ApiToken.objects.filter(id=issued.token.id).update(revoked_at=timezone.now())
    clock.now += 4.9
    assert check_token(issued.secret).id == issued.token.id
    clock.now += 0.2
    with pytest.raises(TokenInvalid, match="revoked"):
        check_token(issued.secret)


def test_an_expiry_holds_to_the_second_cached_or_not(alice, monkeypatch):
    issued = issue_token(alice, "short", expires_in_days=1)
    check_token(issued.secret)
    later = issued.token.expires_at + timedelta(seconds=1)
    monkeypatch.setattr(timezone, "now", lambda: later)
    with pytest.raises(TokenExpired):
        check_token(issued.secret)


def test_a_user_deactivated_or_demoted_here_is_seen_at_once(alice, bob):
    staff = get_user_model().objects.create_user("carol", is_staff=True)
    promoted = issue_token(staff, "admin").secret
    assert check_token(promoted).user.is_staff
    staff.is_staff = False
    staff.save()
    assert not check_token(promoted).user.is_staff

    secret = issue_token(alice, "laptop").secret
    check_token(secret)
    alice.is_active = False
    alice.save()
    with pytest.raises(TokenInvalid):
        check_token(secret)


def test_a_user_deactivated_elsewhere_is_seen_within_the_seconds(alice, clock):
    secret = issue_token(alice, "laptop").secret
    check_token(secret)
    get_user_model().objects.filter(id=alice.id).update(is_active=False)
    assert check_token(secret)
    clock.now += 5
    with pytest.raises(TokenInvalid):
        check_token(secret)


def test_zero_seconds_reads_the_token_every_time(alice, settings):
    settings.TOKEN_CACHE_SECONDS = 0
    secret = issue_token(alice, "laptop").secret
    check_token(secret)
    assert queries_of(lambda: check_token(secret)) == 1


def test_it_keeps_at_most_max_entries_dropping_the_oldest(alice, monkeypatch):
    monkeypatch.setattr(cache, "MAX_ENTRIES", 3)
    secrets = [issue_token(alice, f"t{n}").secret for n in range(5)]
    for secret in secrets:
        check_token(secret)
    assert len(cache._entries) == 3
    assert queries_of(lambda: check_token(secrets[-1])) == 0
    assert queries_of(lambda: check_token(secrets[0])) == 1


def test_each_caller_gets_objects_of_its_own(alice):
    secret = issue_token(alice, "laptop").secret
    first = check_token(secret)
    first.user.is_staff = True
    first.name = "changed"
    second = check_token(secret)
    assert not second.user.is_staff and second.name == "laptop"
    assert second is not first and second.user is not first.user


def test_through_the_api_a_token_revoked_with_the_api_answers_401_on_its_next_call(alice):
    issued = issue_token(alice, "laptop")
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {issued.secret}")
    assert client.get("/api/v1/quota").status_code == 200
    assert client.delete(f"/api/v1/tokens/{issued.token.id}").status_code == 204
    assert client.get("/api/v1/quota").status_code == 401
